// Decode matrix–vector products (gemv.cuh gives the contract and the bytes per call).
//
// The work split: one warp computes one output row — row j of W for gemv, row j of both W_gate
// and W_up for the fused SwiGLU — and a block is 8 such warps (2 for a launch of more than one
// wave that writes no norm's groups: block_warps). A lane reads W in chunks of 8
// consecutive elements (one 16-byte load for bf16), lane l taking chunks l, l+32, …, so a warp
// reads 512 contiguous bytes per row per step: fully coalesced. Each step issues kUnroll chunks
// per row before any is used, so every lane keeps kUnroll (SwiGLU: 2·kUnroll; 2·kGateUpUnroll in
// 2-warp blocks) 16-byte loads in flight; with 16+ warps resident per SM that covers the ~25 KB
// per SM that the H200's bandwidth × latency product asks for. The dot products accumulate in
// fp32 registers and the warp sums them with shuffles at the end; nothing but the final value is
// written.
// Measured alternatives (H200, Qwen3-4B shapes): two rows per warp, or 8 chunks in flight per
// lane, were 3–25 % slower on the products of more than one wave of blocks (fewer warps; more
// registers). A product whose blocks all fit on the GPU at once at 3 blocks an SM (o_proj and
// down_proj: 320 blocks on 132 SMs) has no later wave to lose; there more chunks in flight a lane
// (kDeepUnroll) raise the bytes in flight: 8 chunks against 4 gave +1.3–2.2% a Qwen3-4B decode
// step (stop 24), and 6 chunks against 8 another +0.6–1.1% (stop 33; Qwen3.5-like +0.4–1.5%,
// paper-fig2 +0.5–1.8%). Why 6 beats 8 is not known; not residency: capped at 72 registers, so
// that two blocks fit beside the window attention's, 6 chunks gained less (+0.4%), 5 and 7 chunks
// nothing (±0, −0.3%), and 8 chunks spilled (−10%). Apart (stop 34, Qwen3-4B): o_proj (k = 4,096)
// 5: −1.3%, 7 and 8: ±0 to −0.6%; down_proj (k = 9,728) 5: −0.4%, 7: +0.5%, 8: ±0 — but 7 cost the
// Qwen3.5-like shape's down_proj (k = 9,216) 0.6–1.0%, so both stay at 6.
//
// o_proj as one fat block an SM, landed beside the window attention with its rows requested
// before its wait (into shared memory by bulk copies, or into registers), lost 1.2–15% (stop 35):
// some blocks land only after the attention, and the early ones still end ~7 µs after their wait.
//
// x (10–39 KB) is read with plain loads: every warp of an SM reads the same x, so it is served
// from L1/L2. W is read with streaming loads (evict-first): it is used once per token
// and would only push x out of the caches.
//
// What limits it: DRAM bandwidth for the large products (LM head 4.5 TB/s, gate+up 4.0 TB/s);
// for the small ones (k/v, 5 MB) the fixed ramp-up and drain of a launch.
#include "backend/cuda/gemv.cuh"

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/cluster_launch.h"  // multiprocessor_count
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"

namespace bifocal::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;       // chunks per row in flight per lane
constexpr int kDeepUnroll = 6;   // … in a launch of one wave (launch_gemv)
constexpr int kGateUpUnroll = 5;  // … per row of a fused gate/up of more than one wave (two rows a warp)
constexpr int kDeepBlocksPerSM = 3;  // the deep launch's bound: 80 registers a thread (it takes 71)
constexpr int kResidentBlocksPerSM = 4;  // 8-warp blocks an SM of the plain kernels (≤ 64 registers)
constexpr int kSmallBlockWarps = 2;  // a block of a reader of more than one wave (block_warps)
constexpr std::int64_t kSmallBlockMinWarpBytes = 4096;  // … whose warps read at least this much W
constexpr int kChunk = 8;        // elements per chunk: 16 bytes of bf16 or fp16

