// Kernels 1 and 2 of the chunk-parallel mLSTM prefill: each chunk's contribution to the state,
// and the scan over chunks that gives the state entering each (with the stabilizer chain it
// steps), plus their host launchers. The math, the precision and the cost are in the header of
// mlstm_prefill.cu (kernel 4 and the host API); the device code the kernels share is in
// mlstm_prefill_device.cuh; the contract in recurrent_chunkwise.cuh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/mlstm_prefill_device.cuh"
#include "backend/cuda/recurrent_device.cuh"

namespace bifocal::cuda {
namespace {

using namespace mlstm_prefill_detail;

constexpr int kScanThreads = kRecurrentThreads - 32;     // kernel 2: warps 1 … 7 scan, warp 0 steps m
constexpr int kScanWindow = 64;                          // chunks whose scan factors sit in shared memory

// ---- The stabilizer chain (kernel 2) ------------------------------------------------------------

// R: m stepped by ρ(m) = fp32(m + logf) alone through `count` tokens, by the whole warp (every lane
// returns it), 32 tokens at a time with lane l holding token l's logf. In binade e with unit
// u = 2^{e−23}, ρ adds rint(logf/u)·u exactly while its result stays ≥ 2^e + u (m > 0; m < 0:
// |result| ≤ 2^{e+1} − u): a prefix sum over the remaining lanes, up to the first token that
// leaves the binade, which is stepped exactly (as is every token while |m| < 2^kFirstBinade).
__device__ float decayed_stabilizer(float m, const double2* gates, int count, int lane) {
  for (int window = 0; window < count; window += 32) {
    const int steps = min(32, count - window);
    const double log_forget = lane < steps ? gates[window + lane].y : 0.0;
    int next = 0;  // the window's first token not yet applied
    while (next < steps) {
      if (!(fabsf(m) >= 0x1p-12f)) {
        m = float(double(m) + __shfl_sync(kFullWarp, log_forget, next));
        ++next;
        continue;
      }
      const int e = ilogbf(fabsf(m));
      const double unit = ldexp(1.0, e - 23);
      const bool pending = lane >= next && lane < steps;
      double shift = pending ? rint(ldexp(log_forget, 23 - e)) * unit : 0.0;
      for (int offset = 1; offset < 32; offset *= 2) {
        const double earlier = __shfl_up_sync(kFullWarp, shift, offset);
        if (lane >= offset) shift += earlier;  // integers × unit: exact
      }
      const double candidate = double(m) + shift;
      const bool stays = m > 0 ? candidate >= ldexp(1.0, e) + unit : -candidate <= ldexp(1.0, e + 1) - unit;
      const unsigned leaves = __ballot_sync(kFullWarp, pending && !stays);
      const int first = leaves == 0 ? steps : __ffs(leaves) - 1;
      const double before = __shfl_sync(kFullWarp, candidate, max(first - 1, 0));
      if (first > next) m = float(before);
      if (first < steps) m = float(double(m) + __shfl_sync(kFullWarp, log_forget, first));
      next = first + 1;
    }
  }
  return m;
}

// The stabilizer leaving a chunk entered with m: max(R(m), B_c) (ρ is monotone, so the fp32 chain
// with its maxima splits into the decayed entry and the chunk's own inputs). Warp-uniform.
__device__ float stabilizer_after_chunk(float m, const ChunkSummary& chunk, const double2* gates, int count,
                                        int lane) {
  // R(m) ≤ m + b_L + count half-units: below B_c, the chunk's inputs decide alone.
  const double slack = count * 0x1p-23 * (fabs(double(m)) + fabs(chunk.decay) + 1.0);
  if (double(m) + chunk.decay + slack < double(chunk.from_below)) return chunk.from_below;
  const float magnitude = fabsf(m);
  if (magnitude >= 0x1p-12f && magnitude < 0x1p4f) {
    const int e = ilogbf(magnitude);
    const double unit = ldexp(1.0, e - 23);
    const double candidate = double(m) + chunk.shifts[e - kFirstBinade];
    const bool stays = m > 0 ? candidate >= ldexp(1.0, e) + unit : -candidate <= ldexp(1.0, e + 1) - unit;
    if (stays) return fmaxf(float(candidate), chunk.from_below);
  }
  return fmaxf(decayed_stabilizer(m, gates, count, lane), chunk.from_below);
}

// ---- Kernel 1: each chunk's contribution --------------------------------------------------------

// The chunk's summary in the CPU's order, by kernel 1's chain warp (kChainWarp): b_L = Σ logf in
// order, B_c the fp32 chain from −∞, and lane i < kBinades the chain ρ's decay in binade
// kFirstBinade + i. One loop: every lane steps b and B (lane 0 stores them) beside its binade sum,
// so the warp never diverges. logf·2^(23−e) is ldexp(logf, 23 − e) exactly (a power of two ≥ 1,
// |logf| ≤ 16: no overflow), without its library call.
__device__ void step_chunk_chains(ChunkSummary& summary, const double* input, const double* log_forget, int count,
                                  int lane) {
  const int e = kFirstBinade + min(lane, kBinades - 1);
  const double to_units = ldexp(1.0, 23 - e);
  double decay = 0.0, units = 0.0;
  float from_below = -INFINITY;
  #pragma unroll 4
  for (int j = 0; j < count; ++j) {
    const double log_forget_j = log_forget[j];
    decay += log_forget_j;
    from_below = step_stabilizer(from_below, make_double2(input[j], log_forget_j));
    units += rint(log_forget_j * to_units);
  }
  if (lane < kBinades) summary.shifts[lane] = ldexp(units, e - 23);
  if (lane == 0) summary.decay = decay, summary.from_below = from_below;
}

// Kernel 1 with MlstmProducts::Bf16 (bf16 models) stages w∘V in bf16 (ContributionLayout): v is
// read into registers at the block's start, scaled by w_j in fp32 once the chain has given w, and
// rounded once; k stays fp32 (Δñ's double path and the TF32 A fragments read it). A bf16 value is
// a TF32 one as it is (8 significant bits of 11): its B fragment is its bits shifted, no rounding.
// Quads of v a thread holds from the start (d = 128, L = 64: all of them); the rest of a larger
// head is read when it is stored.
constexpr int kEarlyValueQuads = 8;

struct Bf16RowMajor {
  const __nv_bfloat16* p;
  int stride;
};
__device__ __forceinline__ void load_b(std::uint32_t& b0, std::uint32_t& b1, Bf16RowMajor m, int k, int column,
                                       int lane) {
  const int g = lane / 4, t = lane % 4;
  const auto bits = [&](int r, int c) {
    return std::uint32_t(*reinterpret_cast<const unsigned short*>(m.p + r * m.stride + c)) << 16;
  };
  b0 = bits(k + t, column + g);
  b1 = bits(k + t + 4, column + g);
}

// Block (s, c, part): ΔC̃_c = Kᵀ·(w∘V) (3xTF32, one TF32 pass, or w∘V in bf16: kProducts),
// Δñ_c = Σ w_j k_j (double), w_j = e^{D_Lj − λ_c} — the part's share of their columns and
// elements (PrefillArgs::contribution_parts; every part steps the gates, part 0 stores them and
// the chunk's summary for the stabilizer chain). Bf16 keeps to 64 registers: four blocks an SM, or,
// in short calls, room for the window's gather beside it; the others keep no limit (a launch bound's
// minimum of 1 costs them 6 registers). kHeadDim, kChunk: d and L fixed at compile time (bf16
// models' d = 128 and 256 at L = 64), so that the addresses fold; 0: the call's.
// kChainWarp (short calls, at most two blocks an SM): a ninth warp steps the chunk's chains in the
// CPU's order (b_L, B_c, the binade table) beside the other eight, which take b_τ from a warp's
// prefix sum (its ulps are harmless: every weight e^{b_L − b_j + ĩ_j − λ_c} and λ_c come from the
// same sums) and go on to the weights and the product at once; they meet it at no barrier. Within
// 64 registers, two blocks of it leave an SM room for two of the gather's blocks (44 registers),
// which wait at their end beside it (mlstm_prefill's window_gather); at the 74 it takes unbounded,
// one (docs/notes/cuda-stop55-2026-12-05.md).
template <MlstmProducts kProducts, int kHeadDim = 0, int kChunk = 0, bool kChainWarp = false>
__global__ void __launch_bounds__(kRecurrentThreads + (kChainWarp ? 32 : 0))
    __maxnreg__(kProducts == MlstmProducts::Bf16 ? 64 : 255) chunk_contributions_kernel(PrefillArgs a) {
  constexpr bool kBf16Values = kProducts == MlstmProducts::Bf16;
  static_assert(!kChainWarp || kChunk == 64, "the chain warp's prefix sum takes two tokens a lane");
  if (!a.contributions_launch_next_after_wait) device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // q, k, v and the gates come from earlier kernels
  if (a.contributions_launch_next_after_wait) device::allow_next_kernel_launch();
  // Kernel 3's count starts over: the last call's outputs kernel, which read it, has completed.
  if (a.outputs_beside_window && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0)
    *a.work.denominators_done = 0;
  const int d = kHeadDim != 0 ? kHeadDim : a.head_dim, chunk = kChunk != 0 ? kChunk : a.chunk;
  const int s = blockIdx.x, c = blockIdx.y, kv = a.kv_head(s), count = a.count(c);
  const int first_token = c * chunk, width = round_up(d, 32), lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part_width = d / int(gridDim.z), first_column = int(blockIdx.z) * part_width;  // of ΔC̃ and Δñ
  const bool first_part = blockIdx.z == 0;
  const ContributionLayout layout(chunk, d, kBf16Values);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* keys = shared + layout.keys;
  float* values = shared + layout.values;
  __nv_bfloat16* bf16_values = reinterpret_cast<__nv_bfloat16*>(shared + layout.values);
  double* input = reinterpret_cast<double*>(shared + layout.input);
  double* log_forget = reinterpret_cast<double*>(shared + layout.log_forget);
  double* cumulative = reinterpret_cast<double*>(shared + layout.cumulative);
  double* weights = reinterpret_cast<double*>(shared + layout.weights);
  double* scalars = reinterpret_cast<double*>(shared + layout.scalars);
  const std::size_t chunk_index = std::size_t(s) * a.chunks + c;

  // Rows of k and v, zero past the chunk and past d (padding rows of Kᵀ's m-tiles).
  const int quads = chunk * width / 4;
  const auto value_quad = [&](int item) {  // v's quad `item` of the padded chunk (zero outside it)
    const int j = item / (width / 4), column = 4 * (item % (width / 4));
    if (j >= count || column >= d) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    return *reinterpret_cast<const float4*>(a.v + (std::size_t(first_token + j) * a.kv_heads + kv) * d + column);
  };
  const bool chain_warp = kChainWarp && warp == kWarps;  // the chains' warp copies and stages nothing
  for (int item = chain_warp ? quads : threadIdx.x; item < quads; item += kRecurrentThreads) {
    const int j = item / (width / 4), column = 4 * (item % (width / 4));
    const bool present = j < count && column < d;
    const std::size_t at = (std::size_t(first_token + (present ? j : 0)) * a.kv_heads + kv) * d + (present ? column : 0);
    copy16_async(keys + j * layout.stride + column, a.k + at, present);
    if constexpr (!kBf16Values) copy16_async(values + j * layout.stride + column, a.v + at, present);
  }
  commit_async_copies();
  float4 early_values[kBf16Values ? kEarlyValueQuads : 1];
  if constexpr (kBf16Values) {
    if (!chain_warp) {
      #pragma unroll
      for (int u = 0; u < kEarlyValueQuads; ++u)  // value_quad is zero past the padded chunk too
        early_values[u] = value_quad(threadIdx.x + u * kRecurrentThreads);
    }
  }
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const std::size_t at = std::size_t(first_token + j) * a.gates.stride + s;
    float input_raw = a.gates.input[at], forget_raw = a.gates.forget[at];
    if (a.gates.input_bias != nullptr) input_raw += a.gates.input_bias[s];  // MlstmGateInputs: the product's bias
    if (a.gates.forget_bias != nullptr) forget_raw += a.gates.forget_bias[s];
    const device::MlstmLogGates gates = device::mlstm_log_gates(input_raw, forget_raw);
    input[j] = gates.input;
    log_forget[j] = gates.log_forget;
    if (first_part) a.work.token_gates[std::size_t(s) * a.n + first_token + j] = make_double2(gates.input, gates.log_forget);
  }
  if (c == 0 && threadIdx.x == 0 && first_part) {  // the scan starts from the caller's m_0 (M_0 = m_0)
    const float entering = a.state.stabilizer[s];
    a.work.entry_scales[chunk_index] = entering;
    a.work.entry_stabilizers[chunk_index] = entering;
  }
  __syncthreads();

