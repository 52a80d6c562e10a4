// Bifocal's mLSTM outputs in the tensor-core prefill attention's epilogue (PrefillMlstmOutputs,
// attention_prefill.cuh): the block's rows' o·h, computed as the bf16 outputs kernel does
// (mlstm_prefill_bf16.cu) from the tile buffers the attention has finished with, and added in L2
// onto the window's share it has just stored.
// DEVICE CODE: include from .cu files only.
#pragma once

#ifndef __CUDACC__
#error "attention_prefill_mlstm_outputs.cuh holds device code: include it from .cu files only"
#endif

#include "backend/cuda/attention_prefill_phase_stamps.cuh"
#include "backend/cuda/attention_prefill_tiles.cuh"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/warpgroup_products.cuh"

namespace bifocal::cuda::prefill_tiles {

// The denominators kernel's count of finished blocks (as mlstm_prefill_device.cuh's
// wait_for_denominators). Safe to spin: that kernel's blocks all run before this kernel launches.
__device__ __forceinline__ void wait_for_mlstm_denominators(const PrefillMlstmOutputs& m) {
  device::wait_for_count(m.denominators_done, m.denominator_blocks);
}

// C_c's 64 rows from `rows` (the block's DV = 128 columns, rows d apart) into `tile` as a warpgroup
// B tile (warpgroup_products.cuh), asynchronously.
template <typename T, int D>
__device__ __forceinline__ void copy_state_tile_async(T* tile, const T* rows) {
  static_assert(kTileKeys == device::kBTileRows);
  constexpr int kChunks = device::kBTileColumns / 8;  // 16-byte chunks a row
  constexpr int kRowsPerPass = kThreads / kChunks;
  const int first_row = int(threadIdx.x) / kChunks, column = 8 * (int(threadIdx.x) % kChunks);
#pragma unroll
  for (int pass = 0; pass < kTileKeys / kRowsPerPass; ++pass) {
    const int row = first_row + pass * kRowsPerPass;
    device::copy16_async(tile + device::b_tile_offset(row, column), rows + std::size_t(row) * D + column);
  }
}

// C_c (d × d bf16, row-major in k) into tile buffer pair `buffer` in tiles of 64 rows (the block's
// DV = 128 columns from first_value_column). d = 128: value tiles, which state_products reads with
// ldmatrix, rows 0 … 63 in its key tile and 64 … 127 in its value tile. d = 256: warpgroup B tiles
// for issue_state_products, rows 0 … 127 in its key tile, whose 64 × 256 elements hold two such
// tiles, and 128 … 191 in its value tile (the last 64 rows follow in add_mlstm_outputs_half, once
// the chunk's keys are read). Why the two: the warpgroup product gained 0.5% at the Qwen3.5-like
// shape's 1K prefill (d = 256) and lost 0.5% at Qwen3-4B's (d = 128) (stop 84, H100). Issued as the
// block's last tile is computed, into the buffer pair no tile needs any more.
template <typename T, int D, int DV>
__device__ __forceinline__ void copy_mlstm_state_async(const PrefillMlstmOutputs& m, SharedStorage<T, D, DV>& shared,
                                                       int buffer, int chunk_index, int first_value_column) {
  const T* state = reinterpret_cast<const T*>(m.states) + std::size_t(chunk_index) * D * D + first_value_column;
  if constexpr (D == DV) {  // d = 128: value tiles, read by state_products' ldmatrix
    copy_tile_rows<DV, 1, T>({shared.keys[buffer]}, {state}, 0, kTileKeys, D, 0);
    copy_tile_rows<DV, 1, T>({shared.values[buffer]}, {state + kTileKeys * D}, 0, kTileKeys, D, 0);
  } else {  // d = 256: warpgroup B tiles
    static_assert(DV == device::kBTileColumns);
    static_assert(sizeof(shared.keys[0]) % device::kBTileBytes == 0 &&
                      sizeof(shared.values[0]) % device::kBTileBytes == 0,
                  "B tiles 1024-byte aligned in the kernel's shared_bytes (aligned to 1024)");
    copy_state_tile_async<T, D>(shared.keys[buffer], state);
    copy_state_tile_async<T, D>(shared.keys[buffer] + kTileKeys * DV, state + kTileKeys * D);
    copy_state_tile_async<T, D>(shared.values[buffer], state + 2 * kTileKeys * D);
  }
}

// A lane's two rows (fragment rows lane / 4 and + 8 of its warp): token, query head, τ in the
// chunk and head in its group; the warp's key steps of 16 up to its last token (its rows are
// token-major, and keys past it carry W = 0: the outputs kernel's steps for these rows); the
// (state, chunk) index (state head = KV head).
struct EpilogueRows {
  int token[2], head[2], tau[2], local_head[2];
  int key_steps;
  std::size_t chunk_index;
  int first_tau, tokens;  // the block's tokens in the chunk: τ = first_tau … first_tau + tokens − 1
};
__device__ __forceinline__ EpilogueRows epilogue_rows(const PrefillMlstmOutputs& m, int group, int first_token,
                                                      int first_head, int heads, int kv) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunk = first_token / kMlstmChunk;
  EpilogueRows r;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = warp * kWarpRows + lane / 4 + 8 * i;
    r.token[i] = first_token + row / heads, r.head[i] = first_head + row % heads;
    r.tau[i] = r.token[i] - chunk * kMlstmChunk, r.local_head[i] = r.head[i] % group;
  }
  r.key_steps = (first_token + (warp * kWarpRows + kWarpRows - 1) / heads - chunk * kMlstmChunk) / 16 + 1;
  r.chunk_index = std::size_t(kv) * m.chunks + chunk;
  r.first_tau = first_token - chunk * kMlstmChunk, r.tokens = kBlockRows / heads;
  return r;
}

