// Shared by the CUDA kernel tests: skip on a machine without a GPU (CI), bf16 / fp16 rounding for
// building CPU references from exactly the values the device sees, and a device round trip.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/device_buffer.h"

namespace bifocal::testing {

inline bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Base fixture of every CUDA test: skipped, not failed, where no GPU is present.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  }
};

inline std::vector<__nv_bfloat16> to_bf16(std::span<const float> values) {
  std::vector<__nv_bfloat16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = __float2bfloat16_rn(values[i]);
  return out;
}

inline std::vector<__half> to_fp16(std::span<const float> values) {
  std::vector<__half> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = __float2half_rn(values[i]);
  return out;
}

inline std::vector<float> to_float(std::span<const __nv_bfloat16> values) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = __bfloat162float(values[i]);
  return out;
}

inline std::vector<float> to_float(std::span<const __half> values) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = __half2float(values[i]);
  return out;
}

// The values a bf16 store would keep: CPU references are computed on these.
inline std::vector<float> round_to_bf16(std::span<const float> values) {
  const auto rounded = to_bf16(values);
  return to_float(rounded);
}

// Every randomized CUDA test draws a fresh seed and names it in its failure output.
class SeededCudaTest : public CudaTest {
 protected:
  const unsigned seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
  ::testing::ScopedTrace trace_{__FILE__, __LINE__, "random seed " + std::to_string(seed_)};
};

// Typed tests over the three storage types, named fp32, bf16 and fp16 in the test list.
struct StorageTypeNames {
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, float> ? "fp32" : std::is_same_v<T, __half> ? "fp16" : "bf16";
  }
};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;

// The 16-bit activation type a model of storage T writes where it narrows (the o_proj and
// down_proj inputs): T itself for bf16 and fp16, bf16 for the fp32 test path.
template <typename T>
using Narrow = std::conditional_t<std::is_same_v<T, __half>, __half, __nv_bfloat16>;

// The values as the storage type T (float, bf16 or fp16) holds them on the device …
template <typename T>
std::vector<T> to_storage(const std::vector<float>& values) {
  if constexpr (std::is_same_v<T, float>)
    return values;
  else if constexpr (std::is_same_v<T, __half>)
    return to_fp16(values);
  else
    return to_bf16(values);
}

// … and those values back as floats: CPU references are computed on these.
template <typename T>
std::vector<float> as_stored(const std::vector<float>& values) {
  if constexpr (std::is_same_v<T, float>)
    return values;
  else
    return to_float(std::span<const T>(to_storage<T>(values)));
}

// Values bf16 and fp16 both hold exactly: bf16's 8-bit significand, with the magnitudes below
// fp16's smallest normal (2⁻¹⁴, where fp16 loses significand bits) flushed to zero. Exact tests
// (a copy, a bias add) use them for every storage type.
inline std::vector<float> exact_in_16_bits(std::span<const float> values) {
  std::vector<float> out = round_to_bf16(values);
  for (float& x : out)
    if (std::abs(x) < 1.0f / 16384.0f) x = 0.0f;
  return out;
}

// A device copy of host values, and a device buffer read back as floats.
template <typename T>
cuda::DeviceBuffer<T> upload(const std::vector<T>& values) {
  return cuda::DeviceBuffer<T>(std::span<const T>(values));
}

template <typename T>
std::vector<float> download_floats(const cuda::DeviceBuffer<T>& buffer) {
  if constexpr (std::is_same_v<T, float>)
    return buffer.download();
  else
    return to_float(buffer.download());
}

}  // namespace bifocal::testing
