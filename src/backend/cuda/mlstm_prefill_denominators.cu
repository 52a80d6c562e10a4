// Kernel 3 of the chunkwise mLSTM prefill (mlstm_prefill.cu has the math and the other kernels'
// places): for each state head and chunk, what the outputs kernel scales its products by —
//   m_τ   the stabilizer, stepped from the chunk's entering m_c exactly as the CPU steps it,
//   W_τj  = e^{D_τj − m_τ} (j ≤ τ), e_τ = e^{b_τ + M_c − m_τ}   (double exponents),
//   1 / (max(|q̂_τᵀn_τ|, e^{−m_τ}) + 1e-6) for each of the state's G query heads, q̂ᵀn in double:
//         N_τ = e_τ n_c + Σ_j W_τj k_j on the fp64 tensor cores, then q̂_τ·N_τ head by head.
// W and e are stored as the floats the products use, the inverse denominators as floats.
//
// Why a kernel of its own: in the outputs kernel (one ~220 KB block an SM) this preamble — the
// copies, the two sequential chains, 4,096 double exponents and the fp64 normaliser — ran with
// nothing to overlap it, about a third of that kernel's stall samples (stop 19's line profile).
// Here it needs ~76 KB, so two blocks share a multiprocessor and each one's waits hide behind the
// other's work; the cost is reading q a second time: 54 µs a 4,096-token Qwen3-4B launch, ~40% of
// its stall samples on q's fragment loads (stop 20). Measured slower there: q staged in shared
// memory (one 214 KiB block an SM: 74.5 µs), the block's q prefetched into L2 at its start (64.9),
// three blocks an SM (73.6 with that prefetch), four heads' q in flight a tile pair ahead (56.0).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/mlstm_prefill_device.cuh"
#include "backend/cuda/phase_stamps.cuh"

#ifndef BIFOCAL_MLSTM_DENOMINATOR_PHASES
#define BIFOCAL_MLSTM_DENOMINATOR_PHASES 0
#endif

