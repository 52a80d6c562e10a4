// Where a kernel's time goes in place, phase by phase: a debug build's instrumentation, compiled in
// only with the kernel's own flag (BIFOCAL_WINDOW_ATTENTION_PHASES: window_phase_stamps.cuh;
// BIFOCAL_MLSTM_DENOMINATOR_PHASES: mlstm_prefill_denominators.cu; BIFOCAL_PREFILL_ATTENTION_PHASES:
// attention_prefill_phase_stamps.cuh), e.g.
// `cmake -DCMAKE_CUDA_FLAGS=-DBIFOCAL_MLSTM_DENOMINATOR_PHASES=1`. The default build has none of it.
//
// Why: a GPU timeline (tools/cuda/kernel_timeline.sh) gives each kernel's start and end beside the
// kernels around it, and Nsight Compute runs a kernel alone; neither says where a block's time goes
// in place. Here thread 0 of every block reads %globaltimer at eight points of the kernel, and in
// one chosen launch (launches are counted per block, so it is the same launch for every block of a
// grid that keeps its shape) prints them on one line:
//   TAG BLOCK t0 t1 … t7 CYCLES   (ns, the GPU's global timer; SM cycles from t0 to t7)
// tools/cuda/phase_stamps.py turns a launch's lines into each phase's spread over the blocks. Over
// the same nanoseconds the cycles give the clock the multiprocessor ran at in place.
// The global timer advances in 256 ns steps on the H200 (docs/notes/cuda-stop26-2026-12-03.md): a
// phase reads as a multiple of 0.256 µs in one block; the medians over the blocks smooth that.
#pragma once

#include <cstdio>

namespace bifocal::cuda::device {

inline constexpr int kStampedPoints = 8;  // t0 (begin) … t7 (the last mark)

template <bool kEnabled>
struct PhaseStamps {
  unsigned long long at[kStampedPoints] = {};
  long long first_cycle = 0, last_cycle = 0;  // %clock64 beside at[0] and at[kStampedPoints − 1]

  static __device__ unsigned long long now() {
    unsigned long long time;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
    return time;
  }
  __device__ void begin() {
    if constexpr (kEnabled) {
      if (threadIdx.x != 0) return;
      first_cycle = clock64();
      at[0] = now();
    }
  }
  __device__ void mark(int point) {
    if constexpr (kEnabled) {
      if (threadIdx.x != 0) return;
      at[point] = now();
      if (point == kStampedPoints - 1) last_cycle = clock64();
    }
  }
  // Prints this block's stamps if this is its `recorded_launch`-th launch, counted in
  // launches[block] (blocks from counted_blocks on print nothing).
  __device__ void report(const char* tag, unsigned* launches, unsigned counted_blocks, unsigned block,
                         unsigned recorded_launch) const {
    if constexpr (kEnabled) {
      if (threadIdx.x != 0 || block >= counted_blocks) return;
      // Counted here, at the end: an increment at the start stalled warp 0 until its load returned
      // (a global round trip, ~1 µs in place), inside the very phase it measures.
      if (launches[block]++ != recorded_launch) return;
      printf("%s %u %llu %llu %llu %llu %llu %llu %llu %llu %lld\n", tag, block, at[0], at[1], at[2], at[3], at[4],
             at[5], at[6], at[7], last_cycle - first_cycle);
    }
  }
};

}  // namespace bifocal::cuda::device
