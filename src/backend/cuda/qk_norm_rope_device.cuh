// The per-head q/k RMSNorm and RoPE of one head vector by one warp (DESIGN.md: Qwen3's q/k norm,
// then rotary position embedding), shared by dense_kernels' qk_norm_rope and by the window decode
// attention that applies it to a raw query and key itself (attention_decode_window.cu), so the two
// give the same bits. Device code: include from .cu files only.
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

}  // namespace bifocal::cuda::device