namespace bifocal::cuda {
namespace {

using namespace mlstm_prefill_detail;

// A debug build's phase stamps (phase_stamps.cuh; -DBIFOCAL_MLSTM_DENOMINATOR_PHASES=1): every
// block of one launch prints `denominator-phases BLOCK t0 … t7 CYCLES`, BLOCK = (c · states + s) ·
// parts + part, and `tools/cuda/phase_stamps.py --kernel denominators` reads them (stop 55 found
// half of a 1K block in step 3). The points, in the kernel's order:
enum DenominatorPhase : int {
  kDenominatorStart = 0,   // the block runs
  kDenominatorWaited,      // wait_for_previous_kernel returned: the scan's n_c, M_c, m_c are visible
  kDenominatorLoaded,      // the gates and n_c read, k's copies issued (after the barrier)
  kDenominatorChained,     // m_τ and b_τ stepped, k landed (step 1's barrier)
  kDenominatorWeighted,    // W and e (step 2's barrier)
  kDenominatorProducts,    // N = e·n_cᵀ + W·K and q̂·N for the heads (step 3's barrier)
  kDenominatorInverted,    // thread 0's inverse denominators written
  kDenominatorCounted,     // the block counted done (kernel 4's wait)
  kDenominatorPhaseCount
};
static_assert(kDenominatorPhaseCount == device::kStampedPoints, "phase_stamps.cuh prints eight stamps");
inline constexpr bool kDenominatorPhaseStamps = BIFOCAL_MLSTM_DENOMINATOR_PHASES != 0;
// Each block's 71st launch: a steady prefill of `bifocal bench --context 1k` (its warm-up prefill
// and then one a repeat, the model's layers each).
inline constexpr unsigned kRecordedDenominatorLaunch = 70;
inline constexpr unsigned kCountedDenominatorBlocks = kDenominatorPhaseStamps ? 4096 : 1;
__device__ device::PhaseLog denominator_phase_logs[kCountedDenominatorBlocks];

// q of this many query heads is loaded by a warp before its fp64 products, the rest prefetched
// into L2 then and loaded after them (8 registers a head).
constexpr int kPreloadedHeads = 2;
// A grid of at most one block a multiprocessor (1K tokens of Qwen3-4B: 128 blocks) has no second
// block to hide one's waits behind, and its q loads are the round trips it waits on: there, a warp
// loads every head's q (groups up to this many) before its products, and its first tile's before
// the chains and the exponents of steps 1–2 (kLatencyBound). Bigger grids keep kPreloadedHeads:
// with two blocks an SM, more q in flight was slower (stop 20).
constexpr int kLatencyBoundHeads = 4;

// Block (s, c): the chunk c of state head s. kHeadDim, kChunk: d and L fixed at compile time (d = 128
// and 256 at L = 64), so that the addresses fold; 0: the call's. The two kernels below run it.
template <int kHeadDim, int kChunk, bool kLatencyBound, int kParts = 1>
__device__ __forceinline__ void chunk_denominators(const PrefillArgs& a) {
  constexpr int kLoadedFirst = kLatencyBound ? kLatencyBoundHeads : kPreloadedHeads;
  device::PhaseStamps<kDenominatorPhaseStamps> phases;  // a debug build's; nothing otherwise
  phases.begin();
  if (!a.denominators_launch_next_after_wait) device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // n_c, M_c, m_c from the scan; the gates and k before it
  phases.mark(kDenominatorWaited);
  if (a.denominators_launch_next_after_wait) device::allow_next_kernel_launch();
  const int d = kHeadDim != 0 ? kHeadDim : a.head_dim, L = kChunk != 0 ? kChunk : a.chunk;
  constexpr int parts = kParts;  // chunk_denominator_parts, fixed at compile time (no registers)
  const int s = blockIdx.x, c = blockIdx.y, part = kParts == 1 ? 0 : int(blockIdx.z);
  const int group = a.group(), count = a.count(c);
  const int kv = a.kv_head(s), first_head = s * group, first_token = c * L, width = round_up(d, 32);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const DenominatorLayout layout(L, d, group, parts);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* keys = shared + layout.keys;
  double* weights = reinterpret_cast<double*>(shared + layout.weights);
  double* input = reinterpret_cast<double*>(shared + layout.input);
  double* log_forget = reinterpret_cast<double*>(shared + layout.log_forget);
  double* cumulative = reinterpret_cast<double*>(shared + layout.cumulative);
  double* entering = reinterpret_cast<double*>(shared + layout.entering);
  float* stabilizers = shared + layout.stabilizers;
  double* normalizer = reinterpret_cast<double*>(shared + layout.normalizer);
  double* partials = reinterpret_cast<double*>(shared + layout.partials);
  const std::size_t chunk_index = std::size_t(s) * a.chunks + c;
  const auto query_row = [&](int head, int row) {
    return a.q + (std::size_t(first_token + row) * a.query_heads + first_head + head) * d;
  };
  // Step 3's tiling (below): a warp's two m-tiles of 8 rows and its column group. With parts, the
  // block takes the pairs part·pairs … part·pairs + pairs − 1 (chunk_denominator_parts).
  const int pairs = L / 16 / parts, pair = part * pairs + warp % pairs, column_group = warp / pairs;
  const int n_tiles = d / 8;
  const int m_tile[2] = {pair, L / 8 - 1 - pair};
  const auto owns_row = [&](int r) {  // row r's m-tile is in one of this block's pairs
    const int tile = r / 8;
    return min(tile, L / 8 - 1 - tile) / pairs == part;
  };
  const int row[2] = {8 * m_tile[0] + g, 8 * m_tile[1] + g};
  // q̂'s elements this lane multiplies for one head, the n-tile pair from first_tile on.
  const auto load_queries = [&](int head, int first_tile, float2 (&into)[2][2]) {
    const bool second = first_tile + 1 < n_tiles;
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int n = 0; n < 2; ++n)
        into[m][n] = row[m] < count && (n == 0 || second)
                         ? *reinterpret_cast<const float2*>(query_row(head, row[m]) + 8 * (first_tile + n) + 2 * t)
                         : make_float2(0.0f, 0.0f);
  };
  float2 preloaded[kLoadedFirst][2][2];
  if constexpr (kLatencyBound) {  // the first tile's, in flight through steps 1 and 2
    #pragma unroll
    for (int head = 0; head < kLoadedFirst; ++head)
      if (head < group && 2 * column_group < n_tiles) load_queries(head, 2 * column_group, preloaded[head]);
  }

