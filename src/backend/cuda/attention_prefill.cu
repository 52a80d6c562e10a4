// Prefill attention: a chunk of queries over keys with explicit positions, flash-attention style
// in fp32 on the SIMT cores. Contract in attention_prefill.cuh.
//
// The math (DESIGN.md "full", "swa", learned sink): for query i, head h at position p,
//   o = Σ_j e^{s_j − m} v_j / (Σ_j e^{s_j − m} + e^{S_h − m}),  s_j = q·k_j / √d,
// over the keys j that key_visible(p, kp_j) admits. A block owns 64 consecutive queries of one
// head; the keys stream through shared memory in tiles of BK, and each query row keeps the
// online-softmax state (m, l, acc) of the CPU's OnlineSoftmax, updated once per tile. Logits are
// in base 2 (q pre-multiplied by log2(e)/√d) so a weight is one exp2f; a learned sink seeds the
// state as m = S_h·log2(e), l = 1 (DESIGN.md).
//
// Work split: four threads share a query row, thread r holding columns 16c + 4r … 16c + 4r + 3
// of q and of the output, so every shared-memory read is a float4 that eight rows of a warp
// share (a broadcast, no bank conflict), and a logit is a 4-lane xor reduction. Cost per tile
// and thread: 2·BK·MAX_D/4 FMAs against BK·MAX_D/2 float4 shared reads, so this runs at a
// fraction of fp32 peak; bf16 keys with head_dim 64, 128 or 256 therefore go to the tensor-core kernel
// (attention_prefill_tensor_core.cu) and this one serves fp32 keys and the other head sizes. Key
// tiles that no query of the block can see (the causal upper triangle, keys outside every window)
// are skipped after reading only their positions.
#include "backend/cuda/attention_prefill.cuh"

#include <string>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

constexpr int kPrefillThreads = 256;
constexpr int kRowThreads = 4;                                    // threads sharing one query row
constexpr int kQueryRows = kPrefillThreads / kRowThreads;         // 64 queries per block
constexpr int kTileFloats = 4096;                                 // BK · MAX_D: 16 KB per tile
constexpr float kLog2e = 1.4426950408889634f;

using device::key_visible;
using device::unpack16;

using device::store4;

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