using device::from_float;
using device::to_float;
using device::warp_sum;

// Eight consecutive elements held as raw registers, loaded with 16-byte loads: one for bf16 or
// fp16, two for float. load_streaming marks the lines evict-first (W); load is a plain coherent load
// (x, which every warp of an SM reads, so L1 serves it). Not __ldg: x is written by the kernel
// this one overlaps (programmatic dependent launch), and the non-coherent read-only path is only
// valid for data no grid writes while this one runs. unpack converts to float.
template <typename T>  // bf16 or fp16
struct Chunk {
  static_assert(sizeof(T) == 2, "16-bit storage; fp32 has its own specialization");
  uint4 raw;
  __device__ void load_streaming(const T* p) { raw = __ldcs(reinterpret_cast<const uint4*>(p)); }
  __device__ void load(const T* p) { raw = *reinterpret_cast<const uint4*>(p); }
  __device__ void unpack(float (&v)[kChunk]) const { device::unpack16(raw, v, static_cast<const T*>(nullptr)); }
};

template <>
struct Chunk<float> {
  float4 low, high;
  __device__ void load_streaming(const float* p) {
    low = __ldcs(reinterpret_cast<const float4*>(p));
    high = __ldcs(reinterpret_cast<const float4*>(p) + 1);
  }
  __device__ void load(const float* p) {
    low = reinterpret_cast<const float4*>(p)[0];
    high = reinterpret_cast<const float4*>(p)[1];
  }
  __device__ void unpack(float (&v)[kChunk]) const {
    v[0] = low.x, v[1] = low.y, v[2] = low.z, v[3] = low.w;
    v[4] = high.x, v[5] = high.y, v[6] = high.z, v[7] = high.w;
  }
};

// Programmatic dependent launch (dependent_launch.h). The weights never depend on an earlier
// kernel, so a gemv starts streaming W while the kernel before it (which writes x, and out when
// accumulating) drains, and waits for that kernel only before its first read of x.
using device::allow_next_kernel_launch;
using device::wait_for_previous_kernel;

// How a warp reads the input vector: chunk c's 8 elements (load, then unpack), element c alone
// (the scalar loop), anything else it needs once the previous kernel is done (after_wait), and the
// factor of the warp's summed dot products (scale, after the loop). PlainInput reads x as given.
// RmsNormedReader (carried_rms_norm.h's RmsNormedInput) reads g ⊙ x and, after the wait, the group
// sums of x², which it adds up while the first W loads are still on their way from memory;
// 1/rms(x) scales the sums at the end.
template <typename XT>
struct PlainInput {
  static constexpr int kGemvBlocksPerSM = 0;  // no bound: its 52 registers give 4 blocks of 8 warps
  const XT* x;
  using Loaded = Chunk<XT>;
  __device__ void load(Loaded& chunk, int c) const { chunk.load(x + kChunk * c); }
  __device__ void unpack(const Loaded& chunk, float (&v)[kChunk]) const { chunk.unpack(v); }
  __device__ float element(int c) const { return to_float(x[c]); }
  __device__ void after_wait(int) {}
  __device__ float scale() const { return 1.0f; }
  __device__ void write_normalized(std::int64_t, std::int64_t, int) const {}
};

template <typename T>
struct RmsNormedReader {
  // As the plain gemv (unbounded it takes 74 registers: 3 blocks an SM).
  static constexpr int kGemvBlocksPerSM = kResidentBlocksPerSM;
  RmsNormedInput<T> input;
  int k;
  float sum_squares = 0.0f;  // this lane's share of Σx² (after_wait), then the warp's
  float inverse_rms = 0.0f;  // set by scale()

