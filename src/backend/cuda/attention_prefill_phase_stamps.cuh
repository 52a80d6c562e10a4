// A debug build's phase stamps for the tensor-core prefill attention that adds Bifocal's mLSTM
// outputs in its epilogue (phase_stamps.cuh; -DBIFOCAL_PREFILL_ATTENTION_PHASES=1, e.g.
// `cmake -DCMAKE_CUDA_FLAGS=-DBIFOCAL_PREFILL_ATTENTION_PHASES=1`): every block keeps its stamps of
// one launch and prints `attention-phases BLOCK t0 … t7 CYCLES` (BLOCK its linear index) in the next;
// `tools/cuda/phase_stamps.py --kernel attention` reads them. The default build has none of it.
//
// Why: the 1K timeline gives the kernel's span only. With the epilogue it runs ~17 µs longer at
// Qwen3-4B and ~20 µs at the Qwen3.5-like shape (docs/notes/cuda-stop66-2026-12-06.md), and whether
// that is the epilogue's products or its blocks waiting for the denominators kernel (which runs
// beside it) decides what to change next. Built with BIFOCAL_MLSTM_DENOMINATOR_PHASES as well, the
// same run prints the denominators' stamps of the same layer on the same clock.
// DEVICE CODE: include from .cu files only.
#pragma once

#include "backend/cuda/phase_stamps.cuh"

#ifndef BIFOCAL_PREFILL_ATTENTION_PHASES
#define BIFOCAL_PREFILL_ATTENTION_PHASES 0
#endif

namespace bifocal::cuda::prefill_tiles {

// The points, in the kernel's order (thread 0's view; the epilogue's only with the mLSTM outputs).
enum AttentionPhase : int {
  kAttentionStart = 0,     // the block runs
  kAttentionClassified,    // its key tiles classified and the first one issued (after the start's wait, if any)
  kAttentionTilesDone,     // the last key tile computed
  kAttentionRowsStored,    // the (1 − o)·window rows stored
  kAttentionChunkLanded,   // C_c (d = 256: its first 192 rows) and the chunk's keys and values in shared memory
  kAttentionDenominators,  // S = q̂·Kᵀ made and the denominators kernel's count reached (its W, e, 1/den visible)
  kAttentionStateProduct,  // h = q̂·C_c made, and W's rows landed
  kAttentionOutputsAdded,  // o·h added onto the rows
  kAttentionPhaseCount
};
static_assert(kAttentionPhaseCount == device::kStampedPoints, "phase_stamps.cuh prints eight stamps");
inline constexpr bool kAttentionPhaseStamps = BIFOCAL_PREFILL_ATTENTION_PHASES != 0;
using AttentionPhaseStamps = device::PhaseStamps<kAttentionPhaseStamps>;
// Each block's 71st launch, as the denominators' (kRecordedDenominatorLaunch): a steady prefill of
// `bifocal bench --context 1k` (its warm-up prefill, then one a repeat, the model's layers each).
inline constexpr unsigned kRecordedAttentionLaunch = 70;
inline constexpr unsigned kCountedAttentionBlocks = kAttentionPhaseStamps ? 4096 : 1;

}  // namespace bifocal::cuda::prefill_tiles
