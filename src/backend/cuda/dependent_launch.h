// Programmatic dependent launch (Hopper) for every kernel of the decode step.
//
// A decode step is ~10 small kernels per layer; launched plainly, each one starts only after the
// one before it has drained, and its blocks then ramp up from nothing — a few microseconds per
// boundary, which at 36 layers is a fifth of a Qwen3-4B token. Launched as a programmatic
// dependent, a kernel is scheduled while the one before it is still running: it can issue loads
// that depend on no earlier kernel (weights), then waits (wait_for_previous_kernel) until the
// previous kernel has finished and its writes are visible. Stream capture records the launch as a
// programmatic graph edge, so the captured decode graph keeps the overlap.
//
// The contract for a kernel launched with launch_dependent: it calls wait_for_previous_kernel()
// before it reads anything an earlier kernel wrote and before it writes anything an earlier kernel
// reads or writes — in practice at the top, after any weight prefetch. Every kernel must call it
// (even one that touches nothing of its predecessor): a kernel's completion then implies its
// predecessor's, so the ordering stays transitive down the chain. Launched without the attribute
// (or on a stream with no earlier kernel) the wait returns at once.
//
// Triggered after the wait. A kernel normally lets the next one launch at its very start. Bifocal's
// window attention (DecodeAttentionArgs::launch_next_after_wait) triggers only after its wait
// instead: the next kernel then starts only once every kernel before the attention has completed,
// so it may read their outputs before it waits — it waits only for the attention's own. Bifocal's
// mLSTM step (mlstm_decode.cu) runs beside the window attention that way, and waits only to mix in
// the window's output. Such early reads go through L2 (ld.global.cg, cp.async.cg), never L1, whose
// lines are not kept coherent with other multiprocessors' writes.
//
// Waiting at the end. Bifocal's prefill turns that round: the mLSTM's denominators kernel triggers
// after its wait, and the window attention launched next (PrefillAttentionArgs::
// beside_previous_kernel) needs nothing from it, so it reads its inputs at once — all written
// before the denominators' wait returned, by kernels that had completed before the attention
// launched — and waits only at its end, so that its completion still implies the denominators'.
// The mLSTM's bf16 outputs kernel, launched after that attention, waits for the denominators
// through a count in memory (PrefillArgs::outputs_beside_window) and takes its grid wait, which
// waits for the attention, only before it adds its outputs onto the attention's: a kernel's grid
// wait waits for every kernel launched before it on the stream, so a count is the only way to wait
// for an earlier kernel and not the one just before. A count is safe from deadlock because a
// kernel launches only once every block of the one before it has started (or triggered), so the
// blocks it waits for are resident. A block that waits at its end keeps its multiprocessor slot
// until the previous kernel completes: right for a kernel of one wave (the window attention), not
// for one of many short blocks — qk_norm_rope's 5,120 blocks, each waiting at its end for a product
// launched before them, stalled behind it (16 → 27.6 µs, docs/notes/cuda-stop45-2026-12-04.md).
// The window's gather sits beside the mLSTM's contributions kernel the same way in short calls
// (GatherWindowArgs::wait_at_end, PrefillArgs::contributions_launch_next_after_wait): the
// contributions kernel then waits only for the kernel before it, not for the gather, and the scan's
// grid wait, on the gather, still implies the contributions'. Only where the contributions kernel's
// blocks leave the SMs room: at 4K tokens its grid fills them and the gather, waiting for room,
// cost 0.9% (docs/notes/cuda-stop53-2026-12-05.md).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_properties.h"  // spread_shared_bytes for the launches

namespace bifocal::cuda {

namespace device {
// Blocks until the kernel before this one has completed and its memory operations are visible.
__device__ __forceinline__ void wait_for_previous_kernel() { cudaGridDependencySynchronize(); }
// Lets the next kernel be scheduled now (it still waits for this one to complete before it reads).
__device__ __forceinline__ void allow_next_kernel_launch() { cudaTriggerProgrammaticLaunchCompletion(); }
#ifdef __CUDACC__
// Blocks until `count` reaches `target`: the wait for an earlier kernel that is not the one just
// before (above), whose blocks each add 1 once their writes are out (a fence, then the add).
// Thread 0 polls with acquire loads; the fence and barrier after pass that on to the whole block.
__device__ __forceinline__ void wait_for_count(const unsigned* count, unsigned target) {
  if (threadIdx.x == 0) {
    for (;;) {
      unsigned done;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(done) : "l"(count) : "memory");
      if (done >= target) break;
      __nanosleep(128);
    }
    __threadfence();
  }
  __syncthreads();
}
#endif
}  // namespace device

// Raises `kernel`'s dynamic shared memory limit to shared_bytes when that is over the default
// 48 KiB (no allocation, no synchronisation: graph-capture safe).
template <typename... KernelArgs>
void raise_shared_memory_limit(void (*kernel)(KernelArgs...), std::size_t shared_bytes, const char* name) {
  if (shared_bytes > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)), name);
}

// Asks the driver to give `kernel`'s SMs the largest shared-memory carveout (the least L1 cache):
// without the hint it may keep more L1 and fit fewer of the kernel's blocks, or fewer beside
// another kernel's. Set at every launch, not once a process: a fresh CUDA context
// (reset_cuda_context) forgets it. No allocation, no synchronisation: graph-capture safe.
template <typename... KernelArgs>
void prefer_shared_memory_carveout(void (*kernel)(KernelArgs...), const char* name) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
        name);
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...) as a programmatic dependent of the kernel
// before it on `stream`; `cluster_ranks` > 1 also groups blocks in clusters of (ranks, 1, 1).
// Raises the kernel's dynamic shared memory limit when it needs more than the default 48 KiB (no
// allocation, no synchronisation: graph-capture safe).
template <typename... KernelArgs, typename... Args>
void launch_dependent(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, std::size_t shared_bytes,
                      cudaStream_t stream, const char* name, Args&&... args) {
  raise_shared_memory_limit(kernel, shared_bytes, name);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
}

}  // namespace bifocal::cuda
