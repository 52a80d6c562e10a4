// cpu::mlstm_chunkwise on the GPU, parallel over chunks (DESIGN.md "mlstm", and the mLSTM branch
// of "bifocal"). Contract in recurrent_chunkwise.cuh.
//
// Math. Per state head, chunks of L tokens; inside chunk c, b_τ = Σ_{u≤τ} logf_u (double) and
// D_τj = b_τ − b_j + ĩ_j. Unrolling the recurrence (cpu/mlstm.cpp's chunkwise_state_head derives it),
// with C̄ = e^m·C the unstabilized state:
//   C̄_{c+1} = e^{b_L} C̄_c + Σ_j e^{D_Lj} k_j v_jᵀ,   q̂ᵀC_τ = e^{b_τ − m_τ} q̂ᵀC̄_c + Σ_{j≤τ} e^{D_τj − m_τ} (q̂·k_j) v_j
// (n likewise with v → 1). Four kernels:
//   1. contributions (state head × chunk): the gates, the chunk's log-scale λ_c = max_j D_Lj, and
//      ΔC̃_c = Σ_j e^{D_Lj − λ_c} k_j v_jᵀ (every weight ≤ 1, one of them 1), Δñ_c likewise in double.
//   2. scan (state head × column slice of C; sequential over chunks, elementwise): the state
//      entering each chunk, C_c = C̄_c e^{−M_c} with the scale M_{c+1} = max(M_c + b_L, λ_c)
//      (exact max-plus in double, M_0 = m_0): C_{c+1} = e^{M_c + b_L − M_{c+1}} C_c + e^{λ_c − M_{c+1}} ΔC̃_c,
//      both factors ≤ 1, so nothing overflows for any gates or length. n is carried in double.
//      The last one, rescaled to the recurrence's own m, is the state written back in place.
//   3. denominators (state head × chunk, halves of its rows at d = 256 where that still fits one
//      block an SM; mlstm_prefill_denominators.cu): m_τ inside the chunk, the weights W_τj = e^{D_τj − m_τ} and
//      e_τ = e^{b_τ + M_c − m_τ}, and 1 / (max(|q̂_τᵀn_τ|, e^{−m_τ}) + 1e-6) for the state's G query heads
//      (the normaliser path, double).
//   4. outputs (state head × chunk, its G query heads one after another):
//      h_τ = (e_τ q̂_τᵀC_c + Σ_{j≤τ} W_τj (q̂_τ·k_j) v_j) / (max(|q̂_τᵀn_τ|, e^{−m_τ}) + 1e-6).
//   Bifocal (MlstmOutputMix): kernel 3 folds the mix weight o_τ = sigmoid(mix gate) into the
//   inverse denominators, and kernel 4 adds o_τ·h_τ onto the window branch's (1 − o_τ)·SWA in L2
//   (red.global.add): the mix costs no pass and no load the outputs kernel would wait on (a mix
//   that read the window branch in this epilogue cost more than its own pass: stop 20).
//
// The stabilizer m. DESIGN.md's m_t = max(logf + m_{t−1}, ĩ_t) is stepped in fp32 by the CPU (an
// fp32 sum cannot resolve logf ≈ −3e-7 next to m ≈ 15, so m_t then stays put); the outputs see m
// through e^{−m} and the 1e-6, and the state is (C, n, m), so m must be that fp32 sequence, not the
// exact maximum (4,096 saturated forget gates set them 1e-3 apart). Kernel 2 steps it across
// chunks: with ρ(x) = fp32(x + logf) monotone, m after a chunk is max(R(m_c), B_c), B_c the chunk
// stepped from −∞ (kernel 1) and R the chain of ρ alone; inside one binade [2^e, 2^{e+1}) ρ adds
// rint(logf/u_e)·u_e exactly (u_e the fp32 spacing there), so R is m_c + a per-binade sum kernel 1
// tabulates, and a chunk whose chain crosses a binade is done by a warp prefix sum per binade
// (stabilizer_after_chunk). Kernel 3 steps m_τ inside its chunk from m_c like the CPU.
//
// Precision. A denominator q̂ᵀn that nearly cancels (m ≈ 15 makes the floor e^{−m} useless) turns
// any rounding of q̂ᵀn into output error: among 10^5 outputs one cancels to ~1e-5 of its terms,
// where an fp32 sum's 1e-7 becomes 1e-2 (with strong gates an fp32 normaliser path misses the
// 1e-5 bound by up to 40×; in double it stays at ~2e-7). So the normaliser path is double: Δñ, the scan of n, and
// q̂ᵀn_τ = Σ_a q̂[a] N_τ[a] with N_τ = e_τ n_c + Σ_j e^{D_τj − m_τ} k_j (per state, on the fp64
// tensor cores, then per head); weights come from double exponents. The numerators are
// fp32-accurate GEMMs on the tensor cores in 3xTF32 (x = big + small, each TF32;
// a·b ≈ a_s·b_b + a_b·b_s + a_b·b_b, ~2^-22 per product, fp32 accumulation): a numerator is not
// magnified, so ~1e-6 relative suffices.
//
// Cost, Qwen3-4B bifocal (n = 4,096, S = 8 states, Hq = 32, d = 128, L = 64: 64 chunks):
//   kernel 1: 512 blocks; ΔC̃: n·S·d² = 0.54 G multiply-adds (×3 TF32 passes); reads k, v (32 MiB),
//             writes ΔC̃ (32 MiB): ~15–20 µs, bandwidth-bound.
//   kernel 2: 152 blocks; reads ΔC̃, writes C_c (2 × 32 MiB, much of it L2-resident); the m chain
//             (~64 × 100 cycles) runs in one warp beside the scan: ~10–18 µs.
//   kernel 3: 512 blocks, two an SM (76 KiB of shared memory): the chains, L² double exponents,
//             the double normaliser path L²·d/2 (0.13 G DFMA) and q̂·N per head; reads q (64 MiB).
//   kernel 4: 512 blocks, one per SM (209 KiB of shared memory; bf16 models: mlstm_prefill_bf16.cu,
//             ~105 KiB, two an SM, C_c in bf16 from the scan), G = 4 heads each in turn:
//             q̂ᵀC_c n·Hq·d² = 2.15 G multiply-adds, scores and S'·V each the causal 5/8 of
//             n·Hq·L·d = 0.67 G: 3.5 G (×3 TF32 passes: ~42 µs at the H200's dense TF32 peak);
//             reads q (64 MiB), k, v, C_c (64 MiB), writes h (64 MiB): ~50 µs of HBM traffic.
//             ~70–100 µs.
//   ≈ 100–135 µs per layer per 4K tokens (was ~2 ms: 64 blocks walking 64 chunks in sequence).
//   Measured (H200), the outputs kernel while it also did kernel 3's work: 697 µs on 2026-12-01 (latency-bound
//   at one block of 8 warps per SM: issue slots 29% busy, tensor pipe 11%), 383 µs on 2026-12-02
//   (16 warps, the normaliser on the fp64 tensor cores, ldmatrix fragments, q and S' split into
//   TF32 parts once). bf16/fp16 models (MlstmProducts::Tf32, one pass instead of three): 261 µs,
//   and 240 µs with C_c resident (loaded and rounded once for the G heads, q in 64-column
//   stages), 220 µs at stop 19; kernel 1 54 → 42 µs, kernel 2 22 µs. That kernel's preamble (copies,
//   chains, exponents, normaliser) held a third of its stall samples with nothing to overlap it, so
//   it is kernel 3 now: 54 µs, and kernel 4 155 µs in TF32 or 92 µs in bf16 products (stop 20;
//   kernel 3's time is mostly waiting on q's loads). Stop 21: the scan leaves C_c in bf16 for the
//   bf16 kernel 4 (18 and 84 µs); Qwen3.5-like (d = 256) runs it too, in chunks of 64 (kernel 4
//   306 µs in TF32 at L = 32 → 138, the scan 93 → 36). Stop 29: kernel 1 stages w∘V in bf16 for
//   bf16 models (54 KiB, four blocks an SM: the 512 blocks in one wave, not 1.3): 42–45 → 34–35 µs.
//   Line-by-line readings:
//   docs/notes/cuda-stop15-2026-12-01.md … cuda-stop21-2026-12-02.md.
// Workspace (kept, not recomputed: recomputing C_c would cost O(chunks²·d²)): per state and chunk
// d² floats (and d² bf16 for the bf16 kernel 4) + d doubles + 152 bytes, L² + (G + 1)·L floats,
// and 16 bytes per token: 42 MiB here (58 MiB with the bf16 copy of C_c).
//
// Files: this one (kernel 4 and the host API), mlstm_prefill_state.cu (kernels 1 and 2),
// mlstm_prefill_denominators.cu (kernel 3), mlstm_prefill_device.cuh (the device code they share).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/mlstm_prefill_device.cuh"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "backend/cuda/recurrent_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

