// Device code shared by the chunk-parallel mLSTM prefill's kernels: the constants, the workspace
// and the argument block every kernel reads, the PTX wrappers (cp.async, 3xTF32 mma, ldmatrix, fp64 mma), the fp32
// stabilizer step, kernels 1's and 3's shared-memory layouts (which the host sizes too), and the
// host launchers of kernels 1, 2 and 3 (mlstm_prefill_state.cu, mlstm_prefill_denominators.cu)
// that mlstm_prefill (mlstm_prefill.cu, whose header holds the math, the precision and the cost)
// calls.
// DEVICE CODE: include from .cu files only; the contract is in recurrent_chunkwise.cuh.
#pragma once

#ifndef __CUDACC__
#error "mlstm_prefill_device.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/device_properties.h"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "backend/cuda/recurrent_device.cuh"

namespace bifocal::cuda::mlstm_prefill_detail {

using device::kRecurrentThreads;
using device::shared_address;
using device::SharedCarve;

inline constexpr int kWarps = kRecurrentThreads / 32;
inline constexpr unsigned kFullWarp = 0xffffffffu;
inline constexpr int kFirstBinade = -12;  // binades 2^-12 … 2^4 have tabulated decays
inline constexpr int kBinades = 16;

__host__ __device__ constexpr int round_up(int x, int multiple) { return (x + multiple - 1) / multiple * multiple; }

// ---- Workspace ----------------------------------------------------------------------------------

// What kernel 1 leaves for the scan about one chunk of one state head.
struct ChunkSummary {
  double decay;              // b_L = Σ logf over the chunk
  double scale;              // λ_c = max_j D_Lj: ΔC̃_c and Δñ_c are Σ e^{D_Lj − λ_c}(…)
  double shifts[kBinades];   // Σ_t rint(logf_t / u_e)·u_e, e = kFirstBinade + i: the fp32 chain ρ in binade e
  float from_below;          // B_c: m stepped through the chunk from −∞
};

struct Workspace {
  double2* token_gates;      // [S, n]: (ĩ, logf), double
  ChunkSummary* summaries;   // [S, chunks]
  double* entry_scales;      // [S, chunks]: M_c, the scale of C_c and n_c
  float* entry_stabilizers;  // [S, chunks]: m_c, the recurrence's stabilizer entering chunk c
  double* normalizers;       // [S, chunks, d]: Δñ_c, replaced by n_c (scan)
  float* matrices;           // [S, chunks, d, d]: ΔC̃_c, replaced by C_c (scan) unless bf16_matrices
  // Kernel 3's, for kernel 4, as the floats the products use (0 past the chunk):
  float* chunk_weights;         // [S, chunks, L, L]: W_τj = e^{D_τj − m_τ}, 0 above the diagonal
  float* entering;              // [S, chunks, L]: e_τ = e^{b_τ + M_c − m_τ}
  float* inverse_denominators;  // [S, chunks, G, L]: 1 / (max(|q̂_τᵀn_τ|, e^{−m_τ}) + 1e-6), Bifocal: × o
  // Where the bf16 outputs kernel runs, the scan writes C_c here, rounded to bf16 (what that
  // kernel's products take: half the bytes, copied to shared memory as they are), and leaves ΔC̃_c
  // in `matrices`. Null otherwise.
  __nv_bfloat16* bf16_matrices;  // [S, chunks, d, d]
  // Kernel 3's finished blocks, counted for the bf16 outputs kernel when it runs beside the window
  // attention (PrefillArgs::outputs_beside_window); kernel 1 zeroes it.
  unsigned* denominators_done;
};

// The shared memory one block may opt into on sm_90; every kernel's layout is checked against it.
inline constexpr std::size_t kSharedMemoryLimit = 227 * 1024;

// Everything the four kernels read: the call's inputs, the caller's state, the workspace.
struct PrefillArgs {
  int n, chunk, chunks;
  int query_heads, kv_heads, states, head_dim;
  const float *q, *k, *v;
  MlstmGateInputs gates;
  cpu::MlstmState state;
  void* out;               // [n, Hq, d] in kernel 4's Out
  MlstmOutputMix mix;      // Bifocal: o·h added onto the window branch's (1 − o)·window in `out`
  MlstmRoundedKeyValues rounded;  // Bifocal, bf16: k and v as the window's gather rounded them (or null)
  MlstmProducts products;  // the launchers pick kernels 1's and 3's instantiation by it
  Workspace work;
  // Kernel 1 lets the next kernel launch only after its wait: mlstm_prefill's window_gather comes
  // next (beside it, GatherWindowArgs::wait_at_end) and copies its inputs without waiting.
  bool contributions_launch_next_after_wait = false;
  // Kernel 3 likewise: mlstm_prefill's window_branch comes next and reads its inputs without waiting.
  bool denominators_launch_next_after_wait = false;
  // Bifocal's window attention sits between kernel 3 and the bf16 outputs kernel, which then
  // computes its outputs beside the attention and waits for it only before it adds them onto the
  // attention's rows: it waits for kernel 3 through Workspace::denominators_done (each kernel-3
  // block adds 1 when done, release; kernel 4 acquires the count of denominator_blocks) instead of
  // the grid dependency, which waits for the attention too.
  bool outputs_beside_window = false;
  unsigned denominator_blocks = 0;  // states · chunks · chunk_denominator_parts
  // The bf16 outputs kernel's blocks a state head's G query heads are shared among (1, 2, … | G).
  int output_head_parts = 1;
  // Kernel 1's blocks a (state, chunk) is shared among (1, 2, 4 | d / 8): each computes the
  // columns [part·d/parts, (part + 1)·d/parts) of ΔC̃_c and the same share of Δñ_c's elements, so
  // that a call with too few chunks still fills the GPU (1K tokens of the Qwen3.5-like shape: 64
  // blocks of d = 256 took 39 µs).
  int contribution_parts = 1;
  // Host: whether the (state, chunk) blocks of kernels 1 and 3 are at most one an SM (1K tokens of
  // Qwen3-4B, up to 2K of the Qwen3.5-like shape): the short calls where those kernels
  // are latency-bound, and a kernel beside them finds free SMs.
  bool state_chunks_within_one_an_sm() const { return std::int64_t(states) * chunks <= multiprocessor_count(); }
  __device__ int group() const { return query_heads / states; }
  __device__ int kv_head(int s) const { return s / (states / kv_heads); }
  __device__ int count(int c) const { return min(chunk, n - c * chunk); }
};

// Kernel 4's two adjacent outputs of token `token`, query head `head`, from `column`: stored in Out
// — or for Bifocal (a.mix.gate set; kernel 3 has folded o = sigmoid(mix gate) into the inverse
// denominators, so these are o·h) added in L2 onto the window branch's (1 − o)·window that `out`
// holds (DESIGN.md bifocal), with no load for the thread to wait on.
template <typename Out>
__device__ __forceinline__ void store_output_pair(const PrefillArgs& a, int token, int head, int column, float h0,
                                                  float h1) {
  Out* out = static_cast<Out*>(a.out) + (std::size_t(token) * a.query_heads + head) * a.head_dim + column;
  if (a.mix.gate == nullptr) device::store2(out, h0, h1);
  else device::add2(out, h0, h1);
}

// PrefillArgs::outputs_beside_window's count: kernel 3's blocks each add 1 once their outputs are
// written (release: the fence orders the block's stores, which the barrier gathered, before the
// add), and kernel 4's first thread polls it with acquire loads until every block has; the fence
// and barrier after pass that on to the whole block.
__device__ __forceinline__ void count_denominators_block_done(const PrefillArgs& a) {
  if (!a.outputs_beside_window) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(a.work.denominators_done, 1u);
  }
}
__device__ __forceinline__ void wait_for_denominators(const PrefillArgs& a) {
  device::wait_for_count(a.work.denominators_done, a.denominator_blocks);
}

