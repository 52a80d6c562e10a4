// Bifocal's mLSTM outputs in the tensor-core prefill attention's epilogue (PrefillMlstmOutputs,
// attention_prefill.cuh): the block's rows' o·h, computed as the bf16 outputs kernel does
// (mlstm_prefill_bf16.cu) from the tile buffers the attention has finished with, and added in L2
// onto the window's share it has just stored.
// DEVICE CODE: include from .cu files only.
#pragma once

#ifndef __CUDACC__
#error "attention_prefill_mlstm_outputs.cuh holds device code: include it from .cu files only"
#endif

#include "backend/cuda/attention_prefill_tiles.cuh"
#include "backend/cuda/dependent_launch.h"

namespace bifocal::cuda::prefill_tiles {

// The denominators kernel's count of finished blocks (as mlstm_prefill_device.cuh's
// wait_for_denominators). Safe to spin: that kernel's blocks all run before this kernel launches.
__device__ __forceinline__ void wait_for_mlstm_denominators(const PrefillMlstmOutputs& m) {
  device::wait_for_count(m.denominators_done, m.denominator_blocks);
}

// C_c (d × d bf16, row-major in k) into the tile buffer pair `buffer`: rows 0 … 63 in its key
// tile, rows 64 … 127 in its value tile, both laid out (and read) as value tiles. Issued as the
// block's last tile is computed, into the buffer no tile needs any more.
template <typename T, int D, int DV>
__device__ __forceinline__ void copy_mlstm_state_async(const PrefillMlstmOutputs& m, SharedStorage<T, D, DV>& shared,
                                                       int buffer, int chunk_index) {
  const T* state = reinterpret_cast<const T*>(m.states) + std::size_t(chunk_index) * D * D;
  copy_tile_rows<DV, 1, T>({shared.keys[buffer]}, {state}, 0, kTileKeys, D, 0);
  copy_tile_rows<DV, 1, T>({shared.values[buffer]}, {state + kTileKeys * D}, 0, kTileKeys, D, 0);
}

// The block's mLSTM outputs o·h, added in L2 onto the (1 − o)·window rows the plain epilogue has
// just stored (one rounding of the sum, as the bf16 outputs kernel's reductions). h as that kernel
// makes it (mlstm_prefill_bf16.cu; the same operands, products and roundings, each accumulator's
// k-steps in the same order): h = q̂·C_c, then h·e_τ/√d, S' = bf16((q̂·k_j)/√d·W_τj) over the chunk's
// keys, h += S'·V up to the warp's last key step (the outputs kernel's steps for these rows), then
// o·h/den = h · inverse denominator. C_c is in buffer `state_buffer` (copy_mlstm_state_async, not
// yet waited for); the chunk's keys and values go to the other buffer, which the barrier before
// this call has freed.
template <typename T, int D, int DV>
__device__ void add_mlstm_outputs(const PrefillAttentionArgs<T>& a, const PrefillMlstmOutputs& m,
                                  SharedStorage<T, D, DV>& shared,
                                  const RowState<D, DV>& rows, int state_buffer, int first_token, int first_head,
                                  int heads, int kv, T* out) {
  static_assert(D == 128 && DV == 128 && D == 2 * kTileKeys && kMlstmChunk == kTileKeys);
  constexpr int L = kMlstmChunk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quad = lane % 4;
  const int chunk = first_token / L, group = a.query_heads / a.kv_heads;
  const std::size_t chunk_index = std::size_t(kv) * m.chunks + chunk;  // state head = KV head

  // 1. The chunk's keys and values: the gathered copy holds the cached window's num_keys − n rows,
  //    then the n new tokens' (rows past n: zeros).
  const int chunk_buffer = state_buffer ^ 1;
  copy_tile_rows<D, 2, T>({shared.keys[chunk_buffer], shared.values[chunk_buffer]}, {a.keys, a.values},
                          a.num_keys - a.n + std::int64_t(chunk) * L, a.num_keys, std::size_t(a.kv_heads) * D,
                          std::size_t(kv) * D);
  commit_async_copies();
  wait_async_copies<0>();
  __syncthreads();

  // This lane's two rows: τ in the chunk, the head in its group. A warp's rows are token-major, so
  // its last row holds its last token; keys past it carry W = 0.
  int tau[2], local_head[2], token[2], head[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * kWarpRows + lane / 4 + 8 * r;
    token[r] = first_token + row / heads, head[r] = first_head + row % heads;
    tau[r] = token[r] - chunk * L, local_head[r] = head[r] % group;
  }
  const int key_steps = (first_token + (warp * kWarpRows + kWarpRows - 1) / heads - chunk * L) / 16 + 1;
  const LaneAddresses state = lane_addresses(shared, state_buffer), chunk_rows = lane_addresses(shared, chunk_buffer);
  // C_c's rows 0 … 63 are the state buffer's key tile, read in the value layout.
  std::uint32_t state_top[4];
  const std::uint32_t key_tile_offset =
      shared_address(shared.keys[state_buffer]) - shared_address(shared.values[state_buffer]);
#pragma unroll
  for (int x = 0; x < 4; ++x) state_top[x] = state.values[x] + key_tile_offset;

  // 2. h = q̂·C_c and S = q̂·Kᵀ over the chunk's keys (up to the warp's last key step).
  float h[DV / 8][4] = {}, s[kTileKeys / 8][4] = {};
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int dp = 0; dp < DV / 16; ++dp) {
      std::uint32_t b[4];
      const std::uint32_t row_address = ks < 4 ? state_top[dp % 4] : state.values[dp % 4];
      load_matrices_transposed(b, row_address + (16 * (ks % 4) * DV + 64 * (dp / 4)) * sizeof(T));
      mma_m16n8k16<T>(h[2 * dp], rows.q[ks], b[0], b[1]);
      mma_m16n8k16<T>(h[2 * dp + 1], rows.q[ks], b[2], b[3]);
    }
  }
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int np = 0; np < kTileKeys / 16; ++np) {
      if (np >= key_steps) continue;
      std::uint32_t b[4];
      load_matrices(b, chunk_rows.keys[ks % 4] + (16 * np * D + 64 * (ks / 4)) * sizeof(T));
      mma_m16n8k16<T>(s[2 * np], rows.q[ks], b[0], b[1]);
      mma_m16n8k16<T>(s[2 * np + 1], rows.q[ks], b[2], b[3]);
    }
  }

  // 3. The denominators kernel's W, e and inverse denominators: h·e_τ/√d, S' = bf16(S/√d·W_τj).
  wait_for_mlstm_denominators(m);
  const float query_scale = 1.0f / sqrtf(float(D));
  std::uint32_t p[kTileKeys / 16][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float entering = __ldcg(m.entering + chunk_index * L + tau[r]) * query_scale;
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt) h[nt][2 * r] *= entering, h[nt][2 * r + 1] *= entering;
    const float* weights = m.weights + (chunk_index * L + tau[r]) * L + 2 * quad;