// MAX_D: the widest head_dim this instantiation holds (64, 128 or 256); head_dim ≤ MAX_D.
template <typename T, typename OutT, int MAX_D>
__global__ void __launch_bounds__(kPrefillThreads) attention_prefill_kernel(PrefillAttentionArgs<T> a, OutT* out) {
  device::allow_next_kernel_launch();
  // Every input (q, k, v, positions) is an earlier kernel's output; beside_previous_kernel: they
  // were complete before this kernel launched, and it waits at its end instead.
  if (!a.beside_previous_kernel) device::wait_for_previous_kernel();
  constexpr int BK = kTileFloats / MAX_D;  // keys per tile: 64, 32 or 16
  constexpr int CHUNKS = MAX_D / 16;       // float4 columns per thread
  constexpr int VEC = 16 / sizeof(T);      // elements of T in one 16-byte load
  __shared__ float4 key_tile[BK][MAX_D / 4], value_tile[BK][MAX_D / 4];
  __shared__ std::int64_t tile_positions[BK];

  const int d = a.head_dim;
  const int row = threadIdx.x / kRowThreads, quarter = threadIdx.x % kRowThreads;
  const int i = blockIdx.x * kQueryRows + row;
  const int h = blockIdx.y, kv = h / (a.query_heads / a.kv_heads);
  const std::int64_t p = i < a.n ? a.positions[i] : -1;  // a padding row past n sees no key

  const float q_scale = kLog2e * rsqrtf(float(d));
  const float* q_row = a.queries + (std::size_t(i) * a.query_heads + h) * d;
  float4 q[CHUNKS], acc[CHUNKS];
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int col = 16 * c + 4 * quarter;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < a.n && col < d) x = *reinterpret_cast<const float4*>(q_row + col);
    q[c] = make_float4(x.x * q_scale, x.y * q_scale, x.z * q_scale, x.w * q_scale);
    acc[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  const float out_scale =
      i < a.n ? device::bifocal_window_share(a.output_gate, a.output_gate_stride, i, h, a.output_gate_bias) : 1.0f;
  float m = a.learned_sinks ? a.learned_sinks[h] * kLog2e : -INFINITY;
  float l = a.learned_sinks ? 1.0f : 0.0f;

  const int vectors = d / VEC;
  for (std::int64_t k0 = 0; k0 < a.num_keys; k0 += BK) {
    // 1. The tile's key positions; skip the tile when no query row of the block sees any key.
    __syncthreads();  // every thread is done with the previous tile
    if (threadIdx.x < BK) {
      const std::int64_t j = k0 + threadIdx.x;
      tile_positions[threadIdx.x] = j < a.num_keys ? (a.key_positions ? a.key_positions[j] : j) : -1;
    }
    __syncthreads();
    bool row_sees_tile = false;
    for (int j = 0; j < BK; ++j) row_sees_tile |= key_visible(p, tile_positions[j], a.window, a.sink_tokens);
    if (!__syncthreads_or(row_sees_tile)) continue;

    // 2. Keys and values of the tile, as fp32, 16 bytes per load. Empty or missing keys are
    //    zeros: an empty slot's garbage (even NaN) must not reach a sum as 0·NaN.
    for (int idx = threadIdx.x; idx < BK * vectors; idx += kPrefillThreads) {
      const int j = idx / vectors, v = idx % vectors;
      float k[VEC] = {}, val[VEC] = {};
      if (tile_positions[j] >= 0) {
        const std::size_t offset = (std::size_t(k0 + j) * a.kv_heads + kv) * d + v * VEC;
        unpack16(__ldg(reinterpret_cast<const uint4*>(a.keys + offset)), k, a.keys);
        unpack16(__ldg(reinterpret_cast<const uint4*>(a.values + offset)), val, a.values);
      }
#pragma unroll
      for (int e = 0; e < VEC / 4; ++e) {
        key_tile[j][v * (VEC / 4) + e] = make_float4(k[4 * e], k[4 * e + 1], k[4 * e + 2], k[4 * e + 3]);
        value_tile[j][v * (VEC / 4) + e] = make_float4(val[4 * e], val[4 * e + 1], val[4 * e + 2], val[4 * e + 3]);
      }
    }
    __syncthreads();

    // 3. Base-2 logits of this row against the BK keys (4-lane reduction of the partial dots).
    float s[BK];
#pragma unroll
    for (int j = 0; j < BK; ++j) {
      float dot = 0.0f;
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c)
        if (16 * c + 4 * quarter < d) dot += dot4(q[c], key_tile[j][4 * c + quarter]);
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      s[j] = key_visible(p, tile_positions[j], a.window, a.sink_tokens) ? dot : -INFINITY;
    }

    // 4. Online softmax: rescale (l, acc) to the new max, add the tile's weights. While nothing
    //    is visible m stays −∞; `shift` keeps e^{m − shift} at e^{−∞} = 0 rather than NaN.
    float tile_max = s[0];
#pragma unroll
    for (int j = 1; j < BK; ++j) tile_max = fmaxf(tile_max, s[j]);
    const float new_max = fmaxf(m, tile_max);
    const float shift = new_max == -INFINITY ? 0.0f : new_max;
    const float correction = exp2f(m - shift);
    l *= correction;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      acc[c].x *= correction;
      acc[c].y *= correction;
      acc[c].z *= correction;
      acc[c].w *= correction;
    }
