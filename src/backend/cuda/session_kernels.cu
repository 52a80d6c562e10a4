#include "backend/cuda/session_kernels.cuh"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"

namespace bifocal::cuda {

namespace {

// SplitMix64: a well-mixed 64-bit hash of the element index and the seed.
__device__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(T* data, std::int64_t count, std::uint64_t seed, float scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t bits = mix(seed * 0x100000001b3ull + std::uint64_t(i));
    const float unit = float(bits >> 40) * (1.0f / float(1 << 23)) - 1.0f;  // 24 bits → [−1, 1)
    data[i] = T(scale * unit);
  }
}

template <typename T>
__global__ void fill_constant_kernel(T* data, std::int64_t count, T value) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    data[i] = value;
}

__global__ void advance_decode_step_kernel(const std::int32_t* sampled, std::int32_t* next_input, std::int64_t* position) {
  *next_input = *sampled;
  *position += 1;
}

int grid_for(std::int64_t count) { return int(std::min<std::int64_t>((count + 255) / 256, 132 * 16)); }

}  // namespace

template <typename T>
void fill_uniform(T* data, std::int64_t count, std::uint64_t seed, float scale, cudaStream_t stream) {
  if (count <= 0) return;
  fill_uniform_kernel<<<grid_for(count), 256, 0, stream>>>(data, count, seed, scale);
  check_launch("fill_uniform");
}

template <typename T>
void fill_constant(T* data, std::int64_t count, T value, cudaStream_t stream) {
  if (count <= 0) return;
  fill_constant_kernel<<<grid_for(count), 256, 0, stream>>>(data, count, value);
  check_launch("fill_constant");
}

void advance_decode_step(const std::int32_t* sampled, std::int32_t* next_input, std::int64_t* position,
                         cudaStream_t stream) {
  advance_decode_step_kernel<<<1, 1, 0, stream>>>(sampled, next_input, position);
  check_launch("advance_decode_step");
}

template void fill_uniform<__nv_bfloat16>(__nv_bfloat16*, std::int64_t, std::uint64_t, float, cudaStream_t);
template void fill_uniform<float>(float*, std::int64_t, std::uint64_t, float, cudaStream_t);
template void fill_constant<__nv_bfloat16>(__nv_bfloat16*, std::int64_t, __nv_bfloat16, cudaStream_t);
template void fill_constant<float>(float*, std::int64_t, float, cudaStream_t);
template void fill_constant<std::int64_t>(std::int64_t*, std::int64_t, std::int64_t, cudaStream_t);

}  // namespace bifocal::cuda