  // 1. k of the chunk (zero past it and past d), the gates, n_c.
  for (int item = threadIdx.x; item < L * width / 4; item += blockDim.x) {
    const int j = item / (width / 4), column = 4 * (item % (width / 4));
    const bool present = j < count && column < d;
    copy16_async(keys + j * layout.key_stride + column,
                 present ? a.k + (std::size_t(first_token + j) * a.kv_heads + kv) * d + column : a.k, present);
  }
  commit_async_copies();
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const double2 gates = a.work.token_gates[std::size_t(s) * a.n + first_token + j];
    input[j] = gates.x, log_forget[j] = gates.y;
  }
  for (int i = threadIdx.x; i < d; i += blockDim.x) normalizer[i] = a.work.normalizers[chunk_index * d + i];
  for (int i = threadIdx.x; i < layout.column_groups * group * L; i += blockDim.x) partials[i] = 0.0;
  const double entry_scale = a.work.entry_scales[chunk_index];
  const float entry_stabilizer = a.work.entry_stabilizers[chunk_index];
  __syncthreads();
  phases.mark(kDenominatorLoaded);
  // m_τ and b_τ exactly as the CPU steps and sums them: two independent sequential chains, one
  // thread each in different warps (the rest of the block waits for them at the next barrier).
  if (threadIdx.x == 0) {
    float m = entry_stabilizer;
    for (int j = 0; j < count; ++j) {
      m = step_stabilizer(m, make_double2(input[j], log_forget[j]));
      stabilizers[j] = m;
    }
  } else if (threadIdx.x == 32) {
    double decay = 0.0;
    for (int j = 0; j < count; ++j) {
      decay += log_forget[j];
      cumulative[j] = decay;
    }
  }
  wait_async_copies<0>();
  __syncthreads();
  phases.mark(kDenominatorChained);

  // 2. The weights (zero above the diagonal and past the chunk), here in double and for kernel 4
  //    as floats.
  float* chunk_weights = a.work.chunk_weights + chunk_index * L * L;
  for (int row = threadIdx.x; row < L; row += blockDim.x) {
    entering[row] = row < count ? exp(cumulative[row] + entry_scale - double(stabilizers[row])) : 0.0;
    if (owns_row(row)) a.work.entering[chunk_index * L + row] = float(entering[row]);
  }
  for (int item = threadIdx.x; item < L * L; item += blockDim.x) {
    const int row = item / L, j = item % L;
    if (!owns_row(row)) continue;  // another part's row: neither read below nor written here
    const double w =
        j <= row && row < count ? exp(cumulative[row] - cumulative[j] + input[j] - double(stabilizers[row])) : 0.0;
    weights[row * layout.weight_stride + j] = w;
    chunk_weights[item] = float(w);
  }
  __syncthreads();
  phases.mark(kDenominatorWeighted);

