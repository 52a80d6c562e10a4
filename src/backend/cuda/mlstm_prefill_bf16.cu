// Kernel 4 of the chunkwise mLSTM prefill for bf16 models (MlstmProducts::Bf16): the outputs of
// mlstm_prefill.cu's chunk_outputs_kernel, h_τ = (e_τ q̂_τᵀC_c + Σ_{j≤τ} W_τj (q̂_τ·k_j) v_j) · 1/den_τ,
// with every product on mma.sync m16n8k16 bf16 → fp32: q, k, v and S' rounded to bf16 once, as
// they are staged (k and v copied as Bifocal's window gather rounded them, where the call has
// them: MlstmRoundedKeyValues, the same bits), C_c as the scan rounded it (Workspace::bf16_matrices;
// the window attention rounds q, k, v and its softmax weights likewise), W, e and the inverse
// denominators as kernel 3 wrote them (fp32; the normaliser path is double).
// Where mlstm_prefill offers them to Bifocal's window attention (PrefillMlstmOutputs: bf16,
// d = 128 or 256, short calls), that kernel's epilogue computes these outputs instead, from the same
// operands in the same order (attention_prefill_mlstm_outputs.cuh), and this kernel is not launched.
//
// Why: the TF32 kernel holds ~209 KB of shared memory, one block an SM, and at 24 warps it is
// latency-bound (barriers between a head's phases with nothing beside them). In bf16 the same
// tiles take ~105 KiB at d = 128, L = 64 (k, v, C_c, S' at half the bytes, q in 32-column stages),
// so two blocks share a multiprocessor and one's barriers hide behind the other's products; an
// m16n8k16 is twice the work of an m16n8k8 and ldmatrix loads two n-tiles of B at once.
//
// Shapes: L = 64, d a multiple of 32 up to 128 (C_c resident: loaded once for the G heads), or
// 256 (C_c's rows streamed with q's columns, two stages of 32, for each head). Others keep the
// TF32 kernel (chunk_outputs_bf16_fits).
//
// Block (slice · parts + part, s, c), 12 warps: the outputs' value columns [128·slice, 128·slice + V)
// of state head s's G query heads for chunk c, V = min(d, 128) — or of its part-th share of them
// when a call has too few chunks to fill the GPU (PrefillArgs::output_head_parts: 1K tokens of
// Qwen3-4B are 128 blocks of 4 heads in turn, one an SM; in 256 blocks of 2 the second block of
// each SM hides the first's barriers). At d = 256 two blocks share a chunk, each
// with its half of v and of C_c's columns and all of k (both compute S' = q̂Kᵀ: the products are
// not what bounds this kernel, the shared memory is: ~107 KiB with C_c streamed, two blocks an
// SM; resident, its half alone would take 68 KiB).
// Warp (row, column) owns the m-tiles row and 3 − row (16 rows each: the causal work balances)
// and the n-tile pairs column and column + 6 of [h (V/16 pairs) | S (L/16 pairs)]: 12 pairs at
// V = 128. A fragments (q, S') by ldmatrix, B fragments by ldmatrix.x4 —
// .trans for C_c and V (row-major in k), plain for Kᵀ (k's rows are Kᵀ's columns).
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/tensor_core_fragments.cuh"
#include "backend/cuda/mlstm_prefill_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

using namespace mlstm_prefill_detail;

constexpr int kThreads = 384, kWarps = kThreads / 32;
constexpr int kChunk = 64;              // L
constexpr int kStageColumns = 32;       // q columns a stage: two k-steps of 16
constexpr int kWarpColumns = kWarps / (kChunk / 32);  // 6: warps sharing an m-tile pair
constexpr int kPairsPerWarp = 2;        // n-tile pairs (16 columns) a warp
constexpr int kSliceColumns = 128;      // value columns a block at most

__host__ __device__ constexpr int value_columns(int d) { return d < kSliceColumns ? d : kSliceColumns; }
// C_c's rows in two stages of kStageColumns (else all d resident): d = 256 (chunk_outputs_bf16_fits).
__host__ __device__ constexpr bool states_streamed(int d) { return d > kSliceColumns; }

// ldmatrix and the m16n8k16 mma: tensor_core_fragments.cuh.
using device::load_matrices;
using device::load_matrices_transposed;
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  device::mma_m16n8k16<__nv_bfloat16>(c, a, b0, b1);
}