using namespace mlstm_prefill_detail;

// Kernel 4's pipeline stages: columns of d per stage of q (and of C_c, when C_c is not resident).
__host__ __device__ constexpr int stage_columns(bool resident) { return resident ? 64 : 32; }
__host__ __device__ constexpr int query_stage_stride(bool resident) {
  return stage_columns(resident) + 4;  // ≡ 4 mod 32: conflict-free A fragments
}
// Kernel 4's warps and accumulator n-tiles (8 columns) a warp: 16 warps of 3 tiles for 3xTF32
// (its fragment pairs take 126 registers), 24 of 2 for the TF32 pass (80 registers: more warps to
// hide the latency the line profile shows). Both give 48 tile slots, so the chunk length, and with
// it the workspace, does not depend on the precision.
__host__ __device__ constexpr int output_threads(bool split) { return split ? 512 : 768; }
__host__ __device__ constexpr int output_warps(bool split) { return output_threads(split) / 32; }
__host__ __device__ constexpr int output_tiles_per_warp(bool split) { return split ? 3 : 2; }

// ---- Workspace ----------------------------------------------------------------------------------

// bf16_states: the bf16 outputs kernel runs, and the scan leaves C_c in bf16 for it.
Workspace carve_workspace(const cpu::MlstmShape& shape, int n, int chunk, bool bf16_states, void* base,
                          std::size_t* bytes) {
  const std::size_t states = shape.states, d = shape.head_dim, chunks = (n + chunk - 1) / chunk;
  const std::size_t L = chunk, group = shape.query_heads / shape.states;
  const auto round16 = [](std::size_t b) { return (b + 15) / 16 * 16; };
  constexpr int kParts = 11;
  const std::size_t sizes[kParts] = {round16(states * n * sizeof(double2)),
                                     round16(states * chunks * sizeof(ChunkSummary)),
                                     round16(states * chunks * sizeof(double)),
                                     round16(states * chunks * sizeof(float)),
                                     round16(states * chunks * d * sizeof(double)),
                                     round16(states * chunks * d * d * sizeof(float)),
                                     round16(states * chunks * L * L * sizeof(float)),
                                     round16(states * chunks * L * sizeof(float)),
                                     round16(states * chunks * group * L * sizeof(float)),
                                     bf16_states ? round16(states * chunks * d * d * sizeof(__nv_bfloat16)) : 0,
                                     round16(sizeof(unsigned))};
  std::size_t offsets[kParts], total = 0;
  for (int p = 0; p < kParts; ++p) offsets[p] = total, total += sizes[p];
  if (bytes != nullptr) *bytes = total;
  const auto at = [&](int p) { return base == nullptr ? nullptr : static_cast<std::byte*>(base) + offsets[p]; };
  return {reinterpret_cast<double2*>(at(0)), reinterpret_cast<ChunkSummary*>(at(1)), reinterpret_cast<double*>(at(2)),
          reinterpret_cast<float*>(at(3)),   reinterpret_cast<double*>(at(4)),       reinterpret_cast<float*>(at(5)),
          reinterpret_cast<float*>(at(6)),   reinterpret_cast<float*>(at(7)),        reinterpret_cast<float*>(at(8)),
          bf16_states ? reinterpret_cast<__nv_bfloat16*>(at(9)) : nullptr, reinterpret_cast<unsigned*>(at(10))};
}