// S = q̂·Kᵀ over the chunk's keys, up to the warp's last key step; `keys`: a lane's ldmatrix
// addresses in the key tile (lane_addresses' form).
template <typename T, int D>
__device__ __forceinline__ void chunk_scores(float (&s)[kTileKeys / 8][4], const std::uint32_t (&q)[D / 16][4],
                                             int key_steps, const std::uint32_t (&keys)[4]) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int np = 0; np < kTileKeys / 16; ++np) {
      if (np >= key_steps) continue;
      std::uint32_t b[4];
      load_matrices(b, keys[ks % 4] + (16 * np * D + 64 * (ks / 4)) * sizeof(T));
      mma_m16n8k16<T>(s[2 * np], q[ks], b[0], b[1]);
      mma_m16n8k16<T>(s[2 * np + 1], q[ks], b[2], b[3]);
    }
  }
}

// h = q̂·C_c over the block's DV columns (d = 128; d = 256 takes issue_state_products), each
// accumulator's k-steps in order. C_c's rows lie in value tiles of kTileKeys rows, tile t at shared
// address tile_bases[t]; `lane_offsets`: a lane's ldmatrix.trans offsets in a value tile.
template <typename T, int D, int DV>
__device__ __forceinline__ void state_products(float (&h)[DV / 8][4], const std::uint32_t (&q)[D / 16][4],
                                               const std::uint32_t (&tile_bases)[D / kTileKeys],
                                               const std::uint32_t (&lane_offsets)[4]) {
  constexpr int kStepsPerTile = kTileKeys / 16;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int dp = 0; dp < DV / 16; ++dp) {
      std::uint32_t b[4];
      load_matrices_transposed(b, tile_bases[ks / kStepsPerTile] + lane_offsets[dp % 4] +
                                      (16 * (ks % kStepsPerTile) * DV + 64 * (dp / 4)) * sizeof(T));
      mma_m16n8k16<T>(h[2 * dp], q[ks], b[0], b[1]);
      mma_m16n8k16<T>(h[2 * dp + 1], q[ks], b[2], b[3]);
    }
  }
}