  using Loaded = Chunk<T>;
  __device__ void load(Loaded& chunk, int c) const { chunk.load(input.scaled + kChunk * c); }
  __device__ void unpack(const Loaded& chunk, float (&v)[kChunk]) const { chunk.unpack(v); }
  __device__ float element(int c) const { return to_float(input.scaled[c]); }
  __device__ void after_wait(int lane) {
    for (int b = lane; b < rms_norm_groups(k); b += kWarpSize) sum_squares += input.group_squares[b];
  }
  // The RMSNorm kernel's 1/rms (dense_kernels.cu) from the warp's total.
  __device__ float scale() {
    inverse_rms = 1.0f / sqrtf(warp_sum(sum_squares) / float(k) + input.eps);
    return inverse_rms;
  }
  // rmsnorm(x) into normalized_out (after scale()), in the RMSNorm kernel's order of operations so
  // the values are its own: warp w of the launch's `warps` writes elements 32w + lane, 32(w +
  // warps) + lane, … — one element a lane for q+k+v's thousands of warps. (Written by one warp, the
  // 2,560 elements were 80 dependent L2 round trips, ~20 µs on the critical path of every layer.)
  __device__ void write_normalized(std::int64_t warp, std::int64_t warps, int lane) const {
    if (input.normalized_out == nullptr) return;
    for (std::int64_t c = warp * kWarpSize + lane; c < k; c += warps * kWarpSize)
      input.normalized_out[c] = from_float<T>(to_float(input.norm_weight[c]) * (input.residual[c] * inverse_rms));
  }
};

// sums[r] = Σ_c rows[r][c] · x[c] over c < k, for the kRows rows one warp owns; every lane gets
// the totals, after waiting for the previous kernel (so everything the caller reads or writes
// after this call is ordered after that kernel too). vectorized: k % 8 == 0 and all pointers
// 16-byte aligned, so chunk loads are legal; otherwise the scalar tail loop does all of k (tiny
// test models with odd k only).
template <typename T, typename Input, int kRows, int Unroll = kUnroll>
__device__ void warp_dot_rows(const T* const (&rows)[kRows], Input& x, int k, bool vectorized,
                              float (&sums)[kRows]) {
  const int lane = threadIdx.x % kWarpSize;
  float acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;

  const int chunks = vectorized ? k / kChunk : 0;
  for (int first = 0; first < chunks; first += kWarpSize * Unroll) {
    // Issue every W load of this step first, then the x loads, then the arithmetic: kRows·Unroll
    // 16-byte W loads per lane in flight at once, instead of one load, one wait, one FMA burst.
    Chunk<T> w[Unroll][kRows];
    typename Input::Loaded xs[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const int c = first + u * kWarpSize + lane;
      if (c < chunks) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) w[u][r].load_streaming(rows[r] + kChunk * c);
      }
    }
    // The first step's W is in flight before the wait for the previous kernel (whose output x
    // is): a dependent launch overlaps it with that kernel's tail.
    if (first == 0) wait_for_previous_kernel();
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const int c = first + u * kWarpSize + lane;
      if (c < chunks) x.load(xs[u], c);
    }
    if (first == 0) x.after_wait(lane);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const int c = first + u * kWarpSize + lane;
      if (c < chunks) {
        float xf[kChunk];
        x.unpack(xs[u], xf);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float wf[kChunk];
          w[u][r].unpack(wf);
#pragma unroll
          for (int i = 0; i < kChunk; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
        }
      }
    }
  }
  if (chunks == 0) {
    wait_for_previous_kernel();
    x.after_wait(lane);
  }
  for (int c = chunks * kChunk + lane; c < k; c += kWarpSize) {
    const float xv = x.element(c);
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = fmaf(to_float(rows[r][c]), xv, acc[r]);
  }
  const float scale = x.scale();
#pragma unroll
  for (int r = 0; r < kRows; ++r) sums[r] = warp_sum(acc[r]) * scale;
}

// The products of one gemv_shared_input launch, passed by value (kernel parameters): their rows
// are numbered one after the other, product p owning global rows first_row[p] … first_row[p+1]−1.
template <typename T>
struct SharedInputProducts {
  GemvProduct<T> products[kMaxSharedInputProducts];
  std::int64_t first_row[kMaxSharedInputProducts + 1];
  int count;
};

