// Shared by the recurrent-mixer kernel tests (recurrent_test.cpp, bifocal_decode_test.cpp):
// fresh seeds, cache element conversions, device copies and the mLSTM token sequences.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/mlstm.h"
#include "backend/cuda/device_buffer.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal::testing {

inline unsigned fresh_seed() { return std::random_device{}(); }

inline std::vector<float> normal_vector(std::size_t size, std::mt19937& rng, float mean, float deviation) {
  std::normal_distribution<float> normal(mean, deviation);
  std::vector<float> x(size);
  for (float& value : x) value = normal(rng);
  return x;
}

// A cache element type's name, for test traces.
template <typename T>
const char* storage_name() {
  return std::is_same_v<T, float> ? "fp32" : "bf16";
}

// T cache values back as fp32 (to_storage and as_stored are in cuda_test_support.h).
template <typename T>
std::vector<float> from_storage(const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, float>) return values;
  else return to_float(values);
}
template <typename T>
cuda::DeviceBuffer<T> on_device(const std::vector<T>& host) {
  return cuda::DeviceBuffer<T>(std::span<const T>(host));
}

// A device buffer of `count` elements whose every byte is 0xFF (NaN in fp32 and bf16), so an
// element a kernel fails to write shows.
template <typename T>
cuda::DeviceBuffer<T> poisoned(std::size_t count) {
  cuda::DeviceBuffer<T> buffer(count);
  buffer.fill_bytes(0xFF);
  return buffer;
}

inline void synchronize() { cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

inline std::vector<float> slice(const std::vector<float>& x, std::size_t begin, std::size_t count) {
  return {x.begin() + begin, x.begin() + begin + count};
}

// An mLSTM token sequence: q [n, Hq, d], k, v [n, Hkv, d], raw gates [n, S]. Moderate input gates
// (deviation 1) keep the stabilizer small, where the floor e^{−m} of the denominator stops a
// nearly cancelling q̂ᵀn from magnifying fp32 rounding into the comparison (tests/mlstm_test.cpp).
struct MlstmSequence {
  cpu::MlstmShape shape;
  int n;
  std::vector<float> q, k, v, input_gate, forget_gate;

  MlstmSequence(const cpu::MlstmShape& s, int tokens, std::mt19937& rng)
      : shape(s),
        n(tokens),
        q(normal_vector(std::size_t(tokens) * s.query_heads * s.head_dim, rng, 0, 1)),
        k(normal_vector(std::size_t(tokens) * s.kv_heads * s.head_dim, rng, 0, 1)),
        v(normal_vector(std::size_t(tokens) * s.kv_heads * s.head_dim, rng, 0, 1)),
        input_gate(normal_vector(std::size_t(tokens) * s.states, rng, 0, 1)),
        forget_gate(normal_vector(std::size_t(tokens) * s.states, rng, 2, 3)) {}

  std::size_t q_offset(int t) const { return std::size_t(t) * shape.query_heads * shape.head_dim; }
  std::size_t kv_offset(int t) const { return std::size_t(t) * shape.kv_heads * shape.head_dim; }
  std::size_t gate_offset(int t) const { return std::size_t(t) * shape.states; }
};

// A CPU mLSTM state (fresh: zero).
struct HostMlstmState {
  std::vector<float> matrix, normalizer, stabilizer;
  explicit HostMlstmState(const cpu::MlstmShape& shape)
      : matrix(cpu::mlstm_matrix_floats(shape), 0.0f),
        normalizer(cpu::mlstm_normalizer_floats(shape), 0.0f),
        stabilizer(cpu::mlstm_stabilizer_floats(shape), 0.0f) {}
  cpu::MlstmState view() { return {matrix.data(), normalizer.data(), stabilizer.data()}; }
};

// The same state on the device.
struct DeviceMlstmState {
  cuda::DeviceBuffer<float> matrix, normalizer, stabilizer;
  explicit DeviceMlstmState(const HostMlstmState& host)
      : matrix(on_device(host.matrix)),
        normalizer(on_device(host.normalizer)),
        stabilizer(on_device(host.stabilizer)) {}
  cpu::MlstmState view() { return {matrix.data(), normalizer.data(), stabilizer.data()}; }
};

inline std::string describe(const cpu::MlstmShape& shape) {
  return "Hq=" + std::to_string(shape.query_heads) + " Hkv=" + std::to_string(shape.kv_heads) +
         " S=" + std::to_string(shape.states) + " d=" + std::to_string(shape.head_dim);
}

}  // namespace bifocal::testing