// ---- PTX: asynchronous copies and 3xTF32 mma --------------------------------------------------

// The copies and L2 hints: async_copy.cuh. A `present` false copy writes 16 zero bytes and reads
// nothing.
__device__ __forceinline__ void copy16_async(void* shared, const void* global, bool present) {
  device::copy16_async_zero_fill(shared, global, present ? 16 : 0);
}
using device::commit_async_copies;
using device::prefetch_line_to_l2;
using device::wait_async_copies;

// x = big + small, both TF32 (x − big is exact in fp32: at most 13 significant bits).
struct Tf32Pair {
  std::uint32_t big, small;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  std::uint32_t big, small;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(x - __uint_as_float(big)));
  return {big, small};
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// c (16 × 8) += A (16 × 8) · B (8 × 8) to ~fp32 accuracy, the small products first. Fragments of
// mma.m16n8k8 (tf32), g = lane / 4, t = lane % 4: a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4];
// b = B[t][g], B[t+4][g]; c = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const Tf32Pair (&a)[4], Tf32Pair b0, Tf32Pair b1) {
  mma_tf32(c, a[0].small, a[1].small, a[2].small, a[3].small, b0.big, b1.big);
  mma_tf32(c, a[0].big, a[1].big, a[2].big, a[3].big, b0.small, b1.small);
  mma_tf32(c, a[0].big, a[1].big, a[2].big, a[3].big, b0.big, b1.big);
}