  // 3. q̂ᵀn_τ in double: N = e·n_cᵀ + W·K (L × d) on the fp64 tensor cores, then q̂_τ·N_τ per head.
  //    A warp owns two m-tiles of 8 rows (r and L/8−1−r: the causal work balances) and every
  //    column_groups-th pair of n-tiles of 8 columns; it sums q̂_τ·N_τ over its columns into
  //    `partials` (one writer per element), which are then summed over the column groups in a
  //    fixed order: the same bits on every run. Products and sums are IEEE fp64 throughout.
  const int steps[2] = {2 * m_tile[0] + 2, 2 * m_tile[1] + 2};  // k-steps of 4 keys up to the diagonal
  const double query_scale = 1.0 / sqrt(double(d));
  for (int first_tile = 2 * column_group; first_tile < n_tiles; first_tile += 2 * layout.column_groups) {
    const bool second = first_tile + 1 < n_tiles;  // warp-uniform, as mma.sync needs
    double sum[2][2][2];
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int column = 8 * (first_tile + n) + 2 * t;
        const bool present = n == 0 || second;
        sum[m][n][0] = present ? entering[row[m]] * normalizer[column] : 0.0;
        sum[m][n][1] = present ? entering[row[m]] * normalizer[column + 1] : 0.0;
      }
    // The first heads' q is loaded before the products, so that the global loads' latency hides
    // behind the fp64 mma chain; the other heads' lines go to L2 then. (kLatencyBound: the first
    // tile's were loaded before step 1.)
    if (!kLatencyBound || first_tile != 2 * column_group) {
      #pragma unroll
      for (int head = 0; head < kLoadedFirst; ++head)
        if (head < group) load_queries(head, first_tile, preloaded[head]);
    }
    for (int head = kLoadedFirst; head < group; ++head)
      #pragma unroll
      for (int m = 0; m < 2; ++m)
        if (row[m] < count) prefetch_line_to_l2(query_row(head, row[m]) + 8 * first_tile + 2 * t);
    const auto k_step = [&](int step, double (&long_tile)[2][2]) {
      // B[t][g] = k_{4step+t}[column + g], A[g][t] = W_{row, 4step+t}
      const float* key = keys + (4 * step + t) * layout.key_stride + 8 * first_tile + g;
      const double b0 = key[0], b1 = second ? key[8] : 0.0;
      const double a1 = weights[row[1] * layout.weight_stride + 4 * step + t];
      mma_fp64(long_tile[0], a1, b0);
      if (second) mma_fp64(long_tile[1], a1, b1);
      if (step < steps[0]) {
        const double a0 = weights[row[0] * layout.weight_stride + 4 * step + t];
        mma_fp64(sum[0][0], a0, b0);
        if (second) mma_fp64(sum[0][1], a0, b1);
      }
    };
    if constexpr (kLatencyBound) {
      // The longer m-tile's k-steps alternate between two accumulators, summed after in a fixed
      // order (the same bits on every run): its chain of dependent fp64 mma is half as long. A
      // block's products phase then takes 10.7 µs, not 15.4 (1K tokens of Qwen3-4B, H100; stop 56).
      double odd[2][2] = {};
      for (int step = 0; step < steps[1]; step += 2) {  // steps[1] = 2 · m_tile[1] + 2 is even
        k_step(step, sum[1]);
        k_step(step + 1, odd);
      }
      #pragma unroll
      for (int n = 0; n < 2; ++n) sum[1][n][0] += odd[n][0], sum[1][n][1] += odd[n][1];
    } else {
      for (int step = 0; step < steps[1]; ++step) k_step(step, sum[1]);
    }
    const auto add_partials = [&](int head, const float2 (&queries)[2][2]) {
      #pragma unroll
      for (int m = 0; m < 2; ++m) {  // q̂_τ·N_τ over this warp's columns
        double part = 0.0;
        #pragma unroll
        for (int n = 0; n < 2; ++n)
          part += (query_scale * queries[m][n].x) * sum[m][n][0] + (query_scale * queries[m][n].y) * sum[m][n][1];
        part += __shfl_xor_sync(kFullWarp, part, 1);
        part += __shfl_xor_sync(kFullWarp, part, 2);
        if (t == 0) partials[(column_group * group + head) * L + row[m]] += part;
      }
    };
    #pragma unroll
    for (int head = 0; head < kLoadedFirst; ++head)
      if (head < group) add_partials(head, preloaded[head]);
    for (int head = kLoadedFirst; head < group; ++head) {
      float2 queries[2][2];
      load_queries(head, first_tile, queries);
      add_partials(head, queries);
    }
  }
  __syncthreads();
  phases.mark(kDenominatorProducts);
  // Bifocal (a.mix.gate set): the outputs' memory weight o = sigmoid(mix gate) joins the inverse
  // denominator, so that kernel 4 writes o·h onto the window branch (MlstmOutputMix).
  for (int item = threadIdx.x; item < group * L; item += blockDim.x) {
    const int row_of_item = item % L, head = item / L;
    if (!owns_row(row_of_item)) continue;
    if (row_of_item >= count) {
      a.work.inverse_denominators[chunk_index * group * L + item] = 0.0f;
      continue;
    }
    double query_normalizer = 0.0;
    for (int column_group_index = 0; column_group_index < layout.column_groups; ++column_group_index)
      query_normalizer += partials[column_group_index * group * L + item];
    const double denominator = fmax(fabs(query_normalizer), exp(-double(stabilizers[row_of_item]))) + 1e-6;
    float inverse = float(1.0 / denominator);
    if (a.mix.gate != nullptr)  // MlstmOutputMix
      inverse *= device::bifocal_memory_weight(device::bifocal_mix_gate(a.mix.gate, a.mix.gate_stride,
                                                                        first_token + row_of_item, first_head + head,
                                                                        a.mix.gate_bias));
    a.work.inverse_denominators[chunk_index * group * L + item] = inverse;
  }
  phases.mark(kDenominatorInverted);
  count_denominators_block_done(a);
  phases.mark(kDenominatorCounted);
  phases.report("denominator-phases", denominator_phase_logs, kCountedDenominatorBlocks,
                (c * gridDim.x + s) * gridDim.z + part,
                kRecordedDenominatorLaunch);
}

