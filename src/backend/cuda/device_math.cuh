// Device helpers every kernel file shares: storage-type conversions, warp reductions, the
// window visibility rule on device, and the unpacking of one 16-byte load. Device code, so only
// .cu files include it.
#pragma once

#ifndef __CUDACC__
#error "device_math.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>

#include <cstdint>

namespace bifocal::cuda::device {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Butterfly reductions over the 32 lanes of a warp: every lane ends with the result.
__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float warp_min(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fminf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// backend.h's key_visible, plus "an empty slot (position −1) is never visible".
__device__ __forceinline__ bool key_visible(std::int64_t p, std::int64_t kp, int window, int sink_tokens) {
  if (kp < 0 || kp > p) return false;
  if (window == 0 || kp < sink_tokens) return true;
  return p - kp < window - sink_tokens;
}

// 16 bytes of T as floats: 8 bf16 or 4 fp32 (the pointer argument only selects the overload).
__device__ __forceinline__ void unpack16(const uint4& raw, float* out, const __nv_bfloat16*) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void unpack16(const uint4& raw, float* out, const float*) {
  out[0] = __uint_as_float(raw.x);
  out[1] = __uint_as_float(raw.y);
  out[2] = __uint_as_float(raw.z);
  out[3] = __uint_as_float(raw.w);
}

}  // namespace bifocal::cuda::device
