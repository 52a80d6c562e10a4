// The transformer's dense, non-attention steps on the GPU (src/model/model.cpp, forward_chunk):
// embedding lookup, RMSNorm, the per-head q/k RMSNorm fused with RoPE, SwiGLU, the residual add,
// and the small conversions the cuBLAS prefill path needs. Each one reproduces the CPU backend's
// float math (src/backend/cpu/cpu_backend.cpp, src/model/rope.cpp) step for step.
//
// Conventions of every function here: raw device pointers, the caller's stream, no allocation,
// no synchronisation (decode is captured into a CUDA graph). Weights are stored in T
// (__nv_bfloat16, __half, or float for the `--dtype fp32` test path); activations are float
// unless OutT says otherwise; all arithmetic is fp32. Values that change per decoded token
// (positions) are read from device memory inside the kernels, never passed by value.
//
// All these kernels are memory-bound and tiny next to the matrix products: each reads and writes
// its operands once (bytes per call given at each function), so they are written for clarity.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/carried_rms_norm.h"

namespace bifocal::cuda {

// RoPE's (sin, cos) of every angle i < half at *position, angle = position · inv_freq[i] in fp32
// (device::rotation_at, the bits every kernel that rotates makes for itself): made once per
// decode step, where every layer's window attention and mLSTM step would otherwise each make
// them — and sincosf takes its slow argument reduction past |angle| ≈ 1e5, i.e. at positions past
// ~100K for Qwen3's inv_freq[0] = 1.
struct RopeRotationTable {
  const std::int64_t* position = nullptr;  // [1]
  const float* inv_freq = nullptr;         // [half]
  int half = 0;                            // head_dim / 2
  float2* out = nullptr;                   // [half]; null: no table
};

// out[i, :] = float(table[ids[i], :]) for i < n. ids is a device array; every id must lie in
// [0, vocab) (the caller validates token ids on the host, as Model::forward does).
// Bytes: n·hidden·(sizeof(T) + 4).
// With next (one token: n = 1), also next.scaled and next.group_squares of the row, for the first
// layer's RMSNorm carried into its q+k+v product (carried_rms_norm.h); with rotation (one token),
// also the step's RoPE table.
template <typename T>
void embedding(const T* table, const std::int32_t* ids, int n, int hidden, float* out, cudaStream_t stream,
               const NextRmsNorm<T>& next = {}, const RopeRotationTable& rotation = {});

// out[r, :] = weight ⊙ x[r, :] / sqrt(mean(x[r, :]²) + eps) for each of `rows` rows of length dim.
// OutT is float (out may then equal x: in place) or __nv_bfloat16 (the normed activations that
// feed a bf16 matrix product). Bytes: rows·dim·(4 + sizeof(OutT)) + dim·sizeof(T).
template <typename T, typename OutT>
void rmsnorm(const float* x, const T* weight, int rows, int dim, float eps, OutT* out, cudaStream_t stream);

// In place on q[n, query_heads, head_dim] and k[n, kv_heads, head_dim], per head vector:
//   1. if its norm weight is non-null (Qwen3): v = norm_weight ⊙ v / sqrt(mean(v²) + eps);
//   2. if apply_rope: HF rotate_half RoPE, pairs (i, i + head_dim/2) rotated by the angle
//      positions[token] · inv_freq[i] (formed in float32 as HF and the CPU backend do).
// Llama/Qwen2 pass null norms; mixers that rotate keys themselves pass apply_rope = false.
// positions: device int64[n]; inv_freq: device float[head_dim/2]. head_dim even, ≤ kMaxHeadDim.
// rotation (one token, optional): the step's table of the angles' (sin, cos) (RopeRotationTable),
// read instead of made. keys_in (optional): the keys are read from there, token t's row at
// keys_in + t·keys_in_stride (≥ kv_heads·head_dim: the key columns of a wider product, as
// CudaModel's key product with a mixer's gate rows), and written to k. Bytes: 2·n·(query_heads +
// kv_heads)·head_dim·4.
template <typename T>
void qk_norm_rope(float* q, float* k, const T* q_norm, const T* k_norm, float eps, const std::int64_t* positions,
                  const float* inv_freq, int n, int query_heads, int kv_heads, int head_dim, bool apply_rope,
                  cudaStream_t stream, const float2* rotation = nullptr, const float* keys_in = nullptr,
                  std::int64_t keys_in_stride = 0);

// out[i] = silu(gate[i]) · up[i] = gate[i] / (1 + e^{−gate[i]}) · up[i]. With OutT = float, out may
// equal gate. Bytes: count·(8 + sizeof(OutT)).
template <typename OutT>
void swiglu(const float* gate, const float* up, std::int64_t count, OutT* out, cudaStream_t stream);

// x[i] += y[i]: the residual connection. Bytes: 12·count.
void add_residual(float* x, const float* y, std::int64_t count, cudaStream_t stream);

// out[r, c] += float(bias[c]) over rows × cols (the bias of a cuBLAS prefill product).
template <typename T>
void add_bias(float* out, const T* bias, int rows, int cols, cudaStream_t stream);

// out[i] = T(in[i]) (round to nearest even for bf16): activations into the storage type of the
// weights, for cuBLAS prefill products. Bytes: count·(4 + sizeof(T)).
template <typename T>
void convert(const float* in, T* out, std::int64_t count, cudaStream_t stream);

}  // namespace bifocal::cuda