// ---- Kernel 4: the outputs ----------------------------------------------------------------------

struct OutputLayout {
  int key_stride, value_stride, state_stride, score_stride, weight_stride;
  int keys, values, query_stages, query_stages_small, state_stages, scores, scores_small, weights, entering,
      inverse_denominators;
  SharedCarve carve;
  // `split`: room for the small TF32 parts of q and S' (MlstmProducts::Fp32). `resident`: C_c
  // whole in shared memory, loaded once for the G heads (else two stages of its rows).
  __host__ __device__ OutputLayout(int chunk, int d, int group, bool split, bool resident) {
    const int columns = stage_columns(resident), query_stride = query_stage_stride(resident);
    const int width = round_up(d, 32);
    key_stride = width + 4;    // ≡ 4 mod 32: ldmatrix rows of Kᵀ in distinct banks
    value_stride = width + 8;  // ≡ 8 mod 32: B fragments of V and C
    state_stride = width + 8;
    score_stride = chunk + 4;  // ≡ 4 mod 32: ldmatrix rows of S'
    weight_stride = chunk + 4;
    keys = carve.take(chunk * key_stride);
    values = carve.take(chunk * value_stride);
    query_stages = carve.take(2 * chunk * query_stride);               // q stages, then their TF32 big parts
    query_stages_small = carve.take(split ? 2 * chunk * query_stride : 0);  // … and small parts (split once)
    state_stages = carve.take((resident ? round_up(d, columns) : 2 * columns) * state_stride);
    scores = carve.take(chunk * score_stride);                           // S' = (q̂·k_j) W_τj (TF32 big parts)
    scores_small = carve.take(split ? chunk * score_stride : 0);         // … and small parts
    // Kernel 3's, as it stored them:
    weights = carve.take(chunk * weight_stride);                         // W_τj = e^{D_τj − m_τ}
    entering = carve.take(chunk);                                        // e_τ = e^{b_τ + M_c − m_τ}
    inverse_denominators = carve.take(group * chunk);
  }
};