// MlstmProducts::Tf32: one pass on operands rounded to nearest TF32 once (round_tf32), so that the
// fragments are the stored bits as they are. The same call shapes as the 3xTF32 path: a fragment
// element is a Tf32Pair (Fp32) or a TF32 bit pattern (Tf32), and `operand`, `mma` and the loads
// below take either, so a kernel templated on MlstmProducts reads the same for both.
template <MlstmProducts kProducts>
using Operand = std::conditional_t<kProducts == MlstmProducts::Fp32, Tf32Pair, std::uint32_t>;

__device__ __forceinline__ std::uint32_t round_tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
// x as a fragment element: split (Fp32), or rounded (Tf32, for values not rounded when staged).
template <MlstmProducts kProducts>
__device__ __forceinline__ Operand<kProducts> operand(float x) {
  if constexpr (kProducts == MlstmProducts::Fp32) return split_tf32(x);
  else return round_tf32(x);
}
// x as stored for fragments read later: Fp32 splits it into its TF32 parts (big at `big`, small at
// `small`), Tf32 rounds it in place at `big`.
template <MlstmProducts kProducts>
__device__ __forceinline__ void store_operand(float* big, float* small, float x) {
  if constexpr (kProducts == MlstmProducts::Fp32) {
    const Tf32Pair parts = split_tf32(x);
    *big = __uint_as_float(parts.big), *small = __uint_as_float(parts.small);
  } else {
    *big = __uint_as_float(round_tf32(x));
  }
}
// Four staged floats at `big` (16-byte aligned) made operands in place (store_operand's layout).
template <MlstmProducts kProducts>
__device__ __forceinline__ void prepare_operands_in_place(float* big, float* small) {
  const float4 x = *reinterpret_cast<const float4*>(big);
  if constexpr (kProducts == MlstmProducts::Fp32) {
    const Tf32Pair p0 = split_tf32(x.x), p1 = split_tf32(x.y), p2 = split_tf32(x.z), p3 = split_tf32(x.w);
    *reinterpret_cast<float4*>(big) = make_float4(__uint_as_float(p0.big), __uint_as_float(p1.big),
                                                  __uint_as_float(p2.big), __uint_as_float(p3.big));
    *reinterpret_cast<float4*>(small) = make_float4(__uint_as_float(p0.small), __uint_as_float(p1.small),
                                                    __uint_as_float(p2.small), __uint_as_float(p3.small));
  } else {
    *reinterpret_cast<float4*>(big) = make_float4(__uint_as_float(round_tf32(x.x)), __uint_as_float(round_tf32(x.y)),
                                                  __uint_as_float(round_tf32(x.z)), __uint_as_float(round_tf32(x.w)));
  }
}
// A staged operand (prepared in place) as a fragment element.
template <MlstmProducts kProducts>
__device__ __forceinline__ Operand<kProducts> staged_operand(float x) {
  if constexpr (kProducts == MlstmProducts::Fp32) return split_tf32(x);
  else return __float_as_uint(x);
}
__device__ __forceinline__ void mma(float (&c)[4], const Tf32Pair (&a)[4], Tf32Pair b0, Tf32Pair b1) {
  mma_3xtf32(c, a, b0, b1);
}
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  mma_tf32(c, a[0], a[1], a[2], a[3], b0, b1);
}