  ChunkSummary& summary = a.work.summaries[chunk_index];
  if constexpr (kChainWarp) {
    if (chain_warp) {  // the summary's chains, then this warp is done
      if (first_part) step_chunk_chains(summary, input, log_forget, count, lane);
      return;
    }
    if (warp == 0) {  // b_τ by a prefix sum, then λ_c
      double b[2];
      for (int u = 0; u < 2; ++u) b[u] = 2 * lane + u < count ? log_forget[2 * lane + u] : 0.0;
      b[1] += b[0];
      double before = b[1];  // lanes ≤ this one's pair sums, inclusive
      for (int offset = 1; offset < 32; offset *= 2) {
        const double earlier = __shfl_up_sync(kFullWarp, before, offset);
        if (lane >= offset) before += earlier;
      }
      before -= b[1];
      for (int u = 0; u < 2; ++u)
        if (2 * lane + u < count) cumulative[2 * lane + u] = before + b[u];
      __syncwarp();
      const double decay = cumulative[count - 1];
      double scale = -INFINITY;
      for (int j = lane; j < count; j += 32) scale = fmax(scale, decay - cumulative[j] + input[j]);
      for (int offset = 16; offset > 0; offset /= 2) scale = fmax(scale, __shfl_xor_sync(kFullWarp, scale, offset));
      if (lane == 0) {
        scalars[0] = decay, scalars[1] = scale;
        if (first_part) summary.scale = scale;
      }
    }
  } else if (warp == 0) {  // b_τ in order (as the CPU sums it) and B_c by lane 0, then λ_c by the warp
    if (lane == 0) {
      double decay = 0.0;
      float from_below = -INFINITY;
      for (int j = 0; j < count; ++j) {
        decay += log_forget[j];
        cumulative[j] = decay;
        from_below = step_stabilizer(from_below, make_double2(input[j], log_forget[j]));
      }
      scalars[0] = decay;
      if (first_part) summary.decay = decay, summary.from_below = from_below;
    }
    __syncwarp();
    double scale = -INFINITY;  // a maximum: exact in any order
    for (int j = lane; j < count; j += 32) scale = fmax(scale, scalars[0] - cumulative[j] + input[j]);
    for (int offset = 16; offset > 0; offset /= 2) scale = fmax(scale, __shfl_xor_sync(kFullWarp, scale, offset));
    if (lane == 0) {
      scalars[1] = scale;
      if (first_part) summary.scale = scale;
    }
  } else if (warp == 1 && lane < kBinades && first_part) {  // the chain ρ's decay in binade e
    const int e = kFirstBinade + lane;
    double units = 0.0;
    for (int j = 0; j < count; ++j) units += rint(ldexp(log_forget[j], 23 - e));
    summary.shifts[lane] = ldexp(units, e - 23);
  }
  // From here on the eight product warps alone (kChainWarp: the chains' warp meets no barrier).
  const auto product_warps_barrier = [] {
    if constexpr (kChainWarp) asm volatile("bar.sync 1, %0;\n" ::"n"(kRecurrentThreads) : "memory");
    else __syncthreads();
  };
  wait_async_copies<0>();
  product_warps_barrier();
  for (int j = threadIdx.x; j < chunk; j += kRecurrentThreads)
    weights[j] = j < count ? exp(scalars[0] - cumulative[j] + input[j] - scalars[1]) : 0.0;
  product_warps_barrier();
  if constexpr (kBf16Values) {  // w∘V rounded once into bf16: the quads held, then the rest
    const auto store_scaled = [&](int item, float4 x) {
      const int j = item / (width / 4), column = 4 * (item % (width / 4));
      const float w = float(weights[j]);
      store_bf16x4(bf16_values + j * layout.stride + column, make_float4(w * x.x, w * x.y, w * x.z, w * x.w));
    };
    #pragma unroll
    for (int u = 0; u < kEarlyValueQuads; ++u)
      if (const int item = threadIdx.x + u * kRecurrentThreads; item < quads) store_scaled(item, early_values[u]);
    for (int item = threadIdx.x + kEarlyValueQuads * kRecurrentThreads; item < quads; item += kRecurrentThreads)
      store_scaled(item, value_quad(item));
  } else {
    for (int j = warp; j < chunk; j += kWarps) {  // w∘V: a warp a row, four columns a lane, no division
      const float w = float(weights[j]);
      for (int column = 4 * lane; column < width; column += 4 * 32) {
        float4& quad = *reinterpret_cast<float4*>(values + j * layout.stride + column);
        quad.x *= w, quad.y *= w, quad.z *= w, quad.w *= w;
      }
    }
  }
  for (int i = first_column + threadIdx.x; i < first_column + part_width; i += kRecurrentThreads) {
    double sum = 0.0;
    for (int j = 0; j < count; ++j) sum += weights[j] * double(keys[j * layout.stride + i]);
    a.work.normalizers[chunk_index * d + i] = sum;
  }
  product_warps_barrier();