// Block (s, c): the outputs of the G query heads of state head s for the tokens of chunk c.
// 16 warps: the block's shared memory (~222 KB) allows one block per SM, and with 8 warps (two a
// scheduler) Nsight found it latency-bound — issue slots 29% busy, "wait" the top stall, the
// tensor pipe 11% busy (docs/notes/cuda-stop15-2026-12-01.md). 512 threads leave 128 registers
// a thread: each warp holds half the accumulator tiles it held with 8 (the TF32 pass: 24 warps,
// output_threads). kProducts: the numerators'
// precision (recurrent_chunkwise.cuh); Tf32 rounds k, v, each q and C_c stage and S' once where
// they are staged, and its fragments are then the stored bits.
// kResident: C_c loaded once into shared memory (rounded once, Tf32) and q in stages of 64
// columns, where the shape fits (d = 64 or 128 at L = 64); else C_c's rows stream with q, 32
// columns a stage, once per head.
template <MlstmProducts kProducts, bool kResident, typename Out>
__global__ void __launch_bounds__(output_threads(kProducts == MlstmProducts::Fp32), 1)
    chunk_outputs_kernel(PrefillArgs a) {
  constexpr bool kSplit = kProducts == MlstmProducts::Fp32;
  constexpr int kOutputThreads = output_threads(kSplit), kOutputWarps = output_warps(kSplit);
  constexpr int kMaxTilesPerWarp = output_tiles_per_warp(kSplit);
  constexpr int kStageColumns = stage_columns(kResident), kQueryStageStride = query_stage_stride(kResident);
  using Element = Operand<kProducts>;
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // C_c, n_c, M_c, m_c from the scan; q, k, v before it
  const int s = blockIdx.x, c = blockIdx.y, d = a.head_dim, L = a.chunk, group = a.group(), count = a.count(c);
  const int kv = a.kv_head(s), first_head = s * group, first_token = c * L, width = round_up(d, 32);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const OutputLayout layout(L, d, group, kSplit, kResident);
  extern __shared__ float4 shared_memory[];
  float* shared = reinterpret_cast<float*>(shared_memory);
  float* keys = shared + layout.keys;
  float* values = shared + layout.values;
  float* scores = shared + layout.scores;
  float* scores_small = shared + layout.scores_small;
  float* weights = shared + layout.weights;
  float* entering = shared + layout.entering;
  float* inverse_denominators = shared + layout.inverse_denominators;
  const std::size_t chunk_index = std::size_t(s) * a.chunks + c;
  const float* state_matrix = a.work.matrices + chunk_index * d * d;
  const auto query_row = [&](int head, int row) {
    return a.q + (std::size_t(first_token + row) * a.query_heads + first_head + head) * d;
  };

  // The copies of a row-major block of 16-byte quads are dealt out once: thread x copies quad
  // x % quads of rows x / quads, x / quads + rows_per_pass, … (no division per copy).
  const int row_quads = width / 4, rows_per_pass = kOutputThreads / row_quads;
  const bool copies_rows = threadIdx.x < rows_per_pass * row_quads;
  const int copy_row = threadIdx.x / row_quads, copy_column = 4 * (threadIdx.x % row_quads);
  // A q stage (L rows of kStageColumns): a quad a thread, rows query_copy_row, + kQueryRowsPerPass, ….
  constexpr int kQueryRowsPerPass = kOutputThreads / (kStageColumns / 4);
  const int query_copy_row = threadIdx.x / (kStageColumns / 4);
  const int query_copy_column = 4 * (threadIdx.x % (kStageColumns / 4));

  // Stage `stage` (columns kStageColumns·stage … of d) of head `head`: q rows, and C_c rows unless
  // C_c is resident; zero-filled.
  const auto load_stage = [&](int head, int stage, int buffer) {
    float* query_stage = shared + layout.query_stages + buffer * L * kQueryStageStride;
    float* state_stage = shared + layout.state_stages + buffer * kStageColumns * layout.state_stride;
    const int first_column = stage * kStageColumns;
    for (int row = query_copy_row; row < L; row += kQueryRowsPerPass) {
      const bool present = row < count && first_column + query_copy_column < d;
      copy16_async(query_stage + row * kQueryStageStride + query_copy_column,
                   present ? query_row(head, row) + first_column + query_copy_column : a.q, present);
    }
    if (!kResident && copies_rows)
      for (int row = copy_row; row < kStageColumns; row += rows_per_pass) {
        const bool present = first_column + row < d && copy_column < d;
        copy16_async(state_stage + row * layout.state_stride + copy_column,
                     present ? state_matrix + (first_column + row) * d + copy_column : state_matrix, present);
      }
  };

  // 1. k, v of the chunk (zero past it and past d) and kernel 3's weights, e and inverse
  //    denominators (zero past the chunk as it stored them); C_c when resident; the first stage.
  if (copies_rows)
    for (int j = copy_row; j < L; j += rows_per_pass) {
      const bool present = j < count && copy_column < d;
      const std::size_t at = present ? (std::size_t(first_token + j) * a.kv_heads + kv) * d + copy_column : 0;
      copy16_async(keys + j * layout.key_stride + copy_column, a.k + at, present);
      copy16_async(values + j * layout.value_stride + copy_column, a.v + at, present);
    }
  copy_chunk_scales_async(a, chunk_index, L, group, weights, layout.weight_stride, entering, inverse_denominators);
  commit_async_copies();
  if constexpr (kResident) {  // C_c whole (rows past d zero), its own group
    if (copies_rows)
      for (int row = copy_row; row < round_up(d, kStageColumns); row += rows_per_pass) {
        const bool present = row < d && copy_column < d;
        copy16_async(shared + layout.state_stages + row * layout.state_stride + copy_column,
                     present ? state_matrix + row * d + copy_column : state_matrix, present);
      }
    commit_async_copies();
  }
  load_stage(0, 0, 0);
  commit_async_copies();

  // Tf32: k and v rounded once, each thread the quads it copied, and a resident C_c once it has
  // landed. Stage 0's barrier publishes them, and kernel 3's arrays.
  if constexpr (!kSplit) {
    wait_async_copies<kResident ? 2 : 1>();  // k, v (C_c and stage 0 may still be in flight)
    if (copies_rows)
      for (int j = copy_row; j < L; j += rows_per_pass) {
        prepare_operands_in_place<kProducts>(keys + j * layout.key_stride + copy_column, nullptr);
        prepare_operands_in_place<kProducts>(values + j * layout.value_stride + copy_column, nullptr);
      }
    if constexpr (kResident) {
      wait_async_copies<1>();  // C_c (stage 0 may still be in flight)
      if (copies_rows)
        for (int row = copy_row; row < round_up(d, kStageColumns); row += rows_per_pass)
          prepare_operands_in_place<kProducts>(shared + layout.state_stages + row * layout.state_stride + copy_column,
                                               nullptr);
    }
  }

  // 4. Per head: [h | S] = q·[C_c | Kᵀ] (stages of kStageColumns of d), h ← h·e_τ/√d, S' = S·W/√d,
  //    h += S'·V, out = h / denominator. Warps: L/32 rows of two m-tiles (tiles τ and L/16−1−τ: the
  //    causal work balances) × the n-tiles of 8 columns dealt round-robin. A fragments (q, S') and
  //    the Kᵀ fragments by ldmatrix; the C and V fragments (k-major in shared memory) by scalar
  //    loads from per-lane offsets computed once.
  const int warp_rows = L / 32, warp_columns = kOutputWarps / warp_rows;
  const int warp_row = warp % warp_rows, warp_column = warp / warp_rows;
  const int row_tile[2] = {warp_row, 2 * warp_rows - 1 - warp_row};
  const int value_tiles = d / 8, all_tiles = value_tiles + L / 8, stages = (d + kStageColumns - 1) / kStageColumns;
  const float query_scale = 1.0f / sqrtf(float(d));
  const auto above_diagonal = [&](int tile, int m) { return 8 * (tile - value_tiles) > 16 * row_tile[m] + 15; };
  const std::uint32_t query_stages_address = shared_address(shared + layout.query_stages);
  const std::uint32_t query_stages_small_address = shared_address(shared + layout.query_stages_small);
  const std::uint32_t scores_address = shared_address(scores), scores_small_address = shared_address(scores_small);
  const std::uint32_t keys_address = shared_address(keys);
  int query_a_offset[2], score_a_offset[2];  // floats from the stage / S' to this lane's ldmatrix row
  #pragma unroll
  for (int m = 0; m < 2; ++m) {
    query_a_offset[m] = 16 * row_tile[m] * kQueryStageStride + a_fragment_lane_offset(kQueryStageStride, lane);
    score_a_offset[m] = 16 * row_tile[m] * layout.score_stride + a_fragment_lane_offset(layout.score_stride, lane);
  }
  const int key_b_offset = transposed_b_fragment_lane_offset(layout.key_stride, lane);
  const int state_b_offset = t * layout.state_stride + g, value_b_offset = t * layout.value_stride + g;
  int stage_counter = 0;  // stages run so far: stage k sits in buffer k % 2
  for (int head = 0; head < group; ++head) {
    float acc[2][kMaxTilesPerWarp][4] = {};
    for (int stage = 0; stage < stages; ++stage, ++stage_counter) {
      if (stage + 1 < stages) load_stage(head, stage + 1, (stage_counter + 1) % 2);
      else if (head + 1 < group) load_stage(head + 1, 0, (stage_counter + 1) % 2);
      commit_async_copies();
      wait_async_copies<1>();
      const int buffer = stage_counter % 2;
      for (int row = query_copy_row; row < L; row += kQueryRowsPerPass) {  // this thread's quads of the
        const int at = (buffer * L + row) * kQueryStageStride + query_copy_column;  // q stage, made operands
        prepare_operands_in_place<kProducts>(shared + layout.query_stages + at,    // once for every warp
                                             shared + layout.query_stages_small + at);
      }
      if constexpr (!kSplit && !kResident)  // … and its rows of the C_c stage (rounded; split per use in Fp32)
        if (copies_rows) {
          float* state_stage = shared + layout.state_stages + buffer * kStageColumns * layout.state_stride;
          for (int row = copy_row; row < kStageColumns; row += rows_per_pass)
            prepare_operands_in_place<kProducts>(state_stage + row * layout.state_stride + copy_column, nullptr);
        }
      __syncthreads();
      const std::uint32_t query_stage = query_stages_address + 4 * buffer * L * kQueryStageStride;
      const std::uint32_t query_stage_small = query_stages_small_address + 4 * buffer * L * kQueryStageStride;
      const float* state_stage =
          shared + layout.state_stages + (kResident ? stage : buffer) * kStageColumns * layout.state_stride;
      #pragma unroll
      for (int k = 0; k < kStageColumns; k += 8) {
        Element af[2][4];
        #pragma unroll
        for (int m = 0; m < 2; ++m)
          load_split_a_fragment(af[m], query_stage + 4 * (query_a_offset[m] + k),
                                query_stage_small + 4 * (query_a_offset[m] + k));
        #pragma unroll
        for (int i = 0; i < kMaxTilesPerWarp; ++i) {
          const int tile = warp_column + i * warp_columns;
          if (tile >= all_tiles) continue;
          Element b0, b1;
          if (tile < value_tiles) {
            const float* b = state_stage + state_b_offset + k * layout.state_stride + 8 * tile;
            b0 = staged_operand<kProducts>(b[0]), b1 = staged_operand<kProducts>(b[4 * layout.state_stride]);
          } else {  // Kᵀ: B[a][j] = k_j[a]
            load_transposed_b_fragment(b0, b1, keys_address + 4 * (8 * (tile - value_tiles) * layout.key_stride +
                                                                  key_b_offset + stage * kStageColumns + k));
          }
          #pragma unroll
          for (int m = 0; m < 2; ++m)
            if (tile < value_tiles || !above_diagonal(tile, m)) mma(acc[m][i], af[m], b0, b1);
        }
      }
      __syncthreads();  // the buffer is refilled two stages on
    }
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int i = 0; i < kMaxTilesPerWarp; ++i) {
        const int tile = warp_column + i * warp_columns;
        if (tile >= all_tiles) continue;
        const int row = 16 * row_tile[m] + g;
        if (tile < value_tiles) {
          const float top = entering[row] * query_scale, bottom = entering[row + 8] * query_scale;
          acc[m][i][0] *= top, acc[m][i][1] *= top, acc[m][i][2] *= bottom, acc[m][i][3] *= bottom;
        } else {
          const int j = 8 * (tile - value_tiles) + 2 * t;
          const int top = row * layout.score_stride + j, bottom = top + 8 * layout.score_stride;
          const float* w_top = weights + row * layout.weight_stride + j;
          const float* w_bottom = w_top + 8 * layout.weight_stride;
          store_operand<kProducts>(scores + top, scores_small + top, acc[m][i][0] * query_scale * w_top[0]);
          store_operand<kProducts>(scores + top + 1, scores_small + top + 1, acc[m][i][1] * query_scale * w_top[1]);
          store_operand<kProducts>(scores + bottom, scores_small + bottom, acc[m][i][2] * query_scale * w_bottom[0]);
          store_operand<kProducts>(scores + bottom + 1, scores_small + bottom + 1, acc[m][i][3] * query_scale * w_bottom[1]);
        }
      }
    __syncthreads();
    for (int k = 0; k < L; k += 8) {
      const bool needed[2] = {k <= 16 * row_tile[0] + 15, k <= 16 * row_tile[1] + 15};
      Element af[2][4];
      #pragma unroll
      for (int m = 0; m < 2; ++m)
        if (needed[m])
          load_split_a_fragment(af[m], scores_address + 4 * (score_a_offset[m] + k),
                                scores_small_address + 4 * (score_a_offset[m] + k));
      #pragma unroll
      for (int i = 0; i < kMaxTilesPerWarp; ++i) {
        const int tile = warp_column + i * warp_columns;
        if (tile >= value_tiles) continue;
        const float* b = values + value_b_offset + k * layout.value_stride + 8 * tile;
        const Element b0 = staged_operand<kProducts>(b[0]), b1 = staged_operand<kProducts>(b[4 * layout.value_stride]);
        #pragma unroll
        for (int m = 0; m < 2; ++m)
          if (needed[m]) mma(acc[m][i], af[m], b0, b1);
      }
    }
    #pragma unroll
    for (int m = 0; m < 2; ++m)
      #pragma unroll
      for (int i = 0; i < kMaxTilesPerWarp; ++i) {
        const int tile = warp_column + i * warp_columns;
        if (tile >= value_tiles) continue;
        const int row = 16 * row_tile[m] + g, column = 8 * tile + 2 * t;
        const float* inverse = inverse_denominators + head * L;
        if (row < count)
          store_output_pair<Out>(a, first_token + row, first_head + head, column, acc[m][i][0] * inverse[row],
                                 acc[m][i][1] * inverse[row]);
        if (row + 8 < count)
          store_output_pair<Out>(a, first_token + row + 8, first_head + head, column, acc[m][i][2] * inverse[row + 8],
                                 acc[m][i][3] * inverse[row + 8]);
      }
    __syncthreads();  // S' is rewritten by the next head
  }
}

