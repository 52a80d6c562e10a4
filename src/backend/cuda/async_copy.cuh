// cp.async and the L2 prefetch hints, for the kernels that stage global memory in shared memory.
// cp.async copies global → shared without passing through registers, and the issuing thread does
// not stall on them: a thread's copies are grouped by commit_async_copies() and waited for by
// wait_async_copies<N>() (every group but the N most recent) or wait_all_async_copies(); a barrier
// after the wait makes them visible to the rest of the block.
#pragma once

#include <cstdint>

#include "backend/cuda/device_math.cuh"  // shared_address

namespace bifocal::cuda::device {

// 16 bytes through L2 only (.cg).
__device__ __forceinline__ void copy16_async(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(shared)), "l"(global) : "memory");
}
// The same into the shared-window address `shared` (shared_address of a pointer), reading only the
// first `source_bytes` of `global` and writing zeroes for the rest: 0 reads nothing and writes 16
// zero bytes (a row past the end).
__device__ __forceinline__ void copy16_async_zero_fill(std::uint32_t shared, const void* global, int source_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global), "r"(source_bytes)
               : "memory");
}
__device__ __forceinline__ void copy16_async_zero_fill(void* shared, const void* global, int source_bytes) {
  copy16_async_zero_fill(shared_address(shared), global, source_bytes);
}
// 8 bytes, through L1 (.ca: copies under 16 bytes cannot bypass it).
__device__ __forceinline__ void copy8_async(void* shared, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(shared_address(shared)), "l"(global) : "memory");
}
__device__ __forceinline__ void commit_async_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wait_async_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ void wait_all_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Hints (no register written, nothing waits for them): L2 fetches `bytes` (a multiple of 16) from
// a 16-byte aligned address, or the 128-byte line holding `global`.
__device__ __forceinline__ void prefetch_bytes_to_l2(const void* global, int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(global), "r"(bytes) : "memory");
}
__device__ __forceinline__ void prefetch_line_to_l2(const void* global) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(global));
}

}  // namespace bifocal::cuda::device
