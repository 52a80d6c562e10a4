// Prefill attention on the tensor cores: bf16 or fp16 keys and values (T), head_dim 64, 128 or 256,
// sm_90a mma.sync m16n8k16 (T × T → fp32). Same contract as the SIMT kernel of attention_prefill.cu
// (attention_prefill.cuh), same result within the T rounding of q and of the softmax weights.
//
// The math (DESIGN.md "full", "swa", learned sink), in base 2: for the row of query head h at
// position p, o = Σ_j 2^{s_j − m} v_j / (Σ_j 2^{s_j − m} + 2^{S − m}) over the keys j that
// key_visible(p, kp_j) admits, s_j = q·k_j · log2(e)/√d, S = S_h · log2(e) for a learned sink (else
// no term), m the running max. The tensor cores return q·k unscaled; the scale is folded into the
// exponent, so one weight is one FFMA and one MUFU.EX2. A learned sink seeds m = S and adds its
// 2^{S − m} to the denominator at the end (DESIGN.md's "start from m = S_h, l = 0").
//
// Rows. A block owns 64 query rows, 16 per warp (the M of one mma). The rows are `heads`
// consecutive query heads of ONE GQA group × 64 / heads consecutive tokens (row r: token
// r / heads, head r % heads), so all rows read one KV head and one K/V tile in shared memory
// serves them all, and a block spans few tokens (16 for Qwen3-4B's group of 4), so the causal
// diagonal and the window edges cut few tiles. `heads` is the largest power of two ≤ 16 that
// divides the group (1 for a group of 3). Q is read once, fp32 → T, straight into the mma A
// fragments, and stays in registers. A block produces DV columns of O: all D of them for d = 64
// and 128; for d = 256 two blocks (blockIdx.z) share a row group, each holding Q whole (S needs all
// of it) but only its half of O and of each V tile — O for 256 columns would not fit in registers
// beside Q. S is then computed twice: 1.5× the mma of one block, against none of the SIMT kernel's.
//
// Pipeline. Keys stream in tiles of 64 through two shared buffers: cp.async fetches tile i + 1
// while the warps compute tile i; three blocks per SM (d = 128) cover the rest of the latency.
// Per tile and warp: S = Q·Kᵀ (16 × 64; K fragments by ldmatrix), the online softmax on S in
// fp32 registers, then O += P·V with S's accumulator layout reused as the T A fragment of P
// and V fragments by ldmatrix.trans. Shared rows are XOR-swizzled in 16-byte chunks
// (chunk ^ key % 8): the 8 rows one ldmatrix reads then hit distinct banks.
//
// Tile skipping. Before the loop a block classifies every key tile against the span
// [first, last] of its query positions: seen by no row (skipped: a window of 576 costs O(n·w), not
// O(n²)), seen by every row (no mask), or in between (masked per element with key_visible). For a
// gathered cache (key_positions) this reads every key position once per block, 8 bytes per key,
// against the 512 bytes per key of a tile it loads. Keys no row of the block sees may hold
// anything (empty ring slots, rows past the chunk; NaN in the tests): their value rows are zeroed
// in shared memory, because a zero weight still makes 0 · NaN = NaN inside the mma.
//
// Bifocal (PrefillMlstmOutputs): the mLSTM branch's outputs added in the epilogue
// (attention_prefill_mlstm_outputs.cuh). The building blocks: attention_prefill_tiles.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/attention_prefill_mlstm_outputs.cuh"
#include "backend/cuda/attention_prefill_phase_stamps.cuh"
#include "backend/cuda/attention_prefill_tiles.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"

