// The tensor-core prefill attention's building blocks (attention_prefill_tensor_core.cu, whose
// header holds the design): the block's shape constants, its shared memory, the key tiles'
// classes and copies, and one warp's 16 query rows against one tile (S = Q·Kᵀ, the online
// softmax, O += P·V). Bifocal's mLSTM epilogue (attention_prefill_mlstm_outputs.cuh) reuses the
// tile buffers and these fragments.
// DEVICE CODE: include from .cu files only.
#pragma once

#ifndef __CUDACC__
#error "attention_prefill_tiles.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/tensor_core_fragments.cuh"

namespace bifocal::cuda::prefill_tiles {

using device::key_visible;

inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kWarpRows = 16;                   // the M of mma.m16n8k16
inline constexpr int kBlockRows = kWarpRows * kWarps;  // 64 query rows per block
inline constexpr int kTileKeys = 64;                   // keys per shared tile: 8 mma N tiles of S
inline constexpr int kMaxHeadsPerBlock = 16;
inline constexpr int kBitmapWords = 512;                // tile classes held for the first 16,384 tiles
inline constexpr int kBitmapTiles = 32 * kBitmapWords;  // (1M keys); later tiles count as masked
inline constexpr float kLog2e = 1.4426950408889634f;
// Blocks resident per SM: 3 × 71 KiB of shared memory for d = 128 (168 registers a thread), 4 for
// d = 64; ptxas then spills a few cold values (40–60 bytes, the same amount up to 200 registers).
// 2 × 104 KiB for d = 256 (half of O a block; 252 registers, no spill).
template <int D>
inline constexpr int kBlocksPerSm = D == 256 ? 2 : D == 128 ? 3 : 4;
inline constexpr unsigned kFullWarp = 0xffffffffu;

// ---- PTX: asynchronous copies, ldmatrix, mma, ex2 ------------------------------------------------

using device::commit_async_copies;
using device::copy16_async_zero_fill;
using device::copy8_async;
using device::shared_address;
using device::wait_async_copies;

// ldmatrix and the m16n8k16 mma: tensor_core_fragments.cuh.
using device::load_matrices;
using device::load_matrices_transposed;
using device::mma_m16n8k16;

// 2^x in one MUFU.EX2; 2^−∞ = 0.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as the T pair of one fragment register (the lower column in the low half).
using device::pack_pair;

template <typename OutT>  // float, bf16 or fp16
__device__ __forceinline__ void store_pair(OutT* dst, float x, float y) {
  if constexpr (std::is_same_v<OutT, float>) *reinterpret_cast<float2*>(dst) = make_float2(x, y);
  else *reinterpret_cast<std::uint32_t*>(dst) = pack_pair<OutT>(x, y);
}

// ---- Shared memory and tile classes -------------------------------------------------------------

template <typename T, int D, int DV>
struct SharedStorage {
  T keys[2][kTileKeys * D];  // two tile buffers, rows swizzled (swizzled_offset)
  T values[2][kTileKeys * DV];  // the block's DV columns of each value row
  std::int64_t key_positions[2][kTileKeys];            // −1: empty or past num_keys
  std::uint32_t visible_tiles[kBitmapWords];           // bit t: some row of the block sees some key of tile t
  std::uint32_t full_tiles[kBitmapWords];              // every row sees every key: no mask needed
  std::uint32_t ragged_tiles[kBitmapWords];            // some key is seen by no row: zero its value row
  std::int64_t row_positions[kBlockRows];              // −1 for a padding row past n (sees no key)
  float row_scales[kBlockRows];                        // 1, or Bifocal's 1 − o (output_gate)
  std::int64_t warp_first[kWarps], warp_last[kWarps];  // spans of query positions (block_span)
};

// Element offset of 16-byte chunk `chunk` of key row `key` in a tile of width W.
template <int W>
__device__ __forceinline__ int swizzled_offset(int key, int chunk) {
  return key * W + (chunk ^ (key & 7)) * 8;  // key ≥ 0: key & 7 = key % 8
}

// Whether a key at position kp (−1: empty) is seen by some / by every query position in
// [first, last] under key_visible: from kp on for full attention and sink tokens, else for the
// `span` = window − sink_tokens positions kp … kp + span − 1.
struct KeyReach {
  bool seen_by_some, seen_by_all;
};
__device__ __forceinline__ KeyReach key_reach(std::int64_t kp, std::int64_t first, std::int64_t last, int window,
                                              int sink_tokens) {
  if (kp < 0) return {false, false};
  if (window == 0 || kp < sink_tokens) return {kp <= last, kp <= first};
  const std::int64_t span = std::int64_t(window) - sink_tokens;
  return {span > 0 && kp <= last && kp > first - span, kp <= first && kp > last - span};
}

// The span [first, last] of the block's query positions, from the per-warp spans.
template <typename Storage>
__device__ __forceinline__ void block_span(const Storage& shared, std::int64_t& first, std::int64_t& last) {
  first = shared.warp_first[0];
  last = shared.warp_last[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    first = min(first, shared.warp_first[w]);
    last = max(last, shared.warp_last[w]);
  }
}

// The three bitmaps of SharedStorage (zeroed before) for the block's query span. A warp takes
// one tile at a time, two keys per lane, and the unrolled loop keeps 8 tiles' position loads in
// flight: for a gathered cache this pass is the block's only wait on memory before its first tile.
template <typename T, typename Storage>
__device__ __forceinline__ void classify_tiles(const PrefillAttentionArgs<T>& a, Storage& shared,
                                               int num_tiles, std::int64_t first, std::int64_t last) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles = min(num_tiles, kBitmapTiles);
#pragma unroll 8
  for (int tile = warp; tile < tiles; tile += kWarps) {
    bool some = false, all = true, missing = false;  // over this lane's keys 2·lane and 2·lane + 1
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const std::int64_t j = std::int64_t(tile) * kTileKeys + 2 * lane + k;
      const std::int64_t kp = j >= a.num_keys ? -1 : a.key_positions ? a.key_positions[j] : j;
      const KeyReach reach = key_reach(kp, first, last, a.window, a.sink_tokens);
      some |= reach.seen_by_some;
      all &= reach.seen_by_all;
      missing |= !reach.seen_by_some;
    }
    const bool visible = __any_sync(kFullWarp, some), full = __all_sync(kFullWarp, all);
    const bool ragged = __any_sync(kFullWarp, missing);
    if (lane == 0) {
      const std::uint32_t bit = 1u << (tile % 32);
      if (visible) atomicOr(&shared.visible_tiles[tile / 32], bit);
      if (full) atomicOr(&shared.full_tiles[tile / 32], bit);
      if (ragged) atomicOr(&shared.ragged_tiles[tile / 32], bit);
    }
  }
}