// h += q̂·C_c over the block's DV = 128 columns and C_c's tiles kFirstTile … kEndTile − 1, the
// block's four warps as one warpgroup (warpgroup_products.cuh), each accumulator's k-steps in order.
// C_c's rows lie in B tiles of kTileKeys rows (copy_state_tile_async), tile t at shared address
// tile_bases[t], written and fenced for the async proxy before a barrier. Issued and committed,
// not awaited: warpgroup_wait<0> and pin_accumulators before h is read.
template <typename T, int D, int DV, int kFirstTile, int kEndTile>
__device__ __forceinline__ void issue_state_products(float (&h)[DV / 8][4], const std::uint32_t (&q)[D / 16][4],
                                                     const std::uint32_t (&tile_bases)[D / kTileKeys]) {
  static_assert(DV == device::kBTileColumns && kTileKeys == device::kBTileRows);
  constexpr int kStepsPerTile = kTileKeys / 16, kStepBytes = 2 * device::kBGroupBytes;  // 16 rows a k-step
  auto& left = *reinterpret_cast<float(*)[DV / 16][4]>(&h[0]);            // columns 0 … 63
  auto& right = *reinterpret_cast<float(*)[DV / 16][4]>(&h[DV / 16]);     // columns 64 … 127
  device::warpgroup_fence();
#pragma unroll
  for (int ks = kFirstTile * kStepsPerTile; ks < kEndTile * kStepsPerTile; ++ks) {
    const std::uint32_t step = tile_bases[ks / kStepsPerTile] + (ks % kStepsPerTile) * kStepBytes;
    device::warpgroup_mma_m64n64k16<T>(left, q[ks], device::b_slice_descriptor(step));
    device::warpgroup_mma_m64n64k16<T>(right, q[ks], device::b_slice_descriptor(step + device::kBHalfBytes));
  }
  device::warpgroup_commit();
}

// The products issue_state_products committed, landed in h.
template <int DV>
__device__ __forceinline__ void await_state_products(float (&h)[DV / 8][4]) {
  device::warpgroup_wait<0>();
  device::pin_accumulators(h);
}

// Kernel 3's factors for the lane's two rows: e_τ and o/den_τ in registers, and the block's rows
// of W (`weight_rows`: r.tokens rows of kMlstmChunk floats in shared memory, copied
// asynchronously and committed; wait for them before weigh_by_the_gates).
struct GateFactors {
  float entering[2], inverse[2];
};

// Awaits the denominators kernel and fetches its factors (GateFactors). Called before h = q̂·C_c,
// so that their L2 round trip passes while h is made: read after it, as the lanes' own loads, W
// came in one round trip and the inverse denominators in two more (the second row's behind the
// first row's `red`s, whose memory clobber keeps a load after them).
__device__ __forceinline__ GateFactors await_gate_factors(const PrefillMlstmOutputs& m, const EpilogueRows& r,
                                                          int group, float* weight_rows) {
  constexpr int L = kMlstmChunk;
  wait_for_mlstm_denominators(m);
  const float* weights = m.weights + (r.chunk_index * L + r.first_tau) * L;
  for (int item = threadIdx.x; item < r.tokens * L / 4; item += blockDim.x)
    device::copy16_async(weight_rows + 4 * item, weights + 4 * item);
  commit_async_copies();
  GateFactors f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    f.entering[i] = __ldcg(m.entering + r.chunk_index * L + r.tau[i]);
    f.inverse[i] = __ldcg(m.inverse_denominators + (r.chunk_index * group + r.local_head[i]) * L + r.tau[i]);
  }
  return f;
}

// Kernel 3's e and W (await_gate_factors, W landed): h·e_τ/√d, and S' = bf16(S/√d·W_τj) as the A
// fragments of S'·V.
template <typename T, int D, int DV>
__device__ __forceinline__ void weigh_by_the_gates(const GateFactors& f, const float* weight_rows,
                                                   const EpilogueRows& r, float (&h)[DV / 8][4],
                                                   float (&s)[kTileKeys / 8][4],
                                                   std::uint32_t (&p)[kTileKeys / 16][4]) {
  constexpr int L = kMlstmChunk;
  const int quad = threadIdx.x % 4;
  const float query_scale = 1.0f / sqrtf(float(D));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float entering = f.entering[i] * query_scale;
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt) h[nt][2 * i] *= entering, h[nt][2 * i + 1] *= entering;
    const float* weights = weight_rows + (r.tau[i] - r.first_tau) * L + 2 * quad;