#pragma unroll
    for (int j = 0; j < BK; ++j) {
      const float weight = exp2f(s[j] - shift);
      l += weight;
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
        if (16 * c + 4 * quarter >= d) continue;
        const float4 v = value_tile[j][4 * c + quarter];
        acc[c].x += weight * v.x;
        acc[c].y += weight * v.y;
        acc[c].z += weight * v.z;
        acc[c].w += weight * v.w;
      }
    }
    m = new_max;
  }

  if (i < a.n) {
    OutT* out_row = out + (std::size_t(i) * a.query_heads + h) * d;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int col = 16 * c + 4 * quarter;
      if (col < d)
        store4(out_row + col, make_float4(out_scale * (acc[c].x / l), out_scale * (acc[c].y / l),
                                          out_scale * (acc[c].z / l), out_scale * (acc[c].w / l)));
    }
  }
  if (a.beside_previous_kernel) device::wait_for_previous_kernel();  // complete ⇒ the previous kernel complete
}

template <typename T, typename OutT, int MAX_D>
void launch(const PrefillAttentionArgs<T>& a, OutT* out, cudaStream_t stream) {
  const dim3 grid((a.n + kQueryRows - 1) / kQueryRows, a.query_heads);
  launch_dependent(attention_prefill_kernel<T, OutT, MAX_D>, grid, dim3(kPrefillThreads), 0, stream,
                   "attention_prefill_kernel", a, out);
}

// The storage type's name, for error messages.
template <typename X>
constexpr const char* storage_name() {
  return std::is_same_v<X, float> ? "fp32" : std::is_same_v<X, __half> ? "fp16" : "bf16";
}

}  // namespace

template <typename T, typename OutT>
void attention_prefill(const PrefillAttentionArgs<T>& a, OutT* out, cudaStream_t stream,
                       const PrefillMlstmOutputs& mlstm_outputs) {
  if (a.head_dim < 8 || a.head_dim > 256 || a.head_dim % 8 != 0)
    fail("attention", "CUDA head_dim must be a multiple of 8 in [8, 256], got " + std::to_string(a.head_dim));
  if (a.kv_heads <= 0 || a.query_heads % a.kv_heads != 0)
    fail("attention", "query heads must be a multiple of KV heads");
  if (a.output_gate != nullptr && a.output_gate_stride < a.query_heads)
    fail("attention", "output gate stride " + std::to_string(a.output_gate_stride) + " is less than the " +
                          std::to_string(a.query_heads) + " query heads");
  if (mlstm_outputs.states != nullptr && !attention_prefill_takes_mlstm_outputs<T, OutT>(a))
    fail("attention", std::string("the mLSTM outputs in the epilogue take bf16 keys and output with head_dim 128 or ") +
                          "256, not " + storage_name<T>() + " keys and " + storage_name<OutT>() +
                          " output with head_dim " +
                          std::to_string(a.head_dim));
  if (a.n <= 0) return;
  if constexpr (sizeof(T) == 2) {
    if (prefill_uses_tensor_cores(a)) return attention_prefill_tensor_core(a, out, stream, mlstm_outputs);
  }
  if (a.head_dim <= 64)
    launch<T, OutT, 64>(a, out, stream);
  else if (a.head_dim <= 128)
    launch<T, OutT, 128>(a, out, stream);
  else
    launch<T, OutT, 256>(a, out, stream);
}

template void attention_prefill<__nv_bfloat16, float>(const PrefillAttentionArgs<__nv_bfloat16>&, float*,
                                   cudaStream_t, const PrefillMlstmOutputs&);
template void attention_prefill<__nv_bfloat16, __nv_bfloat16>(const PrefillAttentionArgs<__nv_bfloat16>&,
                                                               __nv_bfloat16*, cudaStream_t,
                                                               const PrefillMlstmOutputs&);
template void attention_prefill<float, float>(const PrefillAttentionArgs<float>&, float*,
                                   cudaStream_t, const PrefillMlstmOutputs&);
template void attention_prefill<float, __nv_bfloat16>(const PrefillAttentionArgs<float>&, __nv_bfloat16*,
                                   cudaStream_t, const PrefillMlstmOutputs&);
template void attention_prefill<__half, float>(const PrefillAttentionArgs<__half>&, float*,
                                   cudaStream_t, const PrefillMlstmOutputs&);
template void attention_prefill<__half, __half>(const PrefillAttentionArgs<__half>&, __half*,
                                   cudaStream_t, const PrefillMlstmOutputs&);

}  // namespace bifocal::cuda
