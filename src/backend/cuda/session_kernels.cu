#include "backend/cuda/session_kernels.cuh"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"

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
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t bits = mix(seed * 0x100000001b3ull + std::uint64_t(i));
    const float unit = float(bits >> 40) * (1.0f / float(1 << 23)) - 1.0f;  // 24 bits → [−1, 1)
    data[i] = T(scale * unit);
  }
}

template <typename T>
__global__ void fill_constant_kernel(T* data, std::int64_t count, T value) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    data[i] = value;
}

__global__ void advance_decode_step_kernel(const std::int32_t* sampled, std::int32_t* next_input, std::int64_t* position) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  *next_input = *sampled;
  *position += 1;
}

int grid_for(std::int64_t count) { return int(std::min<std::int64_t>((count + 255) / 256, 132 * 16)); }

}  // namespace

template <typename T>
void fill_uniform(T* data, std::int64_t count, std::uint64_t seed, float scale, cudaStream_t stream) {
  if (count <= 0) return;
  launch_dependent(fill_uniform_kernel<T>, dim3(grid_for(count)), dim3(256), 0, stream, "fill_uniform", data, count,
                   seed, scale);
}

template <typename T>
void fill_constant(T* data, std::int64_t count, T value, cudaStream_t stream) {
  if (count <= 0) return;
  launch_dependent(fill_constant_kernel<T>, dim3(grid_for(count)), dim3(256), 0, stream, "fill_constant", data, count,
                   value);
}

void advance_decode_step(const std::int32_t* sampled, std::int32_t* next_input, std::int64_t* position,
                         cudaStream_t stream) {
  launch_dependent(advance_decode_step_kernel, dim3(1), dim3(1), 0, stream, "advance_decode_step", sampled, next_input,
                   position);
}

template void fill_uniform<__nv_bfloat16>(__nv_bfloat16*, std::int64_t, std::uint64_t, float, cudaStream_t);
template void fill_uniform<float>(float*, std::int64_t, std::uint64_t, float, cudaStream_t);
template void fill_constant<__nv_bfloat16>(__nv_bfloat16*, std::int64_t, __nv_bfloat16, cudaStream_t);
template void fill_constant<float>(float*, std::int64_t, float, cudaStream_t);
template void fill_uniform<__half>(__half*, std::int64_t, std::uint64_t, float, cudaStream_t);
template void fill_constant<__half>(__half*, std::int64_t, __half, cudaStream_t);
template void fill_constant<std::int64_t>(std::int64_t*, std::int64_t, std::int64_t, cudaStream_t);

}  // namespace bifocal::cuda