// Views of shared matrices for the fragment loads: element (r, c) of a row-major matrix, or of
// the transpose of one.
struct RowMajor {
  const float* p;
  int stride;
  __device__ float operator()(int r, int c) const { return p[r * stride + c]; }
};
struct Transposed {
  const float* p;
  int stride;
  __device__ float operator()(int r, int c) const { return p[c * stride + r]; }
};

template <MlstmProducts kProducts, typename View>
__device__ __forceinline__ void load_a(Operand<kProducts> (&a)[4], View m, int row, int k, int lane) {
  const int g = lane / 4, t = lane % 4;
  a[0] = operand<kProducts>(m(row + g, k + t));
  a[1] = operand<kProducts>(m(row + g + 8, k + t));
  a[2] = operand<kProducts>(m(row + g, k + t + 4));
  a[3] = operand<kProducts>(m(row + g + 8, k + t + 4));
}
template <MlstmProducts kProducts, typename View>
__device__ __forceinline__ void load_b(Operand<kProducts>& b0, Operand<kProducts>& b1, View m, int k, int column,
                                       int lane) {
  const int g = lane / 4, t = lane % 4;
  b0 = operand<kProducts>(m(k + t, column + g));
  b1 = operand<kProducts>(m(k + t + 4, column + g));
}

// ldmatrix fragments for kernel 4. ldmatrix moves 8 × 8 matrices of 16-bit elements, but a row
// is 16 bytes either way, so it moves 8 × 4 fp32 matrices just as well: lane ℓ receives the
// 32-bit element (ℓ/4, ℓ%4), which is where mma.m16n8k8's tf32 fragments want it. Lanes 8i … 8i+7
// give the row addresses of matrix i (16-byte aligned: the strides and column offsets are
// multiples of 4 floats).
// A (16 × 8, row-major, `stride` floats): matrix i = rows 8(i%2) …, columns 4(i/2) …, so that
// the four registers are load_a's a[0 … 3]. The offset (floats) of this lane's row address.
__device__ __forceinline__ int a_fragment_lane_offset(int stride, int lane) {
  return ((lane >> 3 & 1) * 8 + (lane & 7)) * stride + (lane >> 4) * 4;
}
// The same A fragment from matrices split into TF32 parts beforehand (split_tf32_in_place,
// store_split_tf32): one ldmatrix for the big parts, one for the small.
__device__ __forceinline__ void load_split_a_fragment(Tf32Pair (&a)[4], std::uint32_t big_address,
                                                      std::uint32_t small_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0].big), "=r"(a[1].big), "=r"(a[2].big), "=r"(a[3].big) : "r"(big_address) : "memory");
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0].small), "=r"(a[1].small), "=r"(a[2].small), "=r"(a[3].small)
               : "r"(small_address)
               : "memory");
}
// The same A fragment of a matrix prepared in place (Tf32: one ldmatrix, the bits as they are).
__device__ __forceinline__ void load_split_a_fragment(std::uint32_t (&a)[4], std::uint32_t address, std::uint32_t) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(address) : "memory");
}
// B = Mᵀ (8 × 8) for M row-major (`stride` floats), B[k][n] = M[n][k]: matrix 0 = rows n …
// n+7 of M, columns k … k+3; matrix 1 = columns k+4 …: load_b's b0, b1 of Transposed{M}.
__device__ __forceinline__ int transposed_b_fragment_lane_offset(int stride, int lane) {
  return (lane & 7) * stride + (lane >> 3 & 1) * 4;
}
template <typename Element>
__device__ __forceinline__ void load_transposed_b_fragment(Element& b0, Element& b1, std::uint32_t address) {
  std::uint32_t r[2];
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address)
               : "memory");
  if constexpr (std::is_same_v<Element, Tf32Pair>) b0 = split_tf32(__uint_as_float(r[0])), b1 = split_tf32(__uint_as_float(r[1]));
  else b0 = r[0], b1 = r[1];  // prepared in place (Tf32)
}