#pragma unroll
    for (int nt = 0; nt < kTileKeys / 8; ++nt) {
      if (nt / 2 >= r.key_steps) continue;
      const float2 w = *reinterpret_cast<const float2*>(weights + 8 * nt);
      s[nt][2 * i] = s[nt][2 * i] * query_scale * w.x;
      s[nt][2 * i + 1] = s[nt][2 * i + 1] * query_scale * w.y;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    p[kk][0] = pack_pair<T>(s[2 * kk][0], s[2 * kk][1]), p[kk][1] = pack_pair<T>(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// h += S'·V over the warp's key steps; `values`: a lane's ldmatrix.trans addresses in the value tile.
template <typename T, int DV>
__device__ __forceinline__ void add_weighted_values(float (&h)[DV / 8][4], const std::uint32_t (&p)[kTileKeys / 16][4],
                                                    int key_steps, const std::uint32_t (&values)[4]) {
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    if (kk >= key_steps) continue;
#pragma unroll
    for (int dp = 0; dp < DV / 16; ++dp) {
      std::uint32_t b[4];
      load_matrices_transposed(b, values[dp % 4] + (16 * kk * DV + 64 * (dp / 4)) * sizeof(T));
      mma_m16n8k16<T>(h[2 * dp], p[kk], b[0], b[1]);
      mma_m16n8k16<T>(h[2 * dp + 1], p[kk], b[2], b[3]);
    }
  }
}

// out += bf16(h · o/den), in L2 onto the window's share (this thread's own stores before), the
// block's DV columns from first_value_column.
template <typename T, int D, int DV>
__device__ __forceinline__ void add_to_window_rows(const PrefillAttentionArgs<T>& a, const EpilogueRows& r,
                                                   const float (&h)[DV / 8][4], const GateFactors& f,
                                                   int first_value_column, T* out) {
  const int quad = threadIdx.x % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (r.token[i] >= a.n) continue;
    T* out_row = out + (std::size_t(r.token[i]) * a.query_heads + r.head[i]) * D + first_value_column + 2 * quad;
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt)
      device::add2(out_row + 8 * nt, h[nt][2 * i] * f.inverse[i], h[nt][2 * i + 1] * f.inverse[i]);
  }
}

// The chunk's keys (all D columns) and values (the block's DV columns from first_value_column) into
// tile buffer pair `buffer`, asynchronously and committed: the gathered copy holds the cached
// window's num_keys − n rows, then the n new tokens' (rows past n: zeros).
template <typename T, int D, int DV>
__device__ __forceinline__ void copy_chunk_async(const PrefillAttentionArgs<T>& a, SharedStorage<T, D, DV>& shared,
                                                 int buffer, int first_token, int kv, int first_value_column) {
  const std::int64_t chunk_key = a.num_keys - a.n + std::int64_t(first_token / kMlstmChunk) * kMlstmChunk;
  const std::size_t key_row_stride = std::size_t(a.kv_heads) * D;
  if constexpr (D == DV) {
    copy_tile_rows<D, 2, T>({shared.keys[buffer], shared.values[buffer]}, {a.keys, a.values}, chunk_key, a.num_keys,
                            key_row_stride, std::size_t(kv) * D);
  } else {
    copy_tile_rows<D, 1, T>({shared.keys[buffer]}, {a.keys}, chunk_key, a.num_keys, key_row_stride,
                            std::size_t(kv) * D);
    copy_tile_rows<DV, 1, T>({shared.values[buffer]}, {a.values}, chunk_key, a.num_keys, key_row_stride,
                             std::size_t(kv) * D + first_value_column);
  }
  commit_async_copies();
}

// Both epilogues' last steps, once h = q̂·C_c and S = q̂·Kᵀ are made and kernel 3's factors fetched
// (await_gate_factors; W's rows landed and the block past a barrier): h·e_τ/√d,
// S' = bf16(S/√d·W_τj), h += S'·V over the chunk's values (`values`: a lane's ldmatrix.trans
// addresses in their tile), and the sum added onto the rows.
template <typename T, int D, int DV>
__device__ __forceinline__ void weigh_and_add_outputs(const PrefillAttentionArgs<T>& a, const EpilogueRows& r,
                                                      const GateFactors& f, const float* weight_rows,
                                                      float (&h)[DV / 8][4], float (&s)[kTileKeys / 8][4],
                                                      const std::uint32_t (&values)[4], int first_value_column,
                                                      T* out) {
  std::uint32_t p[kTileKeys / 16][4];
  weigh_by_the_gates<T, D, DV>(f, weight_rows, r, h, s, p);
  add_weighted_values<T, DV>(h, p, r.key_steps, values);
  add_to_window_rows<T, D, DV>(a, r, h, f, first_value_column, out);
}