// ---- Host -------------------------------------------------------------------------------------

// Whether kernel 4 runs in bf16 products: asked for, and the shape holds it.
bool bf16_outputs(const cpu::MlstmShape& shape, int chunk, MlstmProducts products) {
  return products == MlstmProducts::Bf16 &&
         chunk_outputs_bf16_fits(chunk, shape.head_dim, shape.query_heads / shape.states);
}

// The longer chunk (64, else 32 tokens) whose kernels fit in shared memory and in the warp tiling:
// the outputs kernel `products` runs (bf16's where it holds the shape, else the TF32 ones, whose
// layouts the 3xTF32 one bounds).
int chunk_length(const cpu::MlstmShape& shape, MlstmProducts products) {
  const int d = shape.head_dim, group = shape.query_heads / shape.states;
  for (int chunk : {64, 32}) {
    const int warp_columns = output_warps(true) / (chunk / 32), tiles = (d + chunk) / 8;
    const bool outputs_fit = bf16_outputs(shape, chunk, products) ||
                             (OutputLayout(chunk, d, group, true, false).carve.bytes() <= kSharedMemoryLimit &&
                              (tiles + warp_columns - 1) / warp_columns <= output_tiles_per_warp(true));
    if (outputs_fit && ContributionLayout(chunk, d, /*bf16_values=*/false).carve.bytes() <= kSharedMemoryLimit &&
        DenominatorLayout(chunk, d, group).carve.bytes() <= kSharedMemoryLimit)
      return chunk;
  }
  fail("mlstm_prefill", "head dimension " + std::to_string(d) + " with " + std::to_string(group) +
                            " query heads per state does not fit in shared memory");
}

