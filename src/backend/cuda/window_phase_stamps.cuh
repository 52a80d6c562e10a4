// The decode window attention's phases in place (phase_stamps.cuh): compiled in only with
// -DBIFOCAL_WINDOW_ATTENTION_PHASES=1 (e.g. `cmake -DCMAKE_CUDA_FLAGS=-DBIFOCAL_WINDOW_ATTENTION_PHASES=1`;
// the default build has none of it). Every block of one decode step's attention prints
//   window-phases BLOCK t0 … t7 CYCLES
// and `tools/cuda/phase_stamps.py` (window, its default) turns the 128 lines into each phase's spread
// over the blocks.
//
// Why: stop 30's GPU timeline (tools/cuda/kernel_timeline.sh) has the attention ending 11.6 µs
// after q+k+v on Qwen3-4B, where its cost model expects ~2 µs, and Nsight Compute cannot say why —
// it runs the kernel alone, without the products launched around it. A latency-bound phase lasts
// its cycles over the clock, and a power limit could lower it beside memory-bound products, which
// Nsight Compute's isolated runs would not show (stop 32: 1,979 MHz, the full clock).
#pragma once

#include "backend/cuda/phase_stamps.cuh"

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
static_assert(kWindowPhaseCount == kStampedPoints, "report() prints eight stamps");

// The launch recorded: the 10th decode step's 19th layer for a model with 36 window-attention
// layers (the first graph launch is bench's warm-up step).
inline constexpr unsigned kRecordedLaunch = 36 * 9 + 18;

// Each block's launches and kept stamps (this file is included by attention_decode_window.cu
// alone); one unused entry in a build without the stamps.
inline constexpr unsigned kCountedBlocks = kWindowPhaseStamps ? 4096 : 1;
static __device__ PhaseLog window_phase_logs[kCountedBlocks];

struct WindowPhaseStamps : PhaseStamps<kWindowPhaseStamps> {
  __device__ void report() const {
    PhaseStamps::report("window-phases", window_phase_logs, kCountedBlocks, blockIdx.x, kRecordedLaunch);
  }
};

}  // namespace bifocal::cuda::device