// ---- Shared memory ---------------------------------------------------------------------------------

// Pitches in bf16 elements: an odd number of 16-byte units, so that the 8 rows one ldmatrix reads
// fall in distinct banks. Offsets in floats (SharedCarve).
struct Bf16OutputLayout {
  int key_pitch, value_pitch, state_pitch, query_pitch, score_pitch, weight_stride;
  int keys, values, states, query_stages, scores, weights, entering, inverse_denominators;
  SharedCarve carve;
  __host__ __device__ Bf16OutputLayout(int d, int group) {
    key_pitch = d + 8;  // d and V multiples of 32: (2d + 16) / 16 and (2V + 16) / 16 are odd
    value_pitch = state_pitch = value_columns(d) + 8;
    query_pitch = kStageColumns + 8;                // 80 bytes
    score_pitch = kChunk + 8;                       // 144 bytes
    weight_stride = kChunk + 4;
    keys = carve.take(kChunk * key_pitch / 2);
    values = carve.take(kChunk * value_pitch / 2);
    const int state_rows = states_streamed(d) ? 2 * kStageColumns : d;
    states = carve.take(state_rows * state_pitch / 2);            // C_c's V columns: d rows, or two stages
    query_stages = carve.take(2 * kChunk * query_pitch / 2);      // two stages of q
    scores = carve.take(kChunk * score_pitch / 2);                // S' = (q̂·k_j) W_τj
    weights = carve.take(kChunk * weight_stride);                 // kernel 3's W_τj (fp32)
    entering = carve.take(kChunk);                                // e_τ
    inverse_denominators = carve.take(group * kChunk);
  }
};

__device__ __forceinline__ std::uint32_t pack_bf16(float low, float high) {
  return device::pack_pair<__nv_bfloat16>(low, high);
}

// ---- The kernel -------------------------------------------------------------------------------------