namespace bifocal::cuda {
namespace {

using namespace prefill_tiles;

__device__ device::PhaseLog attention_phase_logs[kCountedAttentionBlocks];  // attention_prefill_phase_stamps.cuh

// ---- The kernel ---------------------------------------------------------------------------------

// kMlstm: Bifocal's mLSTM outputs added in the epilogue (PrefillMlstmOutputs; bf16, d = 128 or 256).
template <typename T, typename OutT, int D, int DV, bool kMlstm>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm<D>)
    attention_prefill_tensor_core_kernel(PrefillAttentionArgs<T> a, int heads, OutT* out, PrefillMlstmOutputs mlstm) {
  device::PhaseStamps<kAttentionPhaseStamps && kMlstm> phases;  // a debug build's; nothing otherwise
  phases.begin();
  device::allow_next_kernel_launch();
  // Every input (q, k, v, positions) is an earlier kernel's output; beside_previous_kernel: they
  // were complete before this kernel launched, and it waits at its end instead.
  if (!a.beside_previous_kernel) device::wait_for_previous_kernel();
  // 1024-byte aligned: Bifocal's d = 256 epilogue keeps warpgroup B tiles (128-byte swizzle) in the tile buffers.
  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  auto& shared = *reinterpret_cast<SharedStorage<T, D, DV>*>(shared_bytes);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tokens_per_block = kBlockRows / heads;
  // Blocks in reverse token order over the whole grid, every head group and column half of a token
  // span before the next span: under a causal mask or a window the last tokens have the most keys,
  // and the scheduler starts blocks in linear order, so the lightest blocks form the grid's tail.
  const unsigned linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned blocks_per_span = gridDim.y * gridDim.z, within_span = linear % blocks_per_span;
  const int first_token = int(gridDim.x - 1 - linear / blocks_per_span) * tokens_per_block;
  const int first_head = int(within_span % gridDim.y) * heads;
  const int kv = first_head / (a.query_heads / a.kv_heads);
  const int first_value_column = D == DV ? 0 : int(within_span / gridDim.y) * DV;  // the block's columns of O and V

  // 1. Each row's query position and the span [first, last] of the block's (padding rows
  //    excluded); the tile bitmaps zeroed.
  const int num_tiles = int((a.num_keys + kTileKeys - 1) / kTileKeys);
  const int bitmap_words = (min(num_tiles, kBitmapTiles) + 31) / 32;
  for (int word = threadIdx.x; word < bitmap_words; word += kThreads) {
    shared.visible_tiles[word] = 0;
    shared.full_tiles[word] = 0;
    shared.ragged_tiles[word] = 0;
  }
  if (threadIdx.x < kBlockRows) {
    const int token = first_token + int(threadIdx.x) / heads;
    shared.row_positions[threadIdx.x] = token < a.n ? a.positions[token] : -1;
    shared.row_scales[threadIdx.x] =  // read now, so that the epilogue waits on no load
        token < a.n ? device::bifocal_window_share(a.output_gate, a.output_gate_stride, token,
                                                   first_head + int(threadIdx.x) % heads, a.output_gate_bias)
                    : 1.0f;
  }
  const int block_tokens = min(tokens_per_block, a.n - first_token);
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  if (int(threadIdx.x) < block_tokens) first = last = a.positions[first_token + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) {
    first = min(first, __shfl_xor_sync(kFullWarp, first, offset));
    last = max(last, __shfl_xor_sync(kFullWarp, last, offset));
  }
  if (lane == 0) {
    shared.warp_first[warp] = first;
    shared.warp_last[warp] = last;
  }
  __syncthreads();
  block_span(shared, first, last);

  // 2. Which key tiles the block needs, and how; then the first one on its way.
  classify_tiles(a, shared, num_tiles, first, last);
  __syncthreads();
  int tile = next_visible_tile(shared, -1, num_tiles);
  if (tile < num_tiles) load_tile(a, shared, 0, tile, kv, first_value_column);
  commit_async_copies();
  phases.mark(kAttentionClassified);

  // 3. This lane's two rows: Q as T A fragments (zeros for padding rows), the softmax state.
  RowState<D, DV> rows;
  const int quad = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * kWarpRows + lane / 4 + 8 * r;
    const int token = first_token + row / heads, head = first_head + row % heads;
    rows.m[r] = a.learned_sinks != nullptr ? a.learned_sinks[head] * kLog2e : -INFINITY;
    rows.l[r] = 0.0f;
    const float* q = a.queries + (std::size_t(token) * a.query_heads + head) * D + 2 * quad;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float2 x =
            token < a.n ? *reinterpret_cast<const float2*>(q + 16 * ks + 8 * half) : make_float2(0.0f, 0.0f);
        rows.q[ks][r + 2 * half] = pack_pair<T>(x.x, x.y);
      }
  }
