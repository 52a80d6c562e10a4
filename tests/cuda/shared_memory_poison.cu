// shared_memory_poison.h's kernel: a block an SM of the opt-in maximum of dynamic shared memory,
// every 16-byte word set to all ones.
#include "cuda/shared_memory_poison.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace bifocal::testing {
namespace {

__global__ void poison_kernel(int words) {
  extern __shared__ uint4 shared[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) shared[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
}

}  // namespace

void poison_shared_memory() {
  int device = 0, sms = 0, bytes = 0;
  cuda::check(cudaGetDevice(&device), "poison_shared_memory");
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "poison_shared_memory");
  cuda::check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "poison_shared_memory");
  cuda::check(cudaFuncSetAttribute(poison_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
              "poison_shared_memory");
  // Twice the SMs: one block an SM at this size, so every SM gets one whatever the scheduler does.
  poison_kernel<<<2 * sms, 1024, bytes>>>(bytes / 16);
  cuda::check(cudaGetLastError(), "poison_kernel");
  cuda::check(cudaDeviceSynchronize(), "poison_kernel");
}

}  // namespace bifocal::testing