// d (8 × 8) += a (8 × 4) · b (4 × 8) on the fp64 tensor cores, IEEE fp64 products and sums.
// Fragments, g = lane / 4, t = lane % 4: a = A[g][t], b = B[t][g], d = D[g][2t], D[g][2t+1].
__device__ __forceinline__ void mma_fp64(double (&d)[2], double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
      : "+d"(d[0]), "+d"(d[1])
      : "d"(a), "d"(b));
}

// Four floats as four bf16 at an 8-byte aligned address (kernel 1's w∘V, kernel 4's q, k, v).
__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* at, float4 x) {
  *reinterpret_cast<uint2*>(at) =
      make_uint2(device::pack_pair<__nv_bfloat16>(x.x, x.y), device::pack_pair<__nv_bfloat16>(x.z, x.w));
}

// ---- The stabilizer chain -----------------------------------------------------------------------

__device__ __forceinline__ float step_stabilizer(float m, double2 gates) {
  return device::mlstm_next_stabilizer(m, {gates.x, gates.y});  // the CPU's fp32(max(logf + m, ĩ))
}

// ---- Kernel 4's first copies (both precisions) --------------------------------------------------

// Kernel 3's W_τj (L × L floats, into rows of `weight_stride`), e_τ (L) and the G heads'
// inverse denominators (G·L) for chunk `chunk_index`, into shared memory by cp.async (not
// committed); zero past the chunk as kernel 3 stored them. L = a.chunk, group = a.group(), given
// so that a kernel with L fixed at compile time keeps it.
__device__ __forceinline__ void copy_chunk_scales_async(const PrefillArgs& a, std::size_t chunk_index, int L,
                                                        int group, float* weights, int weight_stride, float* entering,
                                                        float* inverse_denominators) {
  const int weight_quads = L * L / 4, scale_quads = L / 4 + group * L / 4;  // e, then the G heads'
  const float* chunk_weights = a.work.chunk_weights + chunk_index * L * L;
  for (int item = threadIdx.x; item < weight_quads + scale_quads; item += blockDim.x) {
    if (item < weight_quads) {
      const int row = item / (L / 4), column = 4 * (item % (L / 4));
      copy16_async(weights + row * weight_stride + column, chunk_weights + row * L + column, true);
    } else if (const int quad = item - weight_quads; quad < L / 4) {
      copy16_async(entering + 4 * quad, a.work.entering + chunk_index * L + 4 * quad, true);
    } else {
      const int at = 4 * (quad - L / 4);
      copy16_async(inverse_denominators + at, a.work.inverse_denominators + chunk_index * group * L + at, true);
    }
  }
}

// ---- Kernel 1's shared memory (the host sizes it too) -------------------------------------------