template <int kHeadDim = 0, int kChunk = 0>
__global__ void __launch_bounds__(kDenominatorThreads) chunk_denominators_kernel(PrefillArgs a) {
  chunk_denominators<kHeadDim, kChunk, false>(a);
}

// The latency-bound variant (one block an SM at most) within 88 registers: its 8 warps and two of the
// window attention's 128-thread blocks (168 registers) then fill the register file exactly, so that
// the attention launched beside it (mlstm_prefill's window_branch) keeps two blocks on every such SM.
// At a launch bound of two blocks an SM its two accumulators take 110 registers: one attention block
// beside it, and Bifocal's 1K prefill 1.2 points lower (stop 56, Qwen3-4B, H100). The count is a
// template argument because nvcc's front end refuses __maxnreg__ beside __launch_bounds__ when both
// are literals; with it, both reach the PTX (.maxntid 256 and .maxnreg 88), and ptxas needs the
// first too: under .maxnreg alone the same 88 registers spill 32 bytes, and the prefill gained 1.0%
// where this form gains 1.5% (stop 56).
template <int kHeadDim, int kChunk, int kParts = 1, int kRegisters = 88>
__global__ void __launch_bounds__(kDenominatorThreads) __maxnreg__(kRegisters)
    latency_bound_denominators_kernel(PrefillArgs a) {
  chunk_denominators<kHeadDim, kChunk, true, kParts>(a);
}

// The kernel compiled for d = kHeadDim at L = 64: latency-bound in one part or (d = 256) two, or not.
template <int kHeadDim>
auto fixed_shape_kernel(bool latency_bound, int parts) {
  if constexpr (kHeadDim == 256)
    if (parts == 2) return latency_bound_denominators_kernel<kHeadDim, 64, 2>;
  return latency_bound ? latency_bound_denominators_kernel<kHeadDim, 64> : chunk_denominators_kernel<kHeadDim, 64>;
}

// The latency-bound variant's shapes: at most one (state, chunk) block an SM, for the bf16 models'.
bool latency_bound_shape(const PrefillArgs& args) {
  return args.query_heads / args.states <= kLatencyBoundHeads && args.state_chunks_within_one_an_sm();
}

}  // namespace

// Two parts where the latency-bound variant runs at L = 64, d = 256, and twice its blocks still fit
// one an SM (1K tokens of the Qwen3.5-like shape: 128 blocks, not 64). Each epilogue beside the
// attention waits for every block's count, so the kernel's end is on the layer's path: in halves it
// ends sooner. Bifocal's prefill there: +1.5% at 1K and +3.0% at 512 tokens (H200, stop 71).
// Not at d = 128, where the same plan lost 1.3% at 512 tokens of Qwen3-4B (128 blocks, one an SM;
// H200, stop 71), nor where two parts would put two blocks on an SM (1K of Qwen3-4B: 256 blocks):
// their shared memory leaves no attention block room beside them (−1.3% there, −0.3% at 2K of the
// Qwen3.5-like shape; stop 70).
int mlstm_prefill_detail::chunk_denominator_parts(const PrefillArgs& args) {
  const bool compiled_in_parts = args.chunk == 64 && args.head_dim == 256;  // fixed_shape_kernel<256>'s
  const bool halves_fit = 2 * std::int64_t(args.states) * args.chunks <= multiprocessor_count();
  return compiled_in_parts && latency_bound_shape(args) && halves_fit ? 2 : 1;
}

void mlstm_prefill_detail::launch_chunk_denominators(const PrefillArgs& args, cudaStream_t stream) {
  const int group = args.query_heads / args.states, parts = chunk_denominator_parts(args);
  const bool fixed = args.chunk == 64;
  const bool latency_bound = latency_bound_shape(args);
  const auto kernel = fixed && args.head_dim == 128   ? fixed_shape_kernel<128>(latency_bound, parts)
                      : fixed && args.head_dim == 256 ? fixed_shape_kernel<256>(latency_bound, parts)
                                                      : chunk_denominators_kernel<>;
  launch_dependent(kernel, dim3(args.states, args.chunks, parts), dim3(kDenominatorThreads),
                   DenominatorLayout(args.chunk, args.head_dim, group, parts).carve.bytes(), stream,
                   "chunk_denominators_kernel", args);
}

}  // namespace bifocal::cuda
