// Where the decode window attention's time goes in place, phase by phase: a debug build's
// instrumentation, compiled in only with -DBIFOCAL_WINDOW_ATTENTION_PHASES=1 (e.g.
// `cmake -DCMAKE_CUDA_FLAGS=-DBIFOCAL_WINDOW_ATTENTION_PHASES=1`; the default build has none of it).
//
// Why: stop 30's GPU timeline (tools/cuda/kernel_timeline.sh) has the attention ending 11.6 µs
// after q+k+v on Qwen3-4B, where its cost model expects ~2 µs, and Nsight Compute cannot say why —
// it runs the kernel alone, without the products launched around it. Here thread 0 of every block
// reads %globaltimer at the kernel's phases, and in one chosen launch (kRecordedLaunch: the
// launches are counted per block, so the chosen one is the same launch for every block of a grid
// that keeps its shape, as the decode step's attention does) prints them:
//   window-phases BLOCK t0 t1 … t7 CYCLES   (ns, the GPU's global timer; SM cycles t0 → t7)
// tools/cuda/window_phases.py turns the 128 lines into each phase's spread over the blocks. The
// last field counts the SM cycles (%clock64) from the first stamp to the last; over the same
// nanoseconds it gives the clock the multiprocessor ran at in place. A latency-bound phase lasts
// its cycles over that clock, and a power limit could lower it beside memory-bound products,
// which Nsight Compute's isolated runs would not show (stop 32: 1,979 MHz, the full clock).
// The global timer advances in 256 ns steps on the H200 (docs/notes/cuda-stop26-2026-12-03.md):
// a phase reads as a multiple of 0.256 µs in one block; the medians over the blocks smooth that.
#pragma once

#include <cstdio>

#ifndef BIFOCAL_WINDOW_ATTENTION_PHASES
#define BIFOCAL_WINDOW_ATTENTION_PHASES 0
#endif

namespace bifocal::cuda::device {

inline constexpr bool kWindowPhaseStamps = BIFOCAL_WINDOW_ATTENTION_PHASES != 0;

// The phases, in the kernel's order.
enum WindowPhase : int {
  kPhaseStart = 0,      // the block runs (before its L2 prefetch and the wait)
  kPhaseWaited,         // wait_for_previous_kernel returned: q+k+v's output is visible
  kPhaseQueryReady,     // q (and the new key) normed and rotated into shared memory
  kPhaseRowsLanded,     // the first round's rows have landed (after the block barrier)
  kPhaseRoundsDone,     // logits, softmax and P·V of every round
  kPhaseMergeStart,     // the block's partial summed; the first cluster barrier passed
  kPhaseMerged,         // the block's share of the outputs written
  kPhaseEnd,            // the second cluster barrier passed
  kWindowPhaseCount
};
static_assert(kWindowPhaseCount == 8, "report() prints eight stamps");

// The launch recorded: the 10th decode step's 19th layer for a model with 36 window-attention
// layers (the first graph launch is bench's warm-up step).
inline constexpr unsigned kRecordedLaunch = 36 * 9 + 18;

// Launches seen by each block (this file is included by attention_decode_window.cu alone); one
// unused word in a build without the stamps.
inline constexpr unsigned kCountedBlocks = kWindowPhaseStamps ? 4096 : 1;
static __device__ unsigned window_phase_launches[kCountedBlocks];

struct WindowPhaseStamps {
  unsigned long long at[kWindowPhaseCount] = {};
  long long first_cycle = 0, last_cycle = 0;  // %clock64 beside at[kPhaseStart] and at[kPhaseEnd]

  static __device__ unsigned long long now() {
    unsigned long long time;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
    return time;
  }
  __device__ void begin() {
    if constexpr (kWindowPhaseStamps) {
      if (threadIdx.x != 0) return;
      first_cycle = clock64();
      at[kPhaseStart] = now();
    }
  }
  __device__ void mark(WindowPhase phase) {
    if constexpr (kWindowPhaseStamps) {
      if (threadIdx.x != 0) return;
      at[phase] = now();
      if (phase == kPhaseEnd) last_cycle = clock64();
    }
  }
  __device__ void report() const {
    if constexpr (kWindowPhaseStamps) {
      if (threadIdx.x != 0 || blockIdx.x >= kCountedBlocks) return;
      // Counted here, at the end: the increment at the start stalled warp 0 until its load
      // returned (a global round trip, ~1 µs in place), inside the very phase it measures.
      if (window_phase_launches[blockIdx.x]++ != kRecordedLaunch) return;
      printf("window-phases %u %llu %llu %llu %llu %llu %llu %llu %llu %lld\n", blockIdx.x, at[0], at[1], at[2], at[3],
             at[4], at[5], at[6], at[7], last_cycle - first_cycle);
    }
  }
};

}  // namespace bifocal::cuda::device