// bf16_values (MlstmProducts::Bf16): w∘V is staged as bf16, `stride` elements a row (half the
// bytes): 54 KiB at d = 128, L = 64, so four blocks share a multiprocessor and the 512 blocks of a
// 4,096-token Qwen3-4B launch run as one wave (three an SM, 72 KiB with fp32 values, left 1.3).
struct ContributionLayout {
  int stride, keys, values, input, log_forget, cumulative, weights, scalars;
  SharedCarve carve;
  __host__ __device__ ContributionLayout(int chunk, int d, bool bf16_values) {
    // ≡ 8 mod 32 floats: conflict-free fragments of Kᵀ and of V in fp32; in bf16, 4 mod 32 words
    stride = round_up(d, 32) + 8;
    keys = carve.take(chunk * stride);
    values = carve.take(bf16_values ? chunk * stride / 2 : chunk * stride);
    input = carve.take(2 * chunk);       // ĩ_τ, double
    log_forget = carve.take(2 * chunk);  // logf_τ, double
    cumulative = carve.take(2 * chunk);  // b_τ, double
    weights = carve.take(2 * chunk);     // e^{D_Lτ − λ}, double
    scalars = carve.take(2 * 2);         // b_L, λ
  }
};

// ---- Kernel 3's shared memory (the host sizes it too) -------------------------------------------

inline constexpr int kDenominatorThreads = 256;

struct DenominatorLayout {
  int key_stride, weight_stride, column_groups;
  int keys, weights, input, log_forget, cumulative, entering, stabilizers, normalizer, partials;
  SharedCarve carve;
  __host__ __device__ DenominatorLayout(int chunk, int d, int group, int parts = 1) {
    key_stride = round_up(d, 32) + 4;  // k as loaded (fp32): the fp64 products' B operands
    weight_stride = chunk + 4;         // doubles: the 8 rows of an fp64 A fragment in two wavefronts
    column_groups = kDenominatorThreads / 32 / (chunk / 16 / parts);  // warps per m-tile pair
    keys = carve.take(chunk * key_stride);
    weights = carve.take(2 * chunk * weight_stride);            // W_τj, double
    input = carve.take(2 * chunk);
    log_forget = carve.take(2 * chunk);
    cumulative = carve.take(2 * chunk);
    entering = carve.take(2 * chunk);                          // e_τ, double
    stabilizers = carve.take(chunk);                           // m_τ
    normalizer = carve.take(2 * d);                            // n_c, double
    partials = carve.take(2 * column_groups * group * chunk);  // q̂_τ·N_τ per column group, double
  }
};

// ---- Launchers of kernels 1, 2 and 3 (mlstm_prefill_state.cu, mlstm_prefill_denominators.cu) ------

// Kernel 1 on `stream`: block (s, c) per state head s and chunk c, ContributionLayout's shared memory.
void launch_chunk_contributions(const PrefillArgs& args, cudaStream_t stream);
// Kernel 2 on `stream`: block (slice, s) per slice of state head s's elements of C and n.
void launch_state_scan(const PrefillArgs& args, cudaStream_t stream);
// Kernel 3 on `stream`: block (s, c), DenominatorLayout's shared memory.
// Kernel 3's blocks a (state, chunk) for these arguments, 1 or 2: each part takes the rows of half
// the m-tile pairs (each pair balanced, so the halves are too) over twice the column groups, so
// that the kernel ends sooner where twice its blocks still fit one an SM.
int chunk_denominator_parts(const PrefillArgs& args);
void launch_chunk_denominators(const PrefillArgs& args, cudaStream_t stream);
// Whether kernel 4 in bf16 products holds chunks of `chunk` tokens of head dimension d with
// `group` query heads a state (L = 64; d a multiple of 32 up to 128, or 256).
bool chunk_outputs_bf16_fits(int chunk, int d, int group);
// Kernel 4 in bf16 products (mlstm_prefill_bf16.cu) on `stream`, writing Out: for a shape
// chunk_outputs_bf16_fits holds, after a scan that left C_c in Workspace::bf16_matrices.
template <typename Out>
void launch_chunk_outputs_bf16(const PrefillArgs& args, cudaStream_t stream);

}  // namespace bifocal::cuda::mlstm_prefill_detail