void check_head_dim(int head_dim) {
  if (head_dim <= 0 || head_dim % 8 != 0 || head_dim > 256)
    fail("mlstm_prefill", "head dimension " + std::to_string(head_dim) + " is not a multiple of 8 in 8 … 256");
}

// The arguments that fix a call's plan: its tokens, chunks, heads and d (the pointers come after).
PrefillArgs call_shape(const cpu::MlstmShape& shape, int n, MlstmProducts products) {
  PrefillArgs args{};
  args.n = n;
  args.chunk = chunk_length(shape, products);
  args.chunks = (n + args.chunk - 1) / args.chunk;
  args.query_heads = shape.query_heads, args.kv_heads = shape.kv_heads, args.states = shape.states;
  args.head_dim = shape.head_dim;
  args.products = products;
  return args;
}

}  // namespace

std::size_t mlstm_prefill_workspace_bytes(const cpu::MlstmShape& shape, int n, MlstmProducts products) {
  cpu::mlstm_check_shape(shape);
  check_head_dim(shape.head_dim);
  std::size_t bytes = 0;
  const int chunk = chunk_length(shape, products);
  if (n > 0) carve_workspace(shape, n, chunk, bf16_outputs(shape, chunk, products), nullptr, &bytes);
  return bytes;
}

int mlstm_prefill_denominator_parts(const cpu::MlstmShape& shape, int n, MlstmProducts products) {
  cpu::mlstm_check_shape(shape);
  check_head_dim(shape.head_dim);
  return n > 0 ? chunk_denominator_parts(call_shape(shape, n, products)) : 1;
}