// The block's mLSTM outputs o·h, added in L2 onto the (1 − o)·window rows the plain epilogue has
// just stored (one rounding of the sum, as the bf16 outputs kernel's reductions). h as that kernel
// makes it (mlstm_prefill_bf16.cu; the same operands, products and roundings, each accumulator's
// k-steps in the same order): h = q̂·C_c, then h·e_τ/√d, S' = bf16((q̂·k_j)/√d·W_τj) over the chunk's
// keys, h += S'·V up to the warp's last key step (the outputs kernel's steps for these rows), then
// o·h/den = h · inverse denominator. C_c is in buffer `state_buffer` (copy_mlstm_state_async, not
// yet waited for); the chunk's keys and values go to the other buffer, which the barrier before
// this call has freed — or, with chunk_in_place (PrefillMlstmOutputs::chunk_in_last_tile and a
// tile computed), already hold them as the block's last tile. The denominators kernel is awaited
// once S is made, before h: its factors arrive while h is made (await_gate_factors). `phases`: a
// debug build's stamps (attention_prefill_phase_stamps.cuh), marked at the chunk's landing, the
// wait and h.
template <typename T, int D, int DV, typename Stamps>
__device__ void add_mlstm_outputs(const PrefillAttentionArgs<T>& a, const PrefillMlstmOutputs& m,
                                  SharedStorage<T, D, DV>& shared, const RowState<D, DV>& rows, int state_buffer,
                                  bool chunk_in_place, int first_token, int first_head, int heads, int kv, T* out,
                                  Stamps& phases) {
  static_assert(D == 128 && DV == 128 && D == 2 * kTileKeys && kMlstmChunk == kTileKeys);
  const int group = a.query_heads / a.kv_heads;
  const EpilogueRows r = epilogue_rows(m, group, first_token, first_head, heads, kv);

  // 1. The chunk's keys and values, into the last tile's buffers unless they are that tile.
  const int chunk_buffer = state_buffer ^ 1;
  if (!chunk_in_place) copy_chunk_async(a, shared, chunk_buffer, first_token, kv, 0);
  wait_async_copies<0>();
  __syncthreads();
  phases.mark(kAttentionChunkLanded);
  const LaneAddresses state = lane_addresses(shared, state_buffer), chunk_rows = lane_addresses(shared, chunk_buffer);
  // C_c's rows 0 … 63 are the state buffer's key tile, 64 … 127 its value tile, both read in the value layout.
  const std::uint32_t state_tiles[2] = {shared_address(shared.keys[state_buffer]),
                                        shared_address(shared.values[state_buffer])};
  std::uint32_t value_offset[4];
#pragma unroll
  for (int x = 0; x < 4; ++x) value_offset[x] = state.values[x] - state_tiles[1];

  // 2. S = q̂·Kᵀ over the chunk's keys; then kernel 3's factors, W's rows where the keys were,
  //    fetched while h = q̂·C_c is made.
  float h[DV / 8][4] = {}, s[kTileKeys / 8][4] = {};
  chunk_scores<T, D>(s, rows.q, r.key_steps, chunk_rows.keys);
  float* weight_rows = reinterpret_cast<float*>(shared.keys[chunk_buffer]);
  static_assert(kBlockRows * kMlstmChunk * sizeof(float) <= sizeof(shared.keys[0]), "W's rows fit a key tile");
  const GateFactors factors = await_gate_factors(m, r, group, weight_rows);  // a barrier first
  phases.mark(kAttentionDenominators);
  state_products<T, D, DV>(h, rows.q, state_tiles, value_offset);
  wait_async_copies<0>();
  __syncthreads();  // W's rows landed
  phases.mark(kAttentionStateProduct);

  // 3. h·e_τ/√d, S' = bf16(S/√d·W_τj), h += S'·V, the sum.
  weigh_and_add_outputs<T, D, DV>(a, r, factors, weight_rows, h, s, chunk_rows.values, 0, out);
}