// The first tile after `after` that some row sees (tiles past the bitmaps count as seen);
// num_tiles when none is left.
template <typename Storage>
__device__ int next_visible_tile(const Storage& shared, int after, int num_tiles) {
  int tile = after + 1;
  while (tile < num_tiles && tile < kBitmapTiles) {
    const std::uint32_t rest = shared.visible_tiles[tile / 32] >> (tile % 32);
    if (rest != 0) return tile + __ffs(int(rest)) - 1;
    tile = (tile / 32 + 1) * 32;
  }
  return tile < num_tiles ? tile : num_tiles;
}

// Rows first_key … of one tile of width W from each of `sources` (W columns from `column_offset`,
// rows `row_stride` apart) into the matching `tiles`, swizzled, asynchronously; rows past num_keys
// are zeros and nothing past the arrays is read. A thread copies the same chunk of every
// (kThreads / kChunks)-th key: one global offset for all sources, advanced by a constant stride.
template <int W, int kSources, typename T>
__device__ __forceinline__ void copy_tile_rows(T* const (&tiles)[kSources], const T* const (&sources)[kSources],
                                               std::int64_t first_key, std::int64_t num_keys, std::size_t row_stride,
                                               std::size_t column_offset) {
  constexpr int kChunks = W / 8;  // 16-byte chunks per row
  constexpr int kKeysPerPass = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kTileKeys % kKeysPerPass == 0);
  const int key = int(threadIdx.x) / kChunks, chunk = int(threadIdx.x) % kChunks;
  const std::size_t offset = std::size_t(first_key + key) * row_stride + column_offset + chunk * 8;
#pragma unroll
  for (int pass = 0; pass < kTileKeys / kKeysPerPass; ++pass) {
    const int row = key + pass * kKeysPerPass;
    const bool present = first_key + row < num_keys;
    const std::size_t pass_offset = present ? offset + std::size_t(pass) * kKeysPerPass * row_stride : 0;
#pragma unroll
    for (int i = 0; i < kSources; ++i)
      copy16_async_zero_fill(&tiles[i][swizzled_offset<W>(row, chunk)], sources[i] + pass_offset, present ? 16 : 0);
  }
}