  // ΔC̃ (d × d) = Kᵀ (d × L) · (w∘V) (L × d), warp tiles of 2 × 4 mma tiles.
  // The part's columns: tiles first_tile … column_tiles − 1.
  const int row_tiles = (d + 15) / 16, first_tile = first_column / 8, column_tiles = (first_column + part_width) / 8;
  const int row_groups = (row_tiles + 1) / 2, column_groups = (column_tiles - first_tile + 3) / 4;
  float* matrix = a.work.matrices + chunk_index * d * d;
  for (int tile = warp; tile < row_groups * column_groups; tile += kWarps) {
    const int row_tile = 2 * (tile / column_groups), column_tile = first_tile + 4 * (tile % column_groups);
    float acc[2][4][4] = {};
    for (int k = 0; k < count; k += 8) {
      Operand<kProducts> af[2][4];
      #pragma unroll
      for (int m = 0; m < 2; ++m)
        if (row_tile + m < row_tiles)
          load_a<kProducts>(af[m], Transposed{keys, layout.stride}, 16 * (row_tile + m), k, lane);
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (column_tile + i >= column_tiles) continue;
        Operand<kProducts> b0, b1;
        if constexpr (kBf16Values)
          load_b(b0, b1, Bf16RowMajor{bf16_values, layout.stride}, k, 8 * (column_tile + i), lane);
        else
          load_b<kProducts>(b0, b1, RowMajor{values, layout.stride}, k, 8 * (column_tile + i), lane);
        #pragma unroll
        for (int m = 0; m < 2; ++m)
          if (row_tile + m < row_tiles) mma(acc[m][i], af[m], b0, b1);
      }
    }
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = 16 * (row_tile + m) + lane / 4, column = 8 * (column_tile + i) + 2 * (lane % 4);
        if (column_tile + i >= column_tiles) continue;
        if (row < d) *reinterpret_cast<float2*>(matrix + row * d + column) = make_float2(acc[m][i][0], acc[m][i][1]);
        if (row + 8 < d)
          *reinterpret_cast<float2*>(matrix + (row + 8) * d + column) = make_float2(acc[m][i][2], acc[m][i][3]);
      }
  }
}