// kHeadDim: d where it is fixed at compile time (128, or 256 with C_c streamed), else 0 (a.head_dim).
// kRounded: k and v copied as the window's gather rounded them (a.rounded set), else rounded here;
// a template argument so that each form keeps only its own preamble's registers.
template <typename Out, int kHeadDim, bool kRounded>
__global__ void __launch_bounds__(kThreads, 2) chunk_outputs_bf16_kernel(PrefillArgs a) {
  device::allow_next_kernel_launch();
  // Kernel 3's W, e, denominators; C_c from the scan; q, k, v. Beside Bifocal's window attention
  // (outputs_beside_window) kernel 3's count instead of the grid dependency, which would wait for
  // the attention too: this kernel computes beside it and takes the grid wait only before it adds
  // its first outputs onto the attention's rows. Everything is read through L2 (__ldcg, cp.async.cg):
  // lines of L1 are not kept coherent with writes of kernels still running.
  bool window_written = !a.outputs_beside_window;
  if (a.outputs_beside_window) wait_for_denominators(a);
  else device::wait_for_previous_kernel();
  // The chunks last to first: kernel 3, just before, read q and k first to last (80 MiB at
  // Qwen3-4B, more than the 50 MB L2), so the last chunks' lines are the ones still in L2.
  const int parts = a.output_head_parts, slice = blockIdx.x / parts, s = blockIdx.y;
  // d a constant where it can be (the common head sizes), so that the addresses below fold: the
  // kernel is bound by the instructions around its products (stop 44's Nsight Compute reading).
  constexpr bool kStreamedStates = states_streamed(kHeadDim);
  const int c = a.chunks - 1 - int(blockIdx.z), d = kHeadDim != 0 ? kHeadDim : a.head_dim, L = kChunk;
  const int group = a.group(), first_local_head = int(blockIdx.x) % parts * (group / parts);
  const int end_local_head = first_local_head + group / parts;
  const int count = a.count(c), width = value_columns(d), first_column = slice * width;  // of v, C_c, h
  const int kv = a.kv_head(s), first_head = s * group, first_token = c * L;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const Bf16OutputLayout layout(d, group);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  __nv_bfloat16* keys = reinterpret_cast<__nv_bfloat16*>(shared + layout.keys);
  __nv_bfloat16* values = reinterpret_cast<__nv_bfloat16*>(shared + layout.values);
  __nv_bfloat16* states = reinterpret_cast<__nv_bfloat16*>(shared + layout.states);
  __nv_bfloat16* query_stages = reinterpret_cast<__nv_bfloat16*>(shared + layout.query_stages);
  __nv_bfloat16* scores = reinterpret_cast<__nv_bfloat16*>(shared + layout.scores);
  float* weights = shared + layout.weights;
  float* entering = shared + layout.entering;
  float* inverse_denominators = shared + layout.inverse_denominators;
  const std::size_t chunk_index = std::size_t(s) * a.chunks + c;
  const __nv_bfloat16* state_matrix = a.work.bf16_matrices + chunk_index * d * d;
  const auto query_row = [&](int head, int row) {
    return a.q + (std::size_t(first_token + row) * a.query_heads + first_head + head) * d;
  };
  const auto kv_row = [&](const auto* x, int row) {  // k or v: fp32, or bf16 as the gather rounded it
    return x + (std::size_t(first_token + row) * a.kv_heads + kv) * d;
  };

  // A q stage (L rows × 32 columns, 8 quads a row) through registers: fetched from global memory
  // a stage ahead, rounded and stored when its buffer is free.
  constexpr int kStageQuads = kChunk * kStageColumns / 4, kQuadsPerThread = (kStageQuads + kThreads - 1) / kThreads;
  float4 pending[kQuadsPerThread];
  const auto fetch_stage = [&](int head, int stage) {
    #pragma unroll
    for (int i = 0; i < kQuadsPerThread; ++i) {
      const int quad = threadIdx.x + i * kThreads, row = quad / (kStageColumns / 4);
      const int column = stage * kStageColumns + 4 * (quad % (kStageColumns / 4));
      pending[i] = quad < kStageQuads && row < count
                       ? __ldcg(reinterpret_cast<const float4*>(query_row(head, row) + column))
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  };
  const auto store_stage = [&](int buffer) {
    #pragma unroll
    for (int i = 0; i < kQuadsPerThread; ++i) {
      const int quad = threadIdx.x + i * kThreads, row = quad / (kStageColumns / 4);
      if (quad < kStageQuads)
        store_bf16x4(query_stages + (buffer * L + row) * layout.query_pitch + 4 * (quad % (kStageColumns / 4)),
                     pending[i]);
    }
  };

  // Rows [first_row, first_row + rows) of C_c's V columns, bf16 as the scan stored them, to
  // shared rows from `to_row` (cp.async, 16 bytes a copy).
  const auto copy_state_rows_async = [&](int first_row, int rows, int to_row) {
    // Streamed (once a stage for each head), the width is the slice's 128 columns: a constant, so
    // that the row and column of a piece cost a shift and a mask, not an integer division.
    const int pieces = (kStreamedStates ? kSliceColumns : width) / 8;
    for (int item = threadIdx.x; item < rows * pieces; item += kThreads) {
      const int row = item / pieces, column = 8 * (item % pieces);
      copy16_async(states + (to_row + row) * layout.state_pitch + column,
                   state_matrix + std::size_t(first_row + row) * d + first_column + column, true);
    }
  };

  // 1. Kernel 3's W, e and inverse denominators (cp.async, zero past the chunk as it wrote them),
  //    C_c's rows (all, or the first stage's); q's first stage in flight; k and v's V columns
  //    in bf16 (rows past the chunk zero): copied as the window's gather rounded them where the
  //    call has them (PrefillArgs::rounded), else loaded and rounded here.
  copy_chunk_scales_async(a, chunk_index, L, group, weights, layout.weight_stride, entering, inverse_denominators);
  copy_state_rows_async(0, kStreamedStates ? kStageColumns : d, 0);
  if constexpr (kRounded) {
    // Items: k's 16-byte pieces (L rows of d), then v's (L rows of V columns).
    const int key_pieces = d / 8, value_pieces = width / 8, key_items = L * key_pieces;
    for (int item = threadIdx.x; item < key_items + L * value_pieces; item += kThreads) {
      if (item < key_items) {
        const int j = item / key_pieces, column = 8 * (item % key_pieces);
        const bool present = j < count;
        copy16_async(keys + j * layout.key_pitch + column,
                     present ? kv_row(a.rounded.keys, j) + column : a.rounded.keys, present);
      } else {
        const int piece = item - key_items, j = piece / value_pieces, column = 8 * (piece % value_pieces);
        const bool present = j < count;
        copy16_async(values + j * layout.value_pitch + column,
                     present ? kv_row(a.rounded.values, j) + first_column + column : a.rounded.values, present);
      }
    }
  }
  commit_async_copies();
  fetch_stage(first_local_head, 0);
  if constexpr (!kRounded) {
    // Items: k's quads (L rows of d), then v's (L rows of V columns).
    const int key_quads = L * d / 4, slice_quads = width / 4, value_quads = L * slice_quads;
    const int total = key_quads + value_quads;
    constexpr int kInFlight = 4;  // quads a thread loads before it stores
    for (int base = threadIdx.x; base < total; base += kInFlight * kThreads) {
      float4 x[kInFlight];
      #pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int item = base + u * kThreads;
        x[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (item < key_quads) {
          const int j = item / (d / 4), column = 4 * (item % (d / 4));
          if (j < count) x[u] = __ldcg(reinterpret_cast<const float4*>(kv_row(a.k, j) + column));
        } else if (item < total) {
          const int quad = item - key_quads, j = quad / slice_quads, column = first_column + 4 * (quad % slice_quads);
          if (j < count) x[u] = __ldcg(reinterpret_cast<const float4*>(kv_row(a.v, j) + column));
        }
      }
      #pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int item = base + u * kThreads;
        if (item < key_quads) {
          store_bf16x4(keys + item / (d / 4) * layout.key_pitch + 4 * (item % (d / 4)), x[u]);
        } else if (item < total) {
          const int quad = item - key_quads;
          store_bf16x4(values + quad / slice_quads * layout.value_pitch + 4 * (quad % slice_quads), x[u]);
        }
      }
    }
  }
  wait_async_copies<0>();  // the first stage's barrier publishes everything above

  // 2. Per head: [h | S] = q·[C_c | Kᵀ] (stages of 32 columns of d), h ← h·e_τ/√d, S' = S·W/√d,
  //    h += S'·V, out = h · 1/den.
  const int warp_row = warp % 2, warp_column = warp / 2;
  const int row_tile[2] = {warp_row, 3 - warp_row};
  const int value_pairs = width / 16, all_pairs = value_pairs + L / 16, stages = d / kStageColumns;
  const float query_scale = 1.0f / sqrtf(float(d));
  const auto pair_of = [&](int i) { return warp_column + i * kWarpColumns; };
  // Key pair p − value_pairs holds keys 16(p − value_pairs) …: above the diagonal of m-tile r when
  // its first key is past the tile's last row.
  const auto above_diagonal = [&](int pair, int m) { return pair - value_pairs > row_tile[m]; };
  const std::uint32_t query_stages_address = shared_address(query_stages), scores_address = shared_address(scores);
  const std::uint32_t keys_address = shared_address(keys), values_address = shared_address(values);
  const std::uint32_t states_address = shared_address(states);
  // ldmatrix row addresses a lane gives (bytes): A (16 × 16 at rows r, columns k): row r + lane % 16,
  // column k + 8·(lane / 16). B from a row-major [k][n] matrix (.trans; C_c, V): row k + lane % 8 +
  // 8·(lane / 8 % 2), column n + 8·(lane / 16). B from Bᵀ row-major [n][k] (Kᵀ from k's rows):
  // row n + lane % 8 + 8·(lane / 16), column k + 8·(lane / 8 % 2).
  const int a_row = lane % 16, a_column = 8 * (lane / 16);
  const int trans_row = lane % 8 + 8 * (lane / 8 % 2), trans_column = 8 * (lane / 16);
  const int plain_row = lane % 8 + 8 * (lane / 16), plain_column = 8 * (lane / 8 % 2);
  int stage_counter = 0;
  for (int head = first_local_head; head < end_local_head; ++head) {
    float acc[2][2 * kPairsPerWarp][4] = {};
    for (int stage = 0; stage < stages; ++stage, ++stage_counter) {
      const int buffer = stage_counter % 2;
      store_stage(buffer);  // its buffer was last read two stages ago, before the barrier below
      if (stage + 1 < stages) fetch_stage(head, stage + 1);
      else if (head + 1 < end_local_head) fetch_stage(head + 1, 0);
      if constexpr (kStreamedStates) wait_async_copies<0>();  // this stage's C_c rows, copied a stage ago
      __syncthreads();
      if constexpr (kStreamedStates) {  // the next stage's, into the buffer the previous stage read
        const int next_stage = stage + 1 < stages ? stage + 1 : 0;
        if (stage + 1 < stages || head + 1 < end_local_head)
          copy_state_rows_async(next_stage * kStageColumns, kStageColumns, (1 - buffer) * kStageColumns);
        commit_async_copies();
      }
      #pragma unroll
      for (int step = 0; step < kStageColumns / 16; ++step) {
        const int column = stage * kStageColumns + 16 * step;  // of d: this k-step's rows of C_c, columns of k
        const int state_row = kStreamedStates ? buffer * kStageColumns + 16 * step : column;  // in shared memory
        std::uint32_t af[2][4];
        #pragma unroll
        for (int m = 0; m < 2; ++m)
          load_matrices(af[m], query_stages_address +
                                   2 * ((buffer * L + 16 * row_tile[m] + a_row) * layout.query_pitch + 16 * step + a_column));
        #pragma unroll
        for (int i = 0; i < kPairsPerWarp; ++i) {
          const int pair = pair_of(i);
          if (pair >= all_pairs) continue;
          std::uint32_t b[4];
          if (pair < value_pairs) {
            load_matrices_transposed(
                b, states_address + 2 * ((state_row + trans_row) * layout.state_pitch + 16 * pair + trans_column));
          } else {
            load_matrices(b, keys_address + 2 * ((16 * (pair - value_pairs) + plain_row) * layout.key_pitch + column +
                                                 plain_column));
          }
          #pragma unroll
          for (int m = 0; m < 2; ++m)
            if (pair < value_pairs || !above_diagonal(pair, m)) {
              mma_bf16(acc[m][2 * i], af[m], b[0], b[1]);
              mma_bf16(acc[m][2 * i + 1], af[m], b[2], b[3]);
            }
        }
      }
    }
    // h ← h·e_τ/√d; S' = S·W/√d into shared memory (bf16), the key tiles above the diagonal unwritten
    // (no row of theirs reads them).
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int i = 0; i < kPairsPerWarp; ++i) {
        const int pair = pair_of(i);
        if (pair >= all_pairs) continue;
        const int row = 16 * row_tile[m] + g;
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
          float* tile = acc[m][2 * i + half];
          if (pair < value_pairs) {
            const float top = entering[row] * query_scale, bottom = entering[row + 8] * query_scale;
            tile[0] *= top, tile[1] *= top, tile[2] *= bottom, tile[3] *= bottom;
          } else if (!above_diagonal(pair, m)) {
            const int j = 16 * (pair - value_pairs) + 8 * half + 2 * t;
            const float* w_top = weights + row * layout.weight_stride + j;
            const float* w_bottom = w_top + 8 * layout.weight_stride;
            *reinterpret_cast<std::uint32_t*>(scores + row * layout.score_pitch + j) =
                pack_bf16(tile[0] * query_scale * w_top[0], tile[1] * query_scale * w_top[1]);
            *reinterpret_cast<std::uint32_t*>(scores + (row + 8) * layout.score_pitch + j) =
                pack_bf16(tile[2] * query_scale * w_bottom[0], tile[3] * query_scale * w_bottom[1]);
          }
        }
      }
    __syncthreads();
    // h += S'·V over the keys up to the diagonal (16 a k-step).
    for (int step = 0; step < L / 16; ++step) {
      const bool needed[2] = {step <= row_tile[0], step <= row_tile[1]};
      std::uint32_t af[2][4];
      #pragma unroll
      for (int m = 0; m < 2; ++m)
        if (needed[m])
          load_matrices(af[m], scores_address +
                                   2 * ((16 * row_tile[m] + a_row) * layout.score_pitch + 16 * step + a_column));
      #pragma unroll
      for (int i = 0; i < kPairsPerWarp; ++i) {
        const int pair = pair_of(i);
        if (pair >= value_pairs) continue;
        std::uint32_t b[4];
        load_matrices_transposed(
            b, values_address + 2 * ((16 * step + trans_row) * layout.value_pitch + 16 * pair + trans_column));
        #pragma unroll
        for (int m = 0; m < 2; ++m)
          if (needed[m]) {
            mma_bf16(acc[m][2 * i], af[m], b[0], b[1]);
            mma_bf16(acc[m][2 * i + 1], af[m], b[2], b[3]);
          }
      }
    }
    // out = h · 1/den (onto the window's rows: the attention complete first).
    if (!window_written) {
      device::wait_for_previous_kernel();
      window_written = true;
    }
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int i = 0; i < kPairsPerWarp; ++i) {
        const int pair = pair_of(i);
        if (pair >= value_pairs) continue;
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float* tile = acc[m][2 * i + half];
          const int row = 16 * row_tile[m] + g, column = first_column + 16 * pair + 8 * half + 2 * t;
          const float* inverse = inverse_denominators + head * L;
          if (row < count)
            store_output_pair<Out>(a, first_token + row, first_head + head, column, tile[0] * inverse[row],
                                   tile[1] * inverse[row]);
          if (row + 8 < count)
            store_output_pair<Out>(a, first_token + row + 8, first_head + head, column, tile[2] * inverse[row + 8],
                                   tile[3] * inverse[row + 8]);
        }
      }
    __syncthreads();  // S' is rewritten by the next head
  }
}