// Tile `tile`'s keys (all D columns), values (DV columns from first_value_column) and positions
// into buffer `buffer`, asynchronously.
template <typename T, int D, int DV>
__device__ __forceinline__ void load_tile(const PrefillAttentionArgs<T>& a, SharedStorage<T, D, DV>& shared, int buffer,
                                          int tile, int kv, int first_value_column) {
  const std::int64_t first_key = std::int64_t(tile) * kTileKeys;
  const std::size_t row_stride = std::size_t(a.kv_heads) * D, head = std::size_t(kv) * D;
  if constexpr (D == DV) {
    copy_tile_rows<D, 2, T>({shared.keys[buffer], shared.values[buffer]}, {a.keys, a.values}, first_key, a.num_keys,
                            row_stride, head);
  } else {
    copy_tile_rows<D, 1, T>({shared.keys[buffer]}, {a.keys}, first_key, a.num_keys, row_stride, head);
    copy_tile_rows<DV, 1, T>({shared.values[buffer]}, {a.values}, first_key, a.num_keys, row_stride,
                             head + first_value_column);
  }
  if (threadIdx.x < kTileKeys) {
    const std::int64_t j = first_key + threadIdx.x;
    std::int64_t* position = &shared.key_positions[buffer][threadIdx.x];
    if (j < a.num_keys && a.key_positions != nullptr)
      copy8_async(position, a.key_positions + j);
    else
      *position = j < a.num_keys ? j : -1;
  }
}

// Zeros the value rows of the keys in `buffer` that no row of the block sees (their weight is 0,
// but their contents may be NaN). Needs a barrier before and after.
template <typename T, int D, int DV>
__device__ void zero_unseen_values(SharedStorage<T, D, DV>& shared, int buffer, int window, int sink_tokens) {
  constexpr int kChunks = DV / 8;
  std::int64_t first, last;
  block_span(shared, first, last);
#pragma unroll
  for (int pass = 0; pass < kTileKeys * kChunks / kThreads; ++pass) {
    const int idx = pass * kThreads + int(threadIdx.x), key = idx / kChunks;
    if (!key_reach(shared.key_positions[buffer][key], first, last, window, sink_tokens).seen_by_some)
      *reinterpret_cast<uint4*>(&shared.values[buffer][key * DV + (idx % kChunks) * 8]) = make_uint4(0, 0, 0, 0);
  }
}

// ---- One warp's 16 rows against one tile ---------------------------------------------------------

// The online-softmax state of a lane's two rows (fragment rows lane / 4 and lane / 4 + 8): the
// running max m (base 2, scaled), the lane's share l of the denominator (its 16 columns of each
// tile; the four lanes of a row add theirs at the end) and the output accumulator O.
template <int D, int DV>
struct RowState {
  std::uint32_t q[D / 16][4];  // A fragments of bf16 Q, one per 16 columns
  float o[DV / 8][4];          // C fragments of the block's DV columns of O, one per 8 columns
  float m[2], l[2];
};

// The shared byte addresses of the ldmatrix rows a lane names. Step ks of S (dp of O) reads chunk
// 2·ks + c of key row r (r % 8 = the lane's matrix row); the swizzle ^ r only touches the low three
// bits, so (2·ks + c) ^ r = 8·(ks / 4) + ((2·(ks % 4) + c) ^ r). The 8·(ks / 4) chunks and the N
// tile's key offset are immediates of the load; the four values of ks % 4 are four registers.
struct LaneAddresses {
  std::uint32_t keys[4], values[4];
};

template <typename T, int D, int DV>
__device__ __forceinline__ LaneAddresses lane_addresses(const SharedStorage<T, D, DV>& shared, int buffer) {
  const int lane = threadIdx.x % 32, matrix = lane / 8, matrix_row = lane % 8;
  // K (S = Q·Kᵀ): matrix i of one ldmatrix.x4 holds keys 8·(i / 2) + 0…7 at chunk 2·ks + i % 2.
  // V (O += P·V, .trans): matrix i holds keys 8·(i % 2) + 0…7 at chunk 2·dp + i / 2.
  const int key_row = (matrix / 2) * 8 + matrix_row, key_chunk = matrix % 2;
  const int value_row = (matrix % 2) * 8 + matrix_row, value_chunk = matrix / 2;
  const std::uint32_t keys = shared_address(shared.keys[buffer]), values = shared_address(shared.values[buffer]);
  LaneAddresses out;
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    out.keys[x] = keys + (key_row * D + ((2 * x + key_chunk) ^ matrix_row) * 8) * sizeof(T);
    out.values[x] = values + (value_row * DV + ((2 * x + value_chunk) ^ matrix_row) * 8) * sizeof(T);
  }
  return out;
}

