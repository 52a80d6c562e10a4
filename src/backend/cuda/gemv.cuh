// Matrix–vector products for decode (one token): the bandwidth-critical kernels of the engine.
// At batch 1 every weight byte is read once per token and used for one multiply-add, so a decode
// step can go no faster than (all weight bytes) / (memory bandwidth): 8.05 GB per token for
// Qwen3-4B in bf16, 1.9 ms at the H200's measured 4.3 TB/s (DESIGN.md "Measuring"). These kernels
// are written to stream W at that rate: 16-byte loads, several in flight per lane, one row (of
// one or two matrices) per warp, fp32 accumulation, warp-shuffle reductions.
//
// Measured on the H200 (bf16 W, 200 launches in one CUDA graph, W cycled through 2 GB so it
// never sits in L2; ranges over x fp32 / bf16 and runs):
//   q 4096×2560      6.7–8.3 µs  (2.5–3.1 TB/s)   k or v 1024×2560   4.0–4.4 µs (1.2–1.3 TB/s)
//   q+k+v shared     9.3–10.7 µs (2.9–3.4 TB/s)   o 2560×4096        6.6–8.1 µs (2.6–3.2 TB/s)
//   gate+up 2×9728×2560  25–27 µs (3.6–4.0 TB/s)  down 2560×9728     14.4–18 µs (2.7–3.5 TB/s)
//   LM head 151936×2560  175–196 µs (4.0–4.4 TB/s)
//   a whole decode's products (36 layers with q+k+v shared, one rmsnorm each, + LM head):
//   2.35 ms per token = 3.4 TB/s, 80 % of the 4.3 TB/s roofline (1.87 ms).
// Small products pay a fixed ~2–3 µs per launch (ramp-up and drain), which is why the q/k/v
// projections should go through one gemv_shared_input launch rather than three (−0.2 ms/token).
// The kernels are launched as programmatic dependents (gemv.cu: they start streaming W while the
// previous kernel drains and wait for it before reading x; −1–2 % per token).
//
// Bytes moved per call (the roofline a benchmark should divide by):
//   gemv:                 m·k·sizeof(T) + k·sizeof(XT) + m·4 (+ m·4 read when accumulate,
//                         + m·sizeof(T) with a bias); gemv_shared_input: the sum over its products
//   gate_up_swiglu_gemv:  2·m·k·sizeof(T) + k·sizeof(XT) + m·sizeof(OutT)
//   with RmsNormedInput:  the input is k·sizeof(T) + ceil(k/8)·4 (+ k·(4 + 2·sizeof(T)) when the
//                         normalised vector is written); the NextRmsNorm writer adds m·sizeof(T)
//                         (g) + m·sizeof(T) + ceil(m/8)·4
// Qwen3-4B, bf16, per layer: q 4096×2560, k and v 1024×2560, o 2560×4096, gate and up
// 9728×2560 (fused here), down 2560×9728; LM head 151936×2560 (778 MB, the largest single read).
//
// Layout: W is row-major [m, k], torch's Linear layout (row j holds output j's k weights).
// T is the storage type (__nv_bfloat16, __half, or float for the `--dtype fp32` test path); XT,
// the type of the input vector, is float or a 16-bit type (T's own; bf16 for fp32 T). Raw device
// pointers, the caller's stream, no allocation, no synchronisation: safe to capture in a CUDA
// graph (tested: a captured chain of dependent products). Any k works; 16-byte loads are used
// when k % 8 == 0 and W and x are 16-byte aligned (every real model), a scalar loop otherwise.
// Ordering: launched as programmatic dependents, under dependent_launch.h's contract.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <span>

#include "backend/cuda/carried_rms_norm.h"

namespace bifocal::cuda {

// out[j] = Σ_c W[j, c] · x[c] + bias[j] (bias may be null), for j < m. With accumulate,
// out[j] += that instead (fuses the residual add of o_proj and down_proj: out is the residual
// stream, as in the CPU backend's matmul followed by add). out must not overlap W, x or bias.
template <typename T, typename XT>
void gemv(const T* weight, const XT* x, const T* bias, int m, int k, float* out, bool accumulate, cudaStream_t stream);

// One product of gemv_shared_input: out[j] (+)= Σ_c weight[j, c] · x[c] + bias[j], j < m.
template <typename T>
struct GemvProduct {
  const T* weight;  // [m, k]
  const T* bias;    // [m] or null
  int m;
  float* out;       // [m]
};

// Up to kMaxSharedInputProducts products of the same x and k in one launch: a layer's q, k and
// v projections (Qwen2 with their biases), whose separate launches would each pay the fixed
// ramp-up of a small kernel. Same contract as gemv for each product; accumulate applies to all.
inline constexpr int kMaxSharedInputProducts = 4;
template <typename T, typename XT>
void gemv_shared_input(std::span<const GemvProduct<T>> products, const XT* x, int k, bool accumulate,
                       cudaStream_t stream);

// The products of rmsnorm(residual) with the norm carried in (carried_rms_norm.h): the input is
// the scaled residual g ⊙ x and its group sums of squares, written by the residual's writer.
template <typename T>
void gemv_shared_input(std::span<const GemvProduct<T>> products, const RmsNormedInput<T>& input, int k,
                       bool accumulate, cudaStream_t stream);

// The residual's writer (o_proj, down_proj): out (the residual) += W·x + bias, and next.scaled and
// next.group_squares of the new residual (carried_rms_norm.h). One product, so that a block's 8
// rows are one group.
template <typename T, typename XT>
void gemv_accumulate_for_norm(const T* weight, const XT* x, const T* bias, int m, int k, float* out,
                              const NextRmsNorm<T>& next, cudaStream_t stream);

// out[j] = silu(g_j) · u_j with g = W_gate · x and u = W_up · x (both [m, k]): the SwiGLU
// feed-forward's first half, without the intermediate g and u ever reaching memory.
// silu(g) = g / (1 + e^{−g}), as the CPU backend's swiglu. OutT is float or a 16-bit type (the
// input of the down projection).
template <typename T, typename XT, typename OutT>
void gate_up_swiglu_gemv(const T* gate_weight, const T* up_weight, const XT* x, int m, int k, OutT* out,
                         cudaStream_t stream);

// The same with x = rmsnorm(residual) carried in (RmsNormedInput).
template <typename T, typename OutT>
void gate_up_swiglu_gemv(const T* gate_weight, const T* up_weight, const RmsNormedInput<T>& input, int m, int k,
                         OutT* out, cudaStream_t stream);

}  // namespace bifocal::cuda