// ---- Kernel 2: the scan over chunks -------------------------------------------------------------

// Where the scan leaves an element of the state entering a chunk: in place of its ΔC̃_c or Δñ_c,
// or (C for the bf16 outputs kernel) four bf16 in Workspace::bf16_matrices.
__device__ __forceinline__ void store_entering(float4* at, float4 x) { *at = x; }
__device__ __forceinline__ void store_entering(double* at, double x) { *at = x; }
__device__ __forceinline__ void store_entering(uint2* at, float4 x) {
  *at = make_uint2(device::pack_pair<__nv_bfloat16>(x.x, x.y), device::pack_pair<__nv_bfloat16>(x.z, x.w));
}

// One element of the state (a float4 of C or a double of n) carried through a window of chunks:
// slot c's ΔC̃_c is read, and the state entering chunk c stored to entering_slots' slot c (the
// same memory, or C's bf16 copy).
template <typename T, typename Factor, typename Entering>
__device__ void scan_window(T& x, const T* slots, Entering* entering_slots, std::size_t slot_stride, int first,
                            int count, const Factor* carry, const Factor* add) {
  constexpr int kInFlight = 8;
  for (int base = 0; base < count; base += kInFlight) {
    T y[kInFlight];
    #pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (base + u < count) y[u] = slots[std::size_t(first + base + u) * slot_stride];
    #pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (base + u >= count) continue;
      store_entering(entering_slots + std::size_t(first + base + u) * slot_stride, x);
      const Factor alpha = carry[base + u], beta = add[base + u];
      if constexpr (std::is_same_v<T, float4>) {
        x.x = fmaf(alpha, x.x, beta * y[u].x), x.y = fmaf(alpha, x.y, beta * y[u].y);
        x.z = fmaf(alpha, x.z, beta * y[u].z), x.w = fmaf(alpha, x.w, beta * y[u].w);
      } else {
        x = fma(alpha, x, beta * y[u]);
      }
    }
  }
}

