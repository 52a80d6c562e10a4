// Where a kernel's time goes in place, phase by phase: a debug build's instrumentation, compiled in
// only with the kernel's own flag (BIFOCAL_WINDOW_ATTENTION_PHASES: window_phase_stamps.cuh;
// BIFOCAL_MLSTM_DENOMINATOR_PHASES: mlstm_prefill_denominators.cu; BIFOCAL_PREFILL_ATTENTION_PHASES:
// attention_prefill_phase_stamps.cuh), e.g.
// `cmake -DCMAKE_CUDA_FLAGS=-DBIFOCAL_MLSTM_DENOMINATOR_PHASES=1`. The default build has none of it.
//
// Why: a GPU timeline (tools/cuda/kernel_timeline.sh) gives each kernel's start and end beside the
// kernels around it, and Nsight Compute runs a kernel alone; neither says where a block's time goes
// in place. Here thread 0 of every block reads %globaltimer at eight points of the kernel, keeps
// them in one chosen launch (launches are counted per block, so it is the same launch for every
// block of a grid that keeps its shape) and prints them in the next one, on one line:
//   TAG BLOCK t0 t1 … t7 CYCLES   (ns, the GPU's global timer; SM cycles from t0 to t7)
// Printed a launch later because device printf is slow and disturbs what runs beside it: printed
// at the end of the recorded launch, the 1K prefill attention's blocks (two waves of them) spread
// over 1.1 ms, where the kernel runs ~85 µs, and its first wave passed its wait for the
// denominators kernel ~60 µs after that kernel's count was complete; printed a launch later, the
// same kernel's blocks span 83 µs and wait 0.6 µs (docs/notes/cuda-stop67-2026-12-06.md).
// tools/cuda/phase_stamps.py turns a launch's lines into each phase's spread over the blocks. Over
// the same nanoseconds the cycles give the clock the multiprocessor ran at in place.
// The global timer advances in 256 ns steps on the H200 (docs/notes/cuda-stop26-2026-12-03.md): a
// phase reads as a multiple of 0.256 µs in one block; the medians over the blocks smooth that.
#pragma once

#include <cstdio>

namespace bifocal::cuda::device {

inline constexpr int kStampedPoints = 8;  // t0 (begin) … t7 (the last mark)

// One block's record in a stamped kernel's log (a __device__ array, one entry a block): the
// launches it has seen, and the recorded launch's stamps until the next launch prints them.
struct PhaseLog {
  unsigned launches;
  unsigned long long at[kStampedPoints];
  long long cycles;
};

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
  // Keeps this block's stamps in logs[block] if this is its `recorded_launch`-th launch, and prints
  // the kept ones in the launch after (blocks from counted_blocks on keep and print nothing).
  __device__ void report(const char* tag, PhaseLog* logs, unsigned counted_blocks, unsigned block,
                         unsigned recorded_launch) const {
    if constexpr (kEnabled) {
      if (threadIdx.x != 0 || block >= counted_blocks) return;
      // Counted here, at the end: an increment at the start stalled warp 0 until its load returned
      // (a global round trip, ~1 µs in place), inside the very phase it measures.
      PhaseLog& log = logs[block];
      const unsigned launch = log.launches++;
      if (launch == recorded_launch) {
        for (int i = 0; i < kStampedPoints; ++i) log.at[i] = at[i];
        log.cycles = last_cycle - first_cycle;
      } else if (launch == recorded_launch + 1) {
        printf("%s %u %llu %llu %llu %llu %llu %llu %llu %llu %lld\n", tag, block, log.at[0], log.at[1], log.at[2],
               log.at[3], log.at[4], log.at[5], log.at[6], log.at[7], log.cycles);
      }
    }
  }
};

}  // namespace bifocal::cuda::device