template <typename Out>
void mlstm_prefill(const cpu::MlstmShape& shape, const float* q, const float* k, const float* v, MlstmGateInputs gates,
                   int n, cpu::MlstmState state, Out* out, MlstmProducts products, void* workspace,
                   cudaStream_t stream, MlstmOutputMix mix, const MlstmWindowBranch& window_branch,
                   const std::function<void(bool)>& window_gather, MlstmRoundedKeyValues rounded) {
  cpu::mlstm_check_shape(shape);
  check_head_dim(shape.head_dim);
  if (n <= 0) return;
  if (workspace == nullptr) fail("mlstm_prefill", "no workspace (mlstm_prefill_workspace_bytes)");
  if (gates.stride < shape.states)
    fail("mlstm_prefill", "gate stride " + std::to_string(gates.stride) + " is less than the " +
                              std::to_string(shape.states) + " state heads");
  if (window_branch && mix.gate == nullptr) fail("mlstm_prefill", "a window branch without a mix gate");
  if ((rounded.keys == nullptr) != (rounded.values == nullptr))
    fail("mlstm_prefill", "rounded keys without rounded values, or the reverse");
  if (mix.gate != nullptr && mix.gate_stride < shape.query_heads)
    fail("mlstm_prefill", "mix gate stride " + std::to_string(mix.gate_stride) + " is less than the " +
                              std::to_string(shape.query_heads) + " query heads");
  PrefillArgs args = call_shape(shape, n, products);
  args.q = q, args.k = k, args.v = v, args.gates = gates;
  args.state = state;
  args.out = out;
  args.mix = mix;
  args.denominators_launch_next_after_wait = bool(window_branch);
  const bool bf16 = bf16_outputs(shape, args.chunk, products);
  args.work = carve_workspace(shape, n, args.chunk, bf16, workspace, nullptr);
  const int d = shape.head_dim, group = shape.query_heads / shape.states;
  // The bf16 outputs kernel computes beside the window attention (PrefillArgs::outputs_beside_window).
  args.outputs_beside_window = bf16 && bool(window_branch);
  if (bf16) args.rounded = rounded;  // only the bf16 outputs kernel reads them
  args.denominator_blocks = unsigned(shape.states * args.chunks * chunk_denominator_parts(args));

  // The window's gather before kernel 1, or beside it (recurrent_chunkwise.cuh: window_gather).
  const bool gather_beside = window_gather && args.state_chunks_within_one_an_sm();
  args.contributions_launch_next_after_wait = gather_beside;
  if (window_gather && !gather_beside) window_gather(false);
  launch_chunk_contributions(args, stream);
  if (gather_beside) window_gather(true);
  launch_state_scan(args, stream);
  launch_chunk_denominators(args, stream);
  // The outputs offered to the window attention's epilogue, which takes them where it can
  // (recurrent_chunkwise.cuh; attention_prefill_takes_mlstm_outputs decides the types and d).
  PrefillMlstmOutputs offer;
  if (args.outputs_beside_window && shape.states == shape.kv_heads && args.chunk == kMlstmChunk &&
      args.state_chunks_within_one_an_sm())
    offer = {.states = args.work.bf16_matrices, .weights = args.work.chunk_weights, .entering = args.work.entering,
             .inverse_denominators = args.work.inverse_denominators,
             .denominators_done = args.work.denominators_done, .denominator_blocks = args.denominator_blocks,
             .chunks = args.chunks};
  if (window_branch && window_branch(offer)) {
    if (offer.states == nullptr) fail("mlstm_prefill", "internal: the window branch took outputs it was not offered");
    return;
  }
  if (bf16) {
    launch_chunk_outputs_bf16<Out>(args, stream);
    return;
  }
  // Tf32 with C_c resident where it fits (Fp32's small parts leave no room for it) and d is a
  // whole number of 64-column stages: the Kᵀ fragments of a stage read columns of k up to its
  // end, and k's rows in shared memory are round_up(d, 32) wide (a stage past them would read
  // the row padding, which nothing writes: NaN × 0 for d ≤ 32 on the golden models).
  const bool split = products == MlstmProducts::Fp32;
  const bool resident = !split && d % stage_columns(true) == 0 &&
                        OutputLayout(args.chunk, d, group, false, true).carve.bytes() <= kSharedMemoryLimit;
  const auto kernel = split      ? chunk_outputs_kernel<MlstmProducts::Fp32, false, Out>
                      : resident ? chunk_outputs_kernel<MlstmProducts::Tf32, true, Out>
                                 : chunk_outputs_kernel<MlstmProducts::Tf32, false, Out>;
  launch_dependent(kernel, dim3(shape.states, args.chunks), dim3(output_threads(split)),
                   OutputLayout(args.chunk, d, group, split, resident).carve.bytes(), stream, "chunk_outputs_kernel",
                   args);
}

template void mlstm_prefill<float>(const cpu::MlstmShape&, const float*, const float*, const float*, MlstmGateInputs,
                                   int, cpu::MlstmState, float*, MlstmProducts, void*, cudaStream_t, MlstmOutputMix,
                                   const MlstmWindowBranch&, const std::function<void(bool)>&, MlstmRoundedKeyValues);
template void mlstm_prefill<__nv_bfloat16>(const cpu::MlstmShape&, const float*, const float*, const float*,
                                           MlstmGateInputs, int, cpu::MlstmState, __nv_bfloat16*, MlstmProducts,
                                           void*, cudaStream_t, MlstmOutputMix, const MlstmWindowBranch&,
                                           const std::function<void(bool)>&, MlstmRoundedKeyValues);
template void mlstm_prefill<__half>(const cpu::MlstmShape&, const float*, const float*, const float*, MlstmGateInputs,
                                    int, cpu::MlstmState, __half*, MlstmProducts, void*, cudaStream_t,
                                    MlstmOutputMix, const MlstmWindowBranch&,
                                    const std::function<void(bool)>&, MlstmRoundedKeyValues);

}  // namespace bifocal::cuda
