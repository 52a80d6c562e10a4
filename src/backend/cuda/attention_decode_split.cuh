// What the long-cache (split) path of decode attention shares between its two files:
// attention_decode.cu (the split kernel and the dispatch) and attention_decode_combine.cu (the
// split plan, the partials' workspace and the combine kernel). The plan sizes its grid from the
// split kernel's geometry; the split kernel writes the partials the combine merges. DEVICE CODE:
// include from .cu files only; the contract is in attention_decode.cuh.
#pragma once

#ifndef __CUDACC__
#error "attention_decode_split.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_math.cuh"

namespace bifocal::cuda::attention_decode_detail {

inline constexpr int kTileSlots = 16;      // slots per tile: the mma's M
inline constexpr int kMaxWarps = 4;        // warps per block, each with its own ring and tiles
inline constexpr int kHeadsPerUnit = 8;    // query heads of one KV head a block serves: the mma's N
inline constexpr int kBlocksPerSm = 2;     // what one wave assumes (bf16, d ≤ 128: 108 KiB per block)
inline constexpr int kMaxSplits = 1024;
inline constexpr float kLog2e = 1.4426950408889634f;

// ---- The output store of both kernels -------------------------------------------------------

template <typename OutT>  // float, bf16 or fp16
__device__ __forceinline__ void store_out(OutT* out, float value) { *out = device::from_float<OutT>(value); }

// ---- Plan and partials (attention_decode_combine.cu) ----------------------------------------

// A unit is one KV head and up to kHeadsPerUnit of its query heads (larger GQA groups take
// several units, each reading the KV head's rows). One block per (unit, split); the splits cut
// the slots into contiguous ranges.
struct DecodePlan {
  int slices, units, splits;
};

// The splits of a cache of `slots` slots: one wave of blocks (kBlocksPerSm per SM), but no block
// with fewer tiles than warps.
DecodePlan plan_decode(std::int64_t slots, int query_heads, int kv_heads);

// Workspace layout, all fp32: partial accumulator [splits, Hq, d] first (16-byte aligned rows),
// partial max (base-2 logits) [splits, Hq], partial sum [splits, Hq].
struct Partials {
  float* acc;
  float* max;
  float* sum;
};

Partials partials_in(void* workspace, int splits, int query_heads, int head_dim);

// The combine kernel on `stream` (one block per query head): out = the splits' partials merged,
// the learned sink included; launch_next_after_wait as DecodeAttentionArgs'.
template <typename OutT>
void launch_combine(Partials partials, int splits, int query_heads, int head_dim, const float* learned_sinks,
                    bool launch_next_after_wait, OutT* out, cudaStream_t stream);

}  // namespace bifocal::cuda::attention_decode_detail