// Warp w of block b owns global row g = b·W + w (W warps a block), row g − first_row[p] of product p.
// Lane 0 adds the bias and, when accumulating, the old out[j] — in the CPU backend's order:
// out = out + (W·x + bias). The warps also write the normalised input, when the input asks for it
// (RmsNormedReader::write_normalized). With next.scaled (one product, which
// accumulates into the residual), lane 0 also writes g_j · out[j], and the block, whose 8 rows are
// group b, the sum of their squares (carried_rms_norm.h's NextRmsNorm): the one barrier of this
// kernel, at its very end.
template <typename T, typename Input, int Unroll = kUnroll, bool Deep = false>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize, Deep ? kDeepBlocksPerSM : Input::kGemvBlocksPerSM)
    gemv_kernel(const SharedInputProducts<T> batch, const Input input, int k, bool vectorized, bool accumulate,
                const NextRmsNorm<T> next) {
  static_assert(kWarpsPerBlock == kRmsNormGroup, "a block's rows are one group of NextRmsNorm");
  __shared__ float row_squares[kWarpsPerBlock];
  allow_next_kernel_launch();
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const std::int64_t global_row = std::int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + warp;
  const bool has_row = global_row < batch.first_row[batch.count];
  float new_value = 0.0f;  // lane 0's out[row], for next
  if (has_row) {
    int p = 0;
    while (global_row >= batch.first_row[p + 1]) ++p;
    const GemvProduct<T>& product = batch.products[p];
    const std::int64_t row = global_row - batch.first_row[p];
    const T* rows[1] = {product.weight + row * k};
    float sums[1];
    Input x = input;
    warp_dot_rows<T, Input, 1, Unroll>(rows, x, k, vectorized, sums);
    x.write_normalized(global_row, batch.first_row[batch.count], lane);
    if (lane == 0) {
      // Every load before the first store (which the compiler must assume may alias them): one
      // round trip to L2, not two.
      const float norm_weight = next.scaled != nullptr ? to_float(next.norm_weight[row]) : 0.0f;
      float value = sums[0];
      if (product.bias != nullptr) value += to_float(product.bias[row]);
      new_value = accumulate ? product.out[row] + value : value;
      product.out[row] = new_value;
      if (next.scaled != nullptr) next.scaled[row] = from_float<T>(norm_weight * new_value);
    }
  }
  if (next.scaled == nullptr) return;  // the same for every thread of the grid (8 warps a block: launch_gemv)
  if (lane == 0) row_squares[warp] = new_value * new_value;
  __syncthreads();
  if (threadIdx.x == 0) {
    float group = 0.0f;
    for (int w = 0; w < kWarpsPerBlock; ++w) group += row_squares[w];
    next.group_squares[blockIdx.x] = group;
  }
}

// Warp w of block b owns output row j = b·W + w (W warps a block) and reads row j of both matrices.
template <typename T, typename Input, typename OutT, int Unroll>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    gate_up_swiglu_kernel(const T* gate_weight, const T* up_weight, const Input input, int m, int k, bool vectorized,
                          OutT* out) {
  allow_next_kernel_launch();
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const std::int64_t row = std::int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + warp;
  if (row >= m) return;
  const T* rows[2] = {gate_weight + row * k, up_weight + row * k};
  float sums[2];
  Input x = input;
  warp_dot_rows<T, Input, 2, Unroll>(rows, x, k, vectorized, sums);
  x.write_normalized(row, m, lane);
  if (lane != 0) return;
  const float g = sums[0], u = sums[1];
  out[row] = from_float<OutT>(g / (1.0f + expf(-g)) * u);
}

bool aligned_16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(std::int64_t warps, int warps_per_block = kWarpsPerBlock) {
  return unsigned((warps + warps_per_block - 1) / warps_per_block);
}

