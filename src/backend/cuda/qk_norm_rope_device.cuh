// The per-head q/k RMSNorm and RoPE of one head vector by one warp (DESIGN.md: Qwen3's q/k norm,
// then rotary position embedding), shared by dense_kernels' qk_norm_rope, the mLSTM decode step and
// the window decode attention that apply it to a raw query and key themselves, so that all give the
// same bits: norm_rope_head, or norm_rope_in_lanes (the window attention's one-round-trip path),
// which does the same operations in the same order (tests/cuda/folded_qk_norm_rope_test.cpp checks
// the folded kernels against qk_norm_rope bit for bit). Device code: include from .cu files only.
#pragma once

#ifndef __CUDACC__
#error "qk_norm_rope_device.cuh holds device code: include it from .cu files only"
#endif

#include "backend/cuda/device_math.cuh"

namespace bifocal::cuda::device {

// (sin, cos) of RoPE's angle i at `position`: angle = position · inv_freq_i in fp32.
__device__ __forceinline__ float2 rotation_at(float position, const float* inv_freq, int i) {
  float s, c;
  sincosf(position * inv_freq[i], &s, &c);
  return make_float2(s, c);
}

// norm_rope_head for d = 32·Elements with Elements even (d = 64, 128, 192, 256): lane l holds
// elements l + 32k, so every RoPE pair (i, i + d/2) is in one lane — no staging — and every load
// (the head, its norm weights, its (sin, cos)) is issued before any is used: one round trip
// instead of three in a chain, which the decode attention's q phase waits for. The same
// operations in the same order as norm_rope_head's general path: the same bits.
template <typename T, int Elements>
__device__ __forceinline__ void norm_rope_in_lanes(const float* in, float* out, const T* norm_weight, float eps,
                                                   float position, const float* inv_freq, float scale,
                                                   const float2* rotation) {
  static_assert(Elements % 2 == 0, "the pairs (i, i + d/2) must fall in one lane");
  constexpr int kPairs = Elements / 2, d = 32 * Elements;
  const int lane = int(threadIdx.x) % 32;
  float value[Elements], weight[Elements];
  float2 sin_cos[kPairs];
  #pragma unroll
  for (int k = 0; k < Elements; ++k) {
    value[k] = in[lane + 32 * k];
    weight[k] = norm_weight != nullptr ? to_float(norm_weight[lane + 32 * k]) : 1.0f;
  }
  #pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int i = lane + 32 * k;
    sin_cos[k] = rotation == nullptr     ? rotation_at(position, inv_freq, i)
                 : __isGlobal(rotation) ? __ldcg(rotation + i)
                                        : rotation[i];
  }
  if (norm_weight != nullptr) {
    float sum_squares = 0.0f;
    #pragma unroll
    for (int k = 0; k < Elements; ++k) sum_squares = fmaf(value[k], value[k], sum_squares);
    const float inverse_rms = 1.0f / sqrtf(warp_sum(sum_squares) / float(d) + eps);
    #pragma unroll
    for (int k = 0; k < Elements; ++k) value[k] = weight[k] * (value[k] * inverse_rms);
  }
  #pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const float s = sin_cos[k].x, c = sin_cos[k].y;
    const float a = value[k], b = value[k + kPairs];
    const float rotated_a = fmaf(a, c, -(b * s)), rotated_b = fmaf(b, c, a * s);
    out[lane + 32 * k] = rotated_a * scale;
    out[lane + 32 * (k + kPairs)] = rotated_b * scale;
  }
  __syncwarp();
}

// out = RoPE(RMSNorm(in) with norm_weight) · scale, RoPE at `position` with frequencies inv_freq
// [d/2]: (a, b) = (v_i, v_{i+d/2}) → (a·cos − b·sin, b·cos + a·sin), angle = position · inv_freq_i.
// No norm when norm_weight is null; no rotation when apply_rope is false. `staged` is d floats of
// shared memory (RoPE pairs element i with i + d/2, another lane's); out may be staged itself or
// in (the whole warp has read in before anything is written). Every lane of the warp calls it.
// The fused multiply-adds are written out (fmaf), not left to the compiler's contraction, which
// may choose differently in different kernels: the same bits wherever this is inlined.
// `rotation`, when given, holds (sin, cos) of every angle, made by rotation_at for this position
// (a block rotating many heads of one token makes them once; a decode step's embedding makes the
// step's table once: dense_kernels.cuh's RopeRotationTable); otherwise each lane makes its own. A
// table in global memory is read through L2 (kernels read it before their wait for the previous
// kernel: dependent_launch.h).
template <typename T>
__device__ void norm_rope_head(const float* in, float* staged, float* out, const T* norm_weight, float eps,
                               bool apply_rope, float position, const float* inv_freq, int d, float scale,
                               const float2* rotation = nullptr) {
  const int lane = int(threadIdx.x) % 32;
  float sum_squares = 0.0f;
  for (int i = lane; i < d; i += 32) {
    const float value = in[i];
    staged[i] = value;
    sum_squares = fmaf(value, value, sum_squares);
  }
  if (norm_weight != nullptr) {
    const float inverse_rms = 1.0f / sqrtf(warp_sum(sum_squares) / float(d) + eps);
    for (int i = lane; i < d; i += 32) staged[i] = to_float(norm_weight[i]) * (staged[i] * inverse_rms);
  }
  __syncwarp();
  if (!apply_rope) {
    for (int i = lane; i < d; i += 32) out[i] = staged[i] * scale;
    return;
  }
  const int half = d / 2;
  for (int i = lane; i < half; i += 32) {
    const float2 sin_cos = rotation == nullptr     ? rotation_at(position, inv_freq, i)
                           : __isGlobal(rotation) ? __ldcg(rotation + i)
                                                  : rotation[i];
    const float s = sin_cos.x, c = sin_cos.y;
    const float a = staged[i], b = staged[i + half];
    const float rotated_a = fmaf(a, c, -(b * s)), rotated_b = fmaf(b, c, a * s);
    out[i] = rotated_a * scale;
    out[i + half] = rotated_b * scale;
  }
  __syncwarp();
}

// norm_rope_head with RoPE (apply_rope) reading `in` from global memory, in one round trip where
// d allows it (norm_rope_in_lanes: d = 64, 128, 192, 256), the general path otherwise; the same
// bits either way. For a kernel that waits on these loads (the decode window attention's q phase:
// +1.0% a Qwen3-4B and +0.5% a Qwen3.5-like swa decode step, stop 38). Not for a head already in
// shared memory, whose loads are short: there the registers it holds cost more (Bifocal's mLSTM
// step, d = 256: −0.9%).
template <typename T>
__device__ void norm_rope_head_one_round_trip(const float* in, float* staged, float* out, const T* norm_weight,
                                              float eps, float position, const float* inv_freq, int d, float scale,
                                              const float2* rotation = nullptr) {
  switch (d) {
    case 64: return norm_rope_in_lanes<T, 2>(in, out, norm_weight, eps, position, inv_freq, scale, rotation);
    case 128: return norm_rope_in_lanes<T, 4>(in, out, norm_weight, eps, position, inv_freq, scale, rotation);
    case 192: return norm_rope_in_lanes<T, 6>(in, out, norm_weight, eps, position, inv_freq, scale, rotation);
    case 256: return norm_rope_in_lanes<T, 8>(in, out, norm_weight, eps, position, inv_freq, scale, rotation);
    default: return norm_rope_head(in, staged, out, norm_weight, eps, true, position, inv_freq, d, scale, rotation);
  }
}

}  // namespace bifocal::cuda::device