// add_mlstm_outputs for d = 256, where a block holds half of O (DV = 128 columns from
// first_value_column; the bf16 outputs kernel splits its blocks the same way): h over those
// columns, S over all of d. Its operands take more room than the buffers hold at once, so they
// come in turns. With the last tile, C_c's half (256 × 128, 64 KiB) came into `state_buffer`'s
// pair: rows 0 … 191 (copy_mlstm_state_async). The chunk's keys (64 × 256) and values (the block's
// columns) fill the last tile's pair: already there with chunk_in_place (as add_mlstm_outputs),
// else copied now. S is made first; C_c's rows 192 … 255 then take the keys' place, copied while
// h is made over its first 192. h = q̂·C_c by the warpgroup product (issue_state_products), the
// others as add_mlstm_outputs; each accumulator's k-steps in the same order either way, and the
// same stamps.
template <typename T, int D, int DV, typename Stamps>
__device__ void add_mlstm_outputs_half(const PrefillAttentionArgs<T>& a, const PrefillMlstmOutputs& m,
                                       SharedStorage<T, D, DV>& shared, const RowState<D, DV>& rows,
                                       int state_buffer, bool chunk_in_place, int first_token, int first_head,
                                       int heads, int kv, int first_value_column, T* out, Stamps& phases) {
  static_assert(D == 256 && DV == 128 && kMlstmChunk == kTileKeys);
  constexpr int kStateTiles = D / kTileKeys;  // C_c's rows in value tiles of kTileKeys rows
  const int group = a.query_heads / a.kv_heads;
  const EpilogueRows r = epilogue_rows(m, group, first_token, first_head, heads, kv);
  const int chunk_buffer = state_buffer ^ 1;

  // 1. The chunk's keys and values, into the last tile's buffers unless they are that tile.
  if (!chunk_in_place) copy_chunk_async(a, shared, chunk_buffer, first_token, kv, first_value_column);
  wait_async_copies<0>();  // C_c's rows 0 … 191 too
  device::fence_shared_for_warpgroup();
  __syncthreads();
  phases.mark(kAttentionChunkLanded);

  // C_c's tiles: the state buffer's key buffer holds two, its value buffer the third, and the
  // chunk's key buffer (once S is made) the fourth.
  const LaneAddresses chunk_rows = lane_addresses(shared, chunk_buffer);
  const std::uint32_t state_tiles[kStateTiles] = {
      shared_address(shared.keys[state_buffer]), shared_address(shared.keys[state_buffer] + kTileKeys * DV),
      shared_address(shared.values[state_buffer]), shared_address(shared.keys[chunk_buffer])};

  // 2. S = q̂·Kᵀ over the chunk's keys; then kernel 3's factors, W's rows in the keys' second half,
  //    and h = q̂·C_c (the block's columns) over C_c's first three tiles while W and C_c's last tile
  //    come where the keys were.
  float h[DV / 8][4] = {}, s[kTileKeys / 8][4] = {};
  chunk_scores<T, D>(s, rows.q, r.key_steps, chunk_rows.keys);
  float* weight_rows = reinterpret_cast<float*>(shared.keys[chunk_buffer] + kTileKeys * DV);
  static_assert(kTileKeys * DV + kBlockRows * kMlstmChunk * sizeof(float) / sizeof(T) <= kTileKeys * D,
                "C_c's last tile and W's rows fit a key tile");
  const GateFactors factors = await_gate_factors(m, r, group, weight_rows);  // a barrier first
  phases.mark(kAttentionDenominators);
  const T* state = reinterpret_cast<const T*>(m.states) + r.chunk_index * D * D + first_value_column;
  copy_state_tile_async<T, D>(shared.keys[chunk_buffer], state + (kStateTiles - 1) * kTileKeys * D);
  commit_async_copies();
  issue_state_products<T, D, DV, 0, kStateTiles - 1>(h, rows.q, state_tiles);
  wait_async_copies<0>();
  device::fence_shared_for_warpgroup();
  __syncthreads();  // C_c's last tile and W's rows landed
  issue_state_products<T, D, DV, kStateTiles - 1, kStateTiles>(h, rows.q, state_tiles);
  await_state_products<DV>(h);
  phases.mark(kAttentionStateProduct);

  // 3. h·e_τ/√d, S' = bf16(S/√d·W_τj), h += S'·V, the sum, as add_mlstm_outputs.
  weigh_and_add_outputs<T, D, DV>(a, r, factors, weight_rows, h, s, chunk_rows.values, first_value_column, out);
}

}  // namespace bifocal::cuda::prefill_tiles