// Warps a block for a launch that writes no carried norm's groups (a writer's block is one group:
// kWarpsPerBlock) over `rows` rows, each warp reading `warp_bytes` of W: 2 when its 8-warp blocks
// would take more than one wave, so that the blocks of its last wave, and of the handover to the
// next kernel, come and go a quarter at a time — unless a warp's work is too short to pay for four
// times the blocks. Stop 24, H200: Qwen3-4B's q+k+v, gate/up and LM head (5–10 KB a warp) +2.1% a
// decode step; paper-fig2's LM head (2 KB a warp, 4,000 blocks) −2%, its products of under one wave
// −3.5%.
int block_warps(std::int64_t rows, std::int64_t warp_bytes) {
  const std::int64_t one_wave_rows = std::int64_t(kWarpsPerBlock) * kResidentBlocksPerSM * multiprocessor_count();
  return rows > one_wave_rows && warp_bytes >= kSmallBlockMinWarpBytes ? kSmallBlockWarps : kWarpsPerBlock;
}

// The deep variant (kDeepUnroll chunks in flight a lane) is for 16-bit weights read with a plain
// 16-bit x (o_proj and down_proj): wider chunks or the carried norm's reader would spill.
template <typename T, typename Input>
constexpr bool kHasDeepVariant = sizeof(T) == 2 && std::is_same_v<Input, PlainInput<T>>;

// gemv_kernel on the products' rows one after the other (SharedInputProducts).
template <typename T, typename Input>
void launch_gemv(std::span<const GemvProduct<T>> products, const Input& input, int k, bool input_aligned,
                 bool accumulate, cudaStream_t stream, const NextRmsNorm<T>& next = {}) {
  if (products.size() > std::size_t(kMaxSharedInputProducts))
    fail("gemv_shared_input", "at most " + std::to_string(kMaxSharedInputProducts) + " products per launch");
  SharedInputProducts<T> batch{};
  batch.count = int(products.size());
  bool vectorized = k % kChunk == 0 && input_aligned;
  for (int p = 0; p < batch.count; ++p) {
    batch.products[p] = products[p];
    batch.first_row[p + 1] = batch.first_row[p] + products[p].m;
    vectorized = vectorized && aligned_16(products[p].weight);
  }
  const std::int64_t rows = batch.first_row[batch.count];
  if (rows <= 0) return;
  const int warps = next.scaled != nullptr ? kWarpsPerBlock : block_warps(rows, std::int64_t(k) * sizeof(T));
  const unsigned blocks = blocks_for(rows, warps);
  if constexpr (kHasDeepVariant<T, Input>) {
    // All the blocks resident at once at kDeepBlocksPerSM an SM: the extra registers cost no wave.
    if (warps == kWarpsPerBlock && blocks <= unsigned(kDeepBlocksPerSM * multiprocessor_count())) {
      launch_dependent(gemv_kernel<T, Input, kDeepUnroll, true>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0,
                       stream, "gemv_kernel", batch, input, k, vectorized, accumulate, next);
      return;
    }
  }
  launch_dependent(gemv_kernel<T, Input>, dim3(blocks), dim3(warps * kWarpSize), 0, stream, "gemv_kernel", batch,
                   input, k, vectorized, accumulate, next);
}