#pragma unroll
  for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) rows.o[nt][e] = 0.0f;

  // 4. The tiles, one in flight while the previous one is computed.
  static_assert((D == 64 || D == 128 || D == 256) && D % DV == 0);
  int buffer = 0;
  [[maybe_unused]] int state_buffer = -1;  // kMlstm: the buffer C_c is copied into
  while (tile < num_tiles) {
    wait_async_copies<0>();
    __syncthreads();  // tile `tile` is in `buffer` for everyone; no warp still reads buffer ^ 1
    const int next = next_visible_tile(shared, tile, num_tiles);
    if (next < num_tiles) load_tile(a, shared, buffer ^ 1, next, kv, first_value_column);
    if constexpr (kMlstm) {  // the last tile: C_c into the buffer no tile needs any more
      if (next >= num_tiles) {
        state_buffer = buffer ^ 1;
        copy_mlstm_state_async(mlstm, shared, state_buffer, kv * mlstm.chunks + first_token / kMlstmChunk,
                               first_value_column);
      }
    }
    commit_async_copies();

    const bool in_bitmap = tile < kBitmapTiles;
    const std::uint32_t bit = 1u << (tile % 32);
    const bool full = in_bitmap && (shared.full_tiles[tile / 32] & bit) != 0;
    const bool ragged = !in_bitmap || (shared.ragged_tiles[tile / 32] & bit) != 0;
    if (ragged) {
      zero_unseen_values(shared, buffer, a.window, a.sink_tokens);
      __syncthreads();
    }
    if (full)
      attend_tile<T, D, DV, false>(shared, buffer, rows, a.window, a.sink_tokens);
    else
      attend_tile<T, D, DV, true>(shared, buffer, rows, a.window, a.sink_tokens);
    tile = next;
    buffer ^= 1;
  }
  phases.mark(kAttentionTilesDone);

  // 5. o = O / (the row's four lanes' l + the learned sink's 2^{S − m}), times Bifocal's 1 − o.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * kWarpRows + lane / 4 + 8 * r;
    const int token = first_token + row / heads, head = first_head + row % heads;
    float l = rows.l[r];
    l += __shfl_xor_sync(kFullWarp, l, 1);
    l += __shfl_xor_sync(kFullWarp, l, 2);
    if (a.learned_sinks != nullptr) l += exp2_fast(a.learned_sinks[head] * kLog2e - rows.m[r]);
    if (token >= a.n) continue;
    const float inverse = shared.row_scales[row] / l;
    OutT* out_row = out + (std::size_t(token) * a.query_heads + head) * D + first_value_column + 2 * quad;
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt)
      store_pair(out_row + 8 * nt, rows.o[nt][2 * r] * inverse, rows.o[nt][2 * r + 1] * inverse);
  }
  phases.mark(kAttentionRowsStored);
  // 6. Bifocal: the mLSTM's outputs added onto those rows (PrefillMlstmOutputs).
  if constexpr (kMlstm) {
    const bool tile_computed = state_buffer >= 0;
    if (!tile_computed) {  // no tile: C_c not on its way yet
      state_buffer = 0;
      copy_mlstm_state_async(mlstm, shared, state_buffer, kv * mlstm.chunks + first_token / kMlstmChunk,
                             first_value_column);
    }
    __syncthreads();  // every warp is past its last tile: its buffer takes the chunk's keys and values
    const bool chunk_in_place = mlstm.chunk_in_last_tile && tile_computed;
    if constexpr (D == DV)
      add_mlstm_outputs<T, D, DV>(a, mlstm, shared, rows, state_buffer, chunk_in_place, first_token, first_head,
                                  heads, kv, out, phases);
    else
      add_mlstm_outputs_half<T, D, DV>(a, mlstm, shared, rows, state_buffer, chunk_in_place, first_token,
                                       first_head, heads, kv, first_value_column, out, phases);
    phases.mark(kAttentionOutputsAdded);
    phases.report("attention-phases", attention_phase_logs, kCountedAttentionBlocks, linear,
                  kRecordedAttentionLaunch);
  }
  if (a.beside_previous_kernel) device::wait_for_previous_kernel();  // complete ⇒ the previous kernel complete
}