// Block (slice, s): warp 0 steps the stabilizer across the chunks (m_c for kernels 3 and 4, m at the end);
// warps 1 … 7 carry one element each of C (float4) or n (double) of state head s through them.
__global__ void __launch_bounds__(kRecurrentThreads, 2) state_scan_kernel(PrefillArgs a) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // kernel 1's contributions and summaries
  __shared__ ChunkSummary staged[32];
  __shared__ float carry_f[kScanWindow], add_f[kScanWindow];
  __shared__ double carry_d[kScanWindow], add_d[kScanWindow];
  __shared__ double final_scale;
  __shared__ float final_stabilizer;
  const int slice = blockIdx.x, s = blockIdx.y, d = a.head_dim, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::size_t first_chunk = std::size_t(s) * a.chunks;
  // This thread's element: item < d²/4 a float4 of C, then d doubles of n (warp 0 holds none).
  const std::size_t matrix_items = std::size_t(d) * d / 4;
  const std::size_t item = std::size_t(slice) * kScanThreads + threadIdx.x - 32;
  const bool is_matrix = warp > 0 && item < matrix_items;
  const bool is_normalizer = warp > 0 && !is_matrix && item < matrix_items + d;
  const std::size_t normalizer_item = is_normalizer ? item - matrix_items : 0;
  float4 matrix = make_float4(0, 0, 0, 0);
  double normalizer = 0.0;

  if (warp == 0) {
    float m = a.work.entry_stabilizers[first_chunk];  // m_0, copied by kernel 1
    for (int base = 0; base < a.chunks; base += 32) {
      __syncwarp();
      if (base + lane < a.chunks) staged[lane] = a.work.summaries[first_chunk + base + lane];
      __syncwarp();
      for (int i = 0; i < min(32, a.chunks - base); ++i) {
        const int c = base + i;
        if (c > 0 && slice == 0 && lane == 0) a.work.entry_stabilizers[first_chunk + c] = m;
        m = stabilizer_after_chunk(m, staged[i], a.work.token_gates + std::size_t(s) * a.n + std::size_t(c) * a.chunk,
                                   a.count(c), lane);
      }
    }
    if (lane == 0) final_stabilizer = m;
  } else {
    float4* matrix_slots = reinterpret_cast<float4*>(a.work.matrices + first_chunk * d * d);
    double* normalizer_slots = a.work.normalizers + first_chunk * d;
    uint2* bf16_slots = a.work.bf16_matrices == nullptr  // four bf16 of C a slot
                            ? nullptr
                            : reinterpret_cast<uint2*>(a.work.bf16_matrices + first_chunk * d * d);
    if (is_matrix) matrix = reinterpret_cast<const float4*>(a.state.matrix + std::size_t(s) * d * d)[item];
    if (is_normalizer) normalizer = a.state.normalizer[std::size_t(s) * d + normalizer_item];
    double scale = a.work.entry_scales[first_chunk];  // M_0 = m_0 (warp 1 carries it)
    for (int window = 0; window < a.chunks; window += kScanWindow) {
      const int window_count = min(kScanWindow, a.chunks - window);
      if (warp == 1) {  // M_{c+1} = max(M_c + b_L, λ_c) as a max-plus prefix scan, 32 chunks at a time
        for (int part = 0; part < window_count; part += 32) {
          const int c = window + part + lane;
          const bool has = part + lane < window_count;
          const double decay = has ? a.work.summaries[first_chunk + c].decay : 0.0;
          const double own_scale = has ? a.work.summaries[first_chunk + c].scale : -INFINITY;
          double shift = decay, bound = own_scale;  // the map x ↦ max(x + shift, bound) of chunks … c
          for (int offset = 1; offset < 32; offset *= 2) {
            const double earlier_shift = __shfl_up_sync(kFullWarp, shift, offset);
            const double earlier_bound = __shfl_up_sync(kFullWarp, bound, offset);
            if (lane >= offset) bound = fmax(earlier_bound + shift, bound), shift += earlier_shift;
          }
          const double leaving = fmax(scale + shift, bound);  // M_{c+1}
          double entering = __shfl_up_sync(kFullWarp, leaving, 1);
          if (lane == 0) entering = scale;
          if (has) {
            const double carry = exp(entering + decay - leaving), add = exp(own_scale - leaving);
            carry_d[part + lane] = carry, add_d[part + lane] = add;
            carry_f[part + lane] = float(carry), add_f[part + lane] = float(add);
            if (slice == 0 && c + 1 < a.chunks) a.work.entry_scales[first_chunk + c + 1] = leaving;
          }
          scale = __shfl_sync(kFullWarp, leaving, 31);  // padding lanes carry the last map through
        }
        if (lane == 0) final_scale = scale;
      }
      asm volatile("bar.sync 1, %0;\n" ::"n"(kScanThreads) : "memory");  // warps 1 … 7: the factors are ready
      if (is_matrix && bf16_slots != nullptr)
        scan_window(matrix, matrix_slots + item, bf16_slots + item, std::size_t(d) * d / 4, window, window_count,
                    carry_f, add_f);
      else if (is_matrix)
        scan_window(matrix, matrix_slots + item, matrix_slots + item, std::size_t(d) * d / 4, window, window_count,
                    carry_f, add_f);
      if (is_normalizer)
        scan_window(normalizer, normalizer_slots + normalizer_item, normalizer_slots + normalizer_item,
                    std::size_t(d), window, window_count, carry_d, add_d);
      asm volatile("bar.sync 1, %0;\n" ::"n"(kScanThreads) : "memory");  // read before warp 1 rewrites them
    }
  }
  __syncthreads();  // warp 0's m, warp 1's M

  // The state leaving the call, in the recurrence's own stabilizer: × e^{M − m} (≈ 1).
  const double rescale = exp(final_scale - double(final_stabilizer));
  if (is_matrix) {
    const float f = float(rescale);
    reinterpret_cast<float4*>(a.state.matrix + std::size_t(s) * d * d)[item] =
        make_float4(matrix.x * f, matrix.y * f, matrix.z * f, matrix.w * f);
  }
  if (is_normalizer) a.state.normalizer[std::size_t(s) * d + normalizer_item] = float(normalizer * rescale);
  if (slice == 0 && threadIdx.x == 0) a.state.stabilizer[s] = final_stabilizer;
}

}  // namespace