template <typename T, typename Input, typename OutT>
void launch_gate_up_swiglu(const T* gate_weight, const T* up_weight, const Input& input, int m, int k,
                           bool input_aligned, OutT* out, cudaStream_t stream) {
  if (m <= 0) return;
  const bool vectorized = k % kChunk == 0 && aligned_16(gate_weight) && aligned_16(up_weight) && input_aligned;
  const int warps = block_warps(m, 2 * std::int64_t(k) * sizeof(T));
  // 16-bit weights in a launch of more than one wave (2-warp blocks) keep kGateUpUnroll chunks a
  // row in flight: 2·5 16-byte loads a lane, 102 registers with the carried norm's reader. Stop 33–34,
  // H200, against 4: Qwen3-4B +0.9–1.3% a decode step, Qwen3.5-like ±0; 3 and 6 were slower. A
  // launch under one wave (paper-fig2's 512 blocks of 8 warps) keeps kUnroll: 5 there cost 1.1–1.6%
  // (fewer blocks resident). fp32 weights (a test path) keep kUnroll: they take 98–128 registers at 4.
  const auto kernel = sizeof(T) == 2 && warps == kSmallBlockWarps ? gate_up_swiglu_kernel<T, Input, OutT, kGateUpUnroll>
                                                                   : gate_up_swiglu_kernel<T, Input, OutT, kUnroll>;
  launch_dependent(kernel, dim3(blocks_for(m, warps)), dim3(warps * kWarpSize), 0, stream, "gate_up_swiglu_kernel",
                   gate_weight, up_weight, input, m, k, vectorized, out);
}

template <typename T>
bool aligned_16(const RmsNormedInput<T>& input) {
  return aligned_16(input.scaled);
}

}  // namespace

template <typename T, typename XT>
void gemv_shared_input(std::span<const GemvProduct<T>> products, const XT* x, int k, bool accumulate,
                       cudaStream_t stream) {
  launch_gemv(products, PlainInput<XT>{x}, k, aligned_16(x), accumulate, stream);
}

template <typename T>
void gemv_shared_input(std::span<const GemvProduct<T>> products, const RmsNormedInput<T>& input, int k,
                       bool accumulate, cudaStream_t stream) {
  launch_gemv(products, RmsNormedReader<T>{.input = input, .k = k}, k, aligned_16(input), accumulate, stream);
}

template <typename T, typename XT>
void gemv(const T* weight, const XT* x, const T* bias, int m, int k, float* out, bool accumulate, cudaStream_t stream) {
  const GemvProduct<T> product{weight, bias, m, out};
  gemv_shared_input<T, XT>(std::span(&product, 1), x, k, accumulate, stream);
}

template <typename T, typename XT>
void gemv_accumulate_for_norm(const T* weight, const XT* x, const T* bias, int m, int k, float* out,
                              const NextRmsNorm<T>& next, cudaStream_t stream) {
  if (next.norm_weight == nullptr || next.scaled == nullptr || next.group_squares == nullptr)
    fail("gemv_accumulate_for_norm", "the next RMSNorm's weight, scaled input and group sums must all be given");
  const GemvProduct<T> product{weight, bias, m, out};
  launch_gemv(std::span(&product, 1), PlainInput<XT>{x}, k, aligned_16(x), true, stream, next);
}

template <typename T, typename XT, typename OutT>
void gate_up_swiglu_gemv(const T* gate_weight, const T* up_weight, const XT* x, int m, int k, OutT* out,
                         cudaStream_t stream) {
  launch_gate_up_swiglu(gate_weight, up_weight, PlainInput<XT>{x}, m, k, aligned_16(x), out, stream);
}

template <typename T, typename OutT>
void gate_up_swiglu_gemv(const T* gate_weight, const T* up_weight, const RmsNormedInput<T>& input, int m, int k,
                         OutT* out, cudaStream_t stream) {
  launch_gate_up_swiglu(gate_weight, up_weight, RmsNormedReader<T>{.input = input, .k = k}, m, k, aligned_16(input),
                        out, stream);
}

// Storage type T × input type XT (× output type OutT for the fused SwiGLU).
template void gemv_shared_input(std::span<const GemvProduct<__nv_bfloat16>>, const float*, int, bool, cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<__nv_bfloat16>>, const __nv_bfloat16*, int, bool,
                                cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<float>>, const float*, int, bool, cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<float>>, const __nv_bfloat16*, int, bool, cudaStream_t);
template void gemv(const __nv_bfloat16*, const float*, const __nv_bfloat16*, int, int, float*, bool, cudaStream_t);
template void gemv(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, int, float*, bool,
                   cudaStream_t);