// The largest power of two ≤ kMaxHeadsPerBlock that divides the GQA group.
int heads_per_block(int group) {
  int heads = 1;
  while (heads < kMaxHeadsPerBlock && group % (2 * heads) == 0) heads *= 2;
  return heads;
}

template <typename T, typename OutT, int D, int DV, bool kMlstm = false>
void launch(const PrefillAttentionArgs<T>& a, OutT* out, cudaStream_t stream, const PrefillMlstmOutputs& mlstm) {
  const int heads = heads_per_block(a.query_heads / a.kv_heads);
  const int tokens_per_block = kBlockRows / heads;
  const dim3 grid(unsigned((a.n + tokens_per_block - 1) / tokens_per_block), unsigned(a.query_heads / heads), D / DV);
  auto* kernel = attention_prefill_tensor_core_kernel<T, OutT, D, DV, kMlstm>;
  // Three 71 KiB blocks per SM (d = 128) need the largest shared-memory carveout.
  prefer_shared_memory_carveout(kernel, "attention_prefill_tensor_core_kernel");
  launch_dependent(kernel, grid, dim3(kThreads), sizeof(SharedStorage<T, D, DV>), stream,
                   "attention_prefill_tensor_core_kernel", a, heads, out, mlstm);
}

}  // namespace

template <typename T, typename OutT>
void attention_prefill_tensor_core(const PrefillAttentionArgs<T>& a, OutT* out, cudaStream_t stream,
                                   const PrefillMlstmOutputs& mlstm_outputs) {
  if (!prefill_uses_tensor_cores(a))
    fail("attention", "the tensor-core prefill takes bf16 or fp16 keys with head_dim 64, 128 or 256");
  if (a.n <= 0) return;
  if (a.head_dim == 64)
    launch<T, OutT, 64, 64>(a, out, stream, {});
  else if (a.head_dim == 128 || a.head_dim == 256) {
    if constexpr (std::is_same_v<T, __nv_bfloat16> && std::is_same_v<OutT, __nv_bfloat16>)
      if (mlstm_outputs.states != nullptr) {
        // The cached rows a whole number of tiles, and a chunk within every row's window: each block's
        // last key tile is then its chunk (PrefillMlstmOutputs::chunk_in_last_tile), not copied again.
        PrefillMlstmOutputs mlstm = mlstm_outputs;
        mlstm.chunk_in_last_tile = (a.num_keys - a.n) % kTileKeys == 0 &&
                                   (a.window == 0 || a.window - a.sink_tokens >= kMlstmChunk);
        if (a.head_dim == 128) return launch<T, OutT, 128, 128, true>(a, out, stream, mlstm);
        return launch<T, OutT, 256, 128, true>(a, out, stream, mlstm);
      }
    if (a.head_dim == 128) return launch<T, OutT, 128, 128>(a, out, stream, {});
    launch<T, OutT, 256, 128>(a, out, stream, {});
  }
}

template void attention_prefill_tensor_core(const PrefillAttentionArgs<__nv_bfloat16>&, float*, cudaStream_t,
                                            const PrefillMlstmOutputs&);
template void attention_prefill_tensor_core(const PrefillAttentionArgs<__nv_bfloat16>&, __nv_bfloat16*, cudaStream_t,
                                            const PrefillMlstmOutputs&);
template void attention_prefill_tensor_core(const PrefillAttentionArgs<__half>&, float*, cudaStream_t,
                                            const PrefillMlstmOutputs&);
template void attention_prefill_tensor_core(const PrefillAttentionArgs<__half>&, __half*, cudaStream_t,
                                            const PrefillMlstmOutputs&);

}  // namespace bifocal::cuda