template <typename T, int D, int DV, bool kMasked>
__device__ __forceinline__ void attend_tile(const SharedStorage<T, D, DV>& shared, int buffer, RowState<D, DV>& rows,
                                            int window, int sink_tokens) {
  constexpr float scale = kLog2e * (D == 64 ? 0.125f : D == 128 ? 0.08838834764831845f : 0.0625f);  // log2(e) / √D
  const int lane = threadIdx.x % 32, quad = lane % 4;
  const LaneAddresses address = lane_addresses(shared, buffer);

  // S = Q·Kᵀ: one ldmatrix.x4 gives the B fragments of two N tiles (keys 16·np … +15) for one
  // k step (columns 16·ks … +15).
  float s[kTileKeys / 8][4] = {};
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int np = 0; np < kTileKeys / 16; ++np) {
      std::uint32_t b[4];
      load_matrices(b, address.keys[ks % 4] + (16 * np * D + 64 * (ks / 4)) * sizeof(T));
      mma_m16n8k16<T>(s[2 * np], rows.q[ks], b[0], b[1]);
      mma_m16n8k16<T>(s[2 * np + 1], rows.q[ks], b[2], b[3]);
    }
  }

  // The mask: a lane's columns are keys 8·nt + 2·quad and + 1, its rows warp·16 + lane / 4 and + 8.
  if constexpr (kMasked) {
    const int row = (threadIdx.x / 32) * kWarpRows + lane / 4;
    const std::int64_t position[2] = {shared.row_positions[row], shared.row_positions[row + 8]};
#pragma unroll
    for (int nt = 0; nt < kTileKeys / 8; ++nt) {
      const longlong2 kp = *reinterpret_cast<const longlong2*>(&shared.key_positions[buffer][8 * nt + 2 * quad]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (!key_visible(position[r], kp.x, window, sink_tokens)) s[nt][2 * r] = -INFINITY;
        if (!key_visible(position[r], kp.y, window, sink_tokens)) s[nt][2 * r + 1] = -INFINITY;
      }
    }
  }

  // Online softmax per row: the tile max over the row's four lanes, then (l, O) rescaled to the new
  // max — skipped when no row of the warp has a new max, the common case once a row has seen its
  // largest logits — and weights 2^{s·scale − m}. While a row has seen nothing m stays −∞; `shift`
  // keeps the correction at 2^{−∞} = 0 rather than NaN.
  float shift[2], correction[2];
  bool new_max_seen = false;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kTileKeys / 8; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 2));
    const float new_max = fmaxf(rows.m[r], tile_max * scale);
    new_max_seen |= new_max != rows.m[r];
    shift[r] = new_max == -INFINITY ? 0.0f : new_max;
    correction[r] = exp2_fast(rows.m[r] - shift[r]);
    rows.m[r] = new_max;
  }
  if (__any_sync(kFullWarp, new_max_seen)) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rows.l[r] *= correction[r];
#pragma unroll
      for (int nt = 0; nt < DV / 8; ++nt) {
        rows.o[nt][2 * r] *= correction[r];
        rows.o[nt][2 * r + 1] *= correction[r];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int nt = 0; nt < kTileKeys / 8; ++nt) {
      s[nt][2 * r] = exp2_fast(fmaf(s[nt][2 * r], scale, -shift[r]));
      s[nt][2 * r + 1] = exp2_fast(fmaf(s[nt][2 * r + 1], scale, -shift[r]));
      rows.l[r] += s[nt][2 * r] + s[nt][2 * r + 1];
    }
  }

  // O += P·V. P's A fragment for keys 16·kk … +15 is S's C fragments of N tiles 2·kk and 2·kk + 1,
  // rounded to bf16; one ldmatrix.x4.trans gives the B fragments of two N tiles of O (columns
  // 16·dp … +15).
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    const std::uint32_t p[4] = {pack_pair<T>(s[2 * kk][0], s[2 * kk][1]), pack_pair<T>(s[2 * kk][2], s[2 * kk][3]),
                                pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < DV / 16; ++dp) {
      std::uint32_t b[4];
      load_matrices_transposed(b, address.values[dp % 4] + (16 * kk * DV + 64 * (dp / 4)) * sizeof(T));
      mma_m16n8k16<T>(rows.o[2 * dp], p, b[0], b[1]);
      mma_m16n8k16<T>(rows.o[2 * dp + 1], p, b[2], b[3]);
    }
  }
}

}  // namespace bifocal::cuda::prefill_tiles