template void gemv(const float*, const float*, const float*, int, int, float*, bool, cudaStream_t);
template void gemv(const float*, const __nv_bfloat16*, const float*, int, int, float*, bool, cudaStream_t);

template void gate_up_swiglu_gemv(const __nv_bfloat16*, const __nv_bfloat16*, const float*, int, int, float*,
                                  cudaStream_t);
template void gate_up_swiglu_gemv(const __nv_bfloat16*, const __nv_bfloat16*, const float*, int, int, __nv_bfloat16*,
                                  cudaStream_t);
template void gate_up_swiglu_gemv(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, int, float*,
                                  cudaStream_t);
template void gate_up_swiglu_gemv(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, int,
                                  __nv_bfloat16*, cudaStream_t);
template void gate_up_swiglu_gemv(const float*, const float*, const float*, int, int, float*, cudaStream_t);
template void gate_up_swiglu_gemv(const float*, const float*, const float*, int, int, __nv_bfloat16*, cudaStream_t);
template void gate_up_swiglu_gemv(const float*, const float*, const __nv_bfloat16*, int, int, float*, cudaStream_t);
template void gate_up_swiglu_gemv(const float*, const float*, const __nv_bfloat16*, int, int, __nv_bfloat16*,
                                  cudaStream_t);

template void gemv_shared_input(std::span<const GemvProduct<__half>>, const float*, int, bool, cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<__half>>, const __half*, int, bool, cudaStream_t);
template void gemv(const __half*, const float*, const __half*, int, int, float*, bool, cudaStream_t);
template void gemv(const __half*, const __half*, const __half*, int, int, float*, bool, cudaStream_t);
template void gate_up_swiglu_gemv(const __half*, const __half*, const float*, int, int, float*, cudaStream_t);
template void gate_up_swiglu_gemv(const __half*, const __half*, const float*, int, int, __half*, cudaStream_t);
template void gate_up_swiglu_gemv(const __half*, const __half*, const __half*, int, int, float*, cudaStream_t);
template void gate_up_swiglu_gemv(const __half*, const __half*, const __half*, int, int, __half*, cudaStream_t);

// The RMSNorm carried across products (carried_rms_norm.h): the writers (o_proj and down_proj, whose
// input is T) and the readers.
template void gemv_accumulate_for_norm(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, int,
                                       float*, const NextRmsNorm<__nv_bfloat16>&, cudaStream_t);
template void gemv_accumulate_for_norm(const __half*, const __half*, const __half*, int, int, float*,
                                       const NextRmsNorm<__half>&, cudaStream_t);
template void gemv_accumulate_for_norm(const float*, const float*, const float*, int, int, float*,
                                       const NextRmsNorm<float>&, cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<__nv_bfloat16>>, const RmsNormedInput<__nv_bfloat16>&,
                                int, bool, cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<__half>>, const RmsNormedInput<__half>&, int, bool,
                                cudaStream_t);
template void gemv_shared_input(std::span<const GemvProduct<float>>, const RmsNormedInput<float>&, int, bool,
                                cudaStream_t);
template void gate_up_swiglu_gemv(const __nv_bfloat16*, const __nv_bfloat16*, const RmsNormedInput<__nv_bfloat16>&,
                                  int, int, __nv_bfloat16*, cudaStream_t);
template void gate_up_swiglu_gemv(const __nv_bfloat16*, const __nv_bfloat16*, const RmsNormedInput<__nv_bfloat16>&,
                                  int, int, float*, cudaStream_t);
template void gate_up_swiglu_gemv(const __half*, const __half*, const RmsNormedInput<__half>&, int, int, __half*,
                                  cudaStream_t);
template void gate_up_swiglu_gemv(const __half*, const __half*, const RmsNormedInput<__half>&, int, int, float*,
                                  cudaStream_t);
template void gate_up_swiglu_gemv(const float*, const float*, const RmsNormedInput<float>&, int, int, float*,
                                  cudaStream_t);

}  // namespace bifocal::cuda