#pragma unroll
    for (int nt = 0; nt < kTileKeys / 8; ++nt) {
      if (nt / 2 >= key_steps) continue;
      const float2 w = __ldcg(reinterpret_cast<const float2*>(weights + 8 * nt));
      s[nt][2 * r] = s[nt][2 * r] * query_scale * w.x;
      s[nt][2 * r + 1] = s[nt][2 * r + 1] * query_scale * w.y;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    p[kk][0] = pack_pair<T>(s[2 * kk][0], s[2 * kk][1]), p[kk][1] = pack_pair<T>(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }

  // 4. h += S'·V over the chunk's values.
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    if (kk >= key_steps) continue;
#pragma unroll
    for (int dp = 0; dp < DV / 16; ++dp) {
      std::uint32_t b[4];
      load_matrices_transposed(b, chunk_rows.values[dp % 4] + (16 * kk * DV + 64 * (dp / 4)) * sizeof(T));
      mma_m16n8k16<T>(h[2 * dp], p[kk], b[0], b[1]);
      mma_m16n8k16<T>(h[2 * dp + 1], p[kk], b[2], b[3]);
    }
  }

  // 5. out += bf16(h · o/den), in L2 onto the window's share (this thread's own stores before).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (token[r] >= a.n) continue;
    const float inverse = __ldcg(m.inverse_denominators + (chunk_index * group + local_head[r]) * L + tau[r]);
    T* out_row = out + (std::size_t(token[r]) * a.query_heads + head[r]) * D + 2 * quad;
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt)
      device::add2(out_row + 8 * nt, h[nt][2 * r] * inverse, h[nt][2 * r + 1] * inverse);
  }
}

}  // namespace bifocal::cuda::prefill_tiles
