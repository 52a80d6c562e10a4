// Device helpers every kernel file shares: storage-type conversions, warp reductions, the
// window visibility rule on device, and the unpacking of one 16-byte load. Device code, so only
// .cu files include it.
#pragma once

#ifndef __CUDACC__
#error "device_math.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace bifocal::cuda::device {

// A generic pointer into shared memory as the shared-window address that cp.async, ldmatrix and
// the other shared-memory PTX take.
__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// Two 16-bit values (bf16 or fp16, T names which) in one 32-bit register, the first in the low
// half — the layout of an mma fragment register and of a 16-byte load's words.
template <typename T>
__device__ __forceinline__ std::uint32_t pack_pair(float low, float high) {
  std::uint32_t bits;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 pair = __floats2half2_rn(low, high);
    bits = *reinterpret_cast<const std::uint32_t*>(&pair);
  } else {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    bits = *reinterpret_cast<const std::uint32_t*>(&pair);
  }
  return bits;
}
template <typename T>
__device__ __forceinline__ float2 unpack_pair(std::uint32_t bits) {
  if constexpr (std::is_same_v<T, __half>) return __half22float2(*reinterpret_cast<const __half2*>(&bits));
  else return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}

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

// Two floats into 2 consecutive elements of T (8 bytes of fp32, 4 of bf16 or fp16), aligned.
template <typename T>
__device__ __forceinline__ void store2(T* dst, float a, float b) {
  if constexpr (std::is_same_v<T, float>) *reinterpret_cast<float2*>(dst) = make_float2(a, b);
  else *reinterpret_cast<std::uint32_t*>(dst) = pack_pair<T>(a, b);
}

// Four floats into 4 consecutive elements of T (16 bytes of fp32, 8 of bf16 or fp16), aligned.
template <typename T>
__device__ __forceinline__ void store4(T* dst, float4 x) {
  if constexpr (std::is_same_v<T, float>) *reinterpret_cast<float4*>(dst) = x;
  else *reinterpret_cast<uint2*>(dst) = make_uint2(pack_pair<T>(x.x, x.y), pack_pair<T>(x.z, x.w));
}

// 4 consecutive elements of T as floats (16 bytes of fp32, 8 of bf16 or fp16), aligned.
template <typename T>
__device__ __forceinline__ float4 load4(const T* src) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float4*>(src);
  } else {
    const uint2 raw = *reinterpret_cast<const uint2*>(src);
    const float2 low = unpack_pair<T>(raw.x), high = unpack_pair<T>(raw.y);
    return make_float4(low.x, low.y, high.x, high.y);
  }
}

// Two floats added into 2 consecutive elements of T in place, aligned, as reductions in L2 (no
// value comes back, so the thread does not wait for it): the sum is rounded to T once. Other
// writers of the same elements at the same time are summed in some order.
template <typename T>
__device__ __forceinline__ void add2(T* dst, float a, float b) {
  if constexpr (std::is_same_v<T, float>) {
    atomicAdd(dst, a);
    atomicAdd(dst + 1, b);
  } else if constexpr (std::is_same_v<T, __half>) {
    asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(dst), "r"(pack_pair<T>(a, b)) : "memory");
  } else {
    asm volatile("red.global.add.noftz.bf16x2 [%0], %1;\n" ::"l"(dst), "r"(pack_pair<T>(a, b)) : "memory");
  }
}

// Bifocal's memory weight o = sigmoid(mix gate) (DESIGN.md bifocal, as mixer/bifocal_mixer.cpp):
// out = o·mLSTM + (1 − o)·window.
__device__ __forceinline__ float bifocal_memory_weight(float mix_gate) { return 1.0f / (1.0f + expf(-mix_gate)); }
// Output row (token, head)'s mix gate pre-activation, from a token's mix gates in rows of `stride`
// and the product's bias (as gemm's add_bias would add it), where the gate rows come without it.
__device__ __forceinline__ float bifocal_mix_gate(const float* mix_gate, int stride, int token, int head,
                                                  const float* bias = nullptr) {
  float pre_activation = mix_gate[std::size_t(token) * stride + head];
  if (bias != nullptr) pre_activation += bias[head];
  return pre_activation;
}
// The window branch's share 1 − o of output row (token, head); 1 without a gate (swa's attention,
// which shares the prefill kernels).
__device__ __forceinline__ float bifocal_window_share(const float* mix_gate, int stride, int token, int head,
                                                     const float* bias = nullptr) {
  if (mix_gate == nullptr) return 1.0f;
  return 1.0f - bifocal_memory_weight(bifocal_mix_gate(mix_gate, stride, token, head, bias));
}

// 16 bytes of T as floats: 8 bf16, 8 fp16 or 4 fp32 (the pointer argument only selects the
// overload).
template <typename T>
__device__ __forceinline__ void unpack16(const uint4& raw, float* out, const T*) {
  static_assert(sizeof(T) == 2, "the 16-bit storage types; fp32 has its own overload");
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = unpack_pair<T>(words[i]);
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