void mlstm_prefill_detail::launch_chunk_contributions(const PrefillArgs& args, cudaStream_t stream) {
  const bool bf16_values = args.products == MlstmProducts::Bf16;
  const bool fixed = args.chunk == 64;  // bf16 models' common shapes compiled for their d and L
  const std::size_t needed = ContributionLayout(args.chunk, args.head_dim, bf16_values).carve.bytes();
  // A (state, chunk) in parts while the grid stays within two blocks an SM and a part keeps whole
  // 8-column tiles (PrefillArgs::contribution_parts). Half a block's path is its product and its
  // stores (docs/notes/cuda-stop53-2026-12-05.md), which parts share: 1K tokens of Qwen3-4B run
  // 256 blocks of half the columns, not 128 blocks of all of them (+0.7% prefill, stop 53).
  PrefillArgs parted = args;
  const std::int64_t blocks = std::int64_t(args.states) * args.chunks;
  while (parted.contribution_parts < 4 && args.head_dim % (16 * parted.contribution_parts) == 0 &&
         blocks * parted.contribution_parts <= multiprocessor_count())
    parted.contribution_parts *= 2;
  // At most two blocks an SM: spread over the SMs, not piled onto the few the previous kernel
  // frees first (spread_shared_bytes).
  const std::size_t shared_bytes = spread_shared_bytes(needed, blocks * parted.contribution_parts, 2);
  // The chain warp in short calls (the blocks at most two an SM: each costs its serial path) of the
  // fixed shapes.
  const bool chain_warp = bf16_values && fixed && (args.head_dim == 128 || args.head_dim == 256) &&
                          blocks * parted.contribution_parts <= 2 * std::int64_t(multiprocessor_count());
  using Kernel = void (*)(PrefillArgs);
  const Kernel kernel =
      args.products == MlstmProducts::Fp32 ? chunk_contributions_kernel<MlstmProducts::Fp32>
      : !bf16_values                       ? chunk_contributions_kernel<MlstmProducts::Tf32>
      : chain_warp && args.head_dim == 128 ? chunk_contributions_kernel<MlstmProducts::Bf16, 128, 64, true>
      : chain_warp                         ? chunk_contributions_kernel<MlstmProducts::Bf16, 256, 64, true>
      : fixed && args.head_dim == 128      ? chunk_contributions_kernel<MlstmProducts::Bf16, 128, 64>
      : fixed && args.head_dim == 256      ? chunk_contributions_kernel<MlstmProducts::Bf16, 256, 64>
                                           : chunk_contributions_kernel<MlstmProducts::Bf16>;
  // Four blocks an SM (bf16 values) need ~217 KB of shared memory.
  if (bf16_values) prefer_shared_memory_carveout(kernel, "chunk_contributions_kernel");
  launch_dependent(kernel, dim3(args.states, args.chunks, parted.contribution_parts),
                   dim3(kRecurrentThreads + (chain_warp ? 32 : 0)), shared_bytes, stream, "chunk_contributions_kernel",
                   parted);
}

void mlstm_prefill_detail::launch_state_scan(const PrefillArgs& args, cudaStream_t stream) {
  const int d = args.head_dim;
  const int slices = (d * d / 4 + d + kScanThreads - 1) / kScanThreads;
  launch_dependent(state_scan_kernel, dim3(slices, args.states), dim3(kRecurrentThreads), 0, stream,
                   "state_scan_kernel", args);
}

}  // namespace bifocal::cuda