// The kernel compiled for d where d is fixed (128, 256), else the one for any d up to 128; null
// for a d it does not hold (streamed C_c is for d = 256 only).
template <typename Out, bool kRounded>
auto outputs_kernel_for(int d) {
  return d == 256 ? chunk_outputs_bf16_kernel<Out, 256, kRounded>
         : d == 128 ? chunk_outputs_bf16_kernel<Out, 128, kRounded>
         : states_streamed(d) ? nullptr
                              : chunk_outputs_bf16_kernel<Out, 0, kRounded>;
}

}  // namespace

bool mlstm_prefill_detail::chunk_outputs_bf16_fits(int chunk, int d, int group) {
  const int pairs = value_columns(d) / 16 + kChunk / 16;
  return chunk == kChunk && d % kStageColumns == 0 && (d <= kSliceColumns || d % kSliceColumns == 0) && d <= 256 &&
         pairs <= kWarpColumns * kPairsPerWarp && Bf16OutputLayout(d, group).carve.bytes() <= kSharedMemoryLimit;
}

template <typename Out>
void mlstm_prefill_detail::launch_chunk_outputs_bf16(const PrefillArgs& args, cudaStream_t stream) {
  const int d = args.head_dim, group = args.query_heads / args.states;
  // carve_workspace makes bf16_matrices only where bf16_outputs (chunk_outputs_bf16_fits) holds.
  if (args.work.bf16_matrices == nullptr)
    fail("mlstm_prefill", "internal: the bf16 outputs kernel called without C_c in bf16 (a shape it does not hold)");
  const std::size_t bytes = Bf16OutputLayout(d, group).carve.bytes();
  const auto kernel =
      args.rounded.keys != nullptr ? outputs_kernel_for<Out, true>(d) : outputs_kernel_for<Out, false>(d);
  if (kernel == nullptr)
    fail("mlstm_prefill", "internal: the bf16 outputs kernel streams C_c for d = 256 only, not " + std::to_string(d));
  // Two blocks an SM need the whole 228 KB as shared memory.
  prefer_shared_memory_carveout(kernel, "chunk_outputs_bf16_kernel");
  // Split each state's heads over blocks while the grid stays within one wave of two blocks an SM.
  PrefillArgs parted = args;
  const int blocks = d / value_columns(d) * args.states * args.chunks, resident = 2 * multiprocessor_count();
  while (group % (2 * parted.output_head_parts) == 0 && blocks * 2 * parted.output_head_parts <= resident)
    parted.output_head_parts *= 2;
  launch_dependent(kernel, dim3(d / value_columns(d) * parted.output_head_parts, args.states, args.chunks),
                   dim3(kThreads), bytes, stream, "chunk_outputs_bf16_kernel", parted);
}

template void mlstm_prefill_detail::launch_chunk_outputs_bf16<float>(const PrefillArgs&, cudaStream_t);
template void mlstm_prefill_detail::launch_chunk_outputs_bf16<__nv_bfloat16>(const PrefillArgs&, cudaStream_t);
template void mlstm_prefill_detail::launch_chunk_outputs_bf16<__half>(const PrefillArgs&, cudaStream_t);

}  // namespace bifocal::cuda
