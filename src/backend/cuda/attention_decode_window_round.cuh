// The window decode kernel's round on SIMT lanes (attention_decode_window.cu, which has the cost
// model): the staging copies of a block's slots, the base-2 logits of the staged keys for the
// GROUP heads, the round's softmax step and P·V into per-lane accumulators. Device code, so only
// attention_decode_window.cu includes it; its constants are the kernel's launch shape.
#pragma once

#ifndef __CUDACC__
#error "attention_decode_window_round.cuh holds device code: include it from .cu files only"
#endif

#include <cmath>
#include <cstdint>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/device_math.cuh"

namespace bifocal::cuda::window_decode {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kDotsPerBatch = 8;     // dot products reduced together: 8/G rows × G heads
inline constexpr int kElementsPerLane = 8;  // one 16-byte bf16 chunk (two fp32 chunks) of a row per lane

using device::copy16_async_zero_fill;
using device::copy8_async;

// 8 consecutive elements of a staged row (16-byte aligned) as floats. device::load8
// (window_device.cuh) does the same from a typed pointer, but called here it compiles to other
// PTX: some of the bf16 rows' 16-byte shared loads become 8-byte ones (stop 33, nvcc 13), so the
// round keeps its byte-pointer version.
template <typename T>
__device__ __forceinline__ void load8_shared(const unsigned char* p, float* out) {
  const uint4* chunks = reinterpret_cast<const uint4*>(p);
  if constexpr (sizeof(T) == 2) {
    const uint4 raw = chunks[0];  // one 16-byte shared load, then registers
    device::unpack16(raw, out, static_cast<const T*>(nullptr));
  } else {
    device::unpack16(chunks[0], out, static_cast<const float*>(nullptr));
    device::unpack16(chunks[1], out + 4, static_cast<const float*>(nullptr));
  }
}

// The block's threads laid over staged rows: `lanes` (a power of two ≥ d/8, ≤ 32) lanes share a
// row, lane `part` holding elements [8·part, 8·part + 8); `groups` rows at once.
struct RowLanes {
  int lanes, groups, group, part;
  bool active;  // 8·part < d
};

__device__ inline RowLanes row_lanes(int d) {
  int lanes = 1;
  while (lanes * kElementsPerLane < d) lanes *= 2;
  const int part = int(threadIdx.x) % lanes;
  return {lanes, kThreads / lanes, int(threadIdx.x) / lanes, part, part * kElementsPerLane < d};
}

// Which of the kDotsPerBatch sums a lane holds after reduce_dots: [first, first + count), the
// same on the lanes that differ only in the bits below `writer`'s; one of them writes.
struct HeldDots {
  int first, count;
  bool writer;
};

// Sums each of the kDotsPerBatch values over the `lanes` lanes of a row: a butterfly that at each
// step keeps half of the values (the half selected by this lane's bit) and sends the other half,
// so the step count and the values sent halve together — 8 shuffles for 8 values over 16 lanes,
// where a butterfly per value takes 32. Every lane of the warp takes part.
__device__ inline HeldDots reduce_dots(float (&v)[kDotsPerBatch], int lanes, int part) {
  int offset = lanes / 2, first = 0, count = kDotsPerBatch;
  #pragma unroll
  for (int n = kDotsPerBatch; n > 1; n /= 2) {
    if (offset == 0) break;
    const bool upper = (part & offset) != 0;
    #pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = upper ? v[i] : v[i + n / 2], keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
    if (upper) first += n / 2;
    count = n / 2;
    offset /= 2;
  }
  const int shared_bits = offset > 0 ? 2 * offset - 1 : 0;  // lanes that end with the same value
  for (; offset > 0; offset /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], offset);
  return {first, count, (part & shared_bits) == 0};
}

// Copies slots [first, first + count) of the block's KV head into a stage: key and value rows
// (16-byte chunks spread over the threads) and a ring's positions. A linear cache's slots the
// window hides are zero-filled without a read.
template <typename T>
__device__ void stage_slots(const DecodeAttentionArgs<T>& a, const T* keys, const T* values, std::int64_t first,
                            int count, std::int64_t position, int pitch, unsigned char* stage_keys,
                            unsigned char* stage_values, std::int64_t* stage_positions) {
  constexpr int VEC = 16 / int(sizeof(T));
  const bool ring = a.slot_positions != nullptr;
  const int chunks = a.head_dim / VEC;
  const std::int64_t row_stride = std::int64_t(a.kv_heads) * a.head_dim;
  for (int i = threadIdx.x; i < count * chunks; i += kThreads) {
    const int row = i / chunks, chunk = i % chunks;
    const std::int64_t slot = first + row;
    const bool read = ring || a.window == 0 || device::key_visible(position, slot, a.window, a.sink_tokens);
    const std::int64_t offset = read ? slot * row_stride + chunk * VEC : 0;
    copy16_async_zero_fill(stage_keys + row * pitch + 16 * chunk, keys + offset, read ? 16 : 0);
    copy16_async_zero_fill(stage_values + row * pitch + 16 * chunk, values + offset, read ? 16 : 0);
  }
  if (ring)
    for (int i = threadIdx.x; i < count; i += kThreads) copy8_async(stage_positions + i, a.slot_positions + first + i);
}

// The base-2 logits of a stage's rows for the GROUP heads (−∞ where a row is hidden: a select,
// as a hidden row may hold NaN) into logits[row, GROUP], visibility into flags[row].
template <typename T, int GROUP>
__device__ void stage_logits(const DecodeAttentionArgs<T>& a, const unsigned char* stage_keys,
                             const std::int64_t* stage_positions, std::int64_t first, int count,
                             std::int64_t position, int pitch, const float* q_shared, const RowLanes& lanes,
                             float* logits, unsigned char* flags) {
  constexpr int ROWS = kDotsPerBatch / GROUP;  // rows of one batch per row group
  const int d = a.head_dim;
  float q[GROUP][kElementsPerLane];
  #pragma unroll
  for (int g = 0; g < GROUP; ++g)
    #pragma unroll
    for (int e = 0; e < kElementsPerLane; ++e)
      q[g][e] = lanes.active ? q_shared[g * d + lanes.part * kElementsPerLane + e] : 0.0f;
  const int batch_rows = lanes.groups * ROWS;
  for (int base = 0; base < count; base += batch_rows) {  // the same bound on every thread
    float dots[kDotsPerBatch];
    #pragma unroll
    for (int u = 0; u < ROWS; ++u) {
      const int row = base + u * lanes.groups + lanes.group;
      float k[kElementsPerLane] = {};
      if (row < count && lanes.active)
        load8_shared<T>(stage_keys + row * pitch + lanes.part * kElementsPerLane * int(sizeof(T)), k);
      #pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        float low = 0.0f, high = 0.0f;  // two chains: half the FMA latency
        #pragma unroll
        for (int e = 0; e < kElementsPerLane; e += 2) {
          low = fmaf(q[g][e], k[e], low);
          high = fmaf(q[g][e + 1], k[e + 1], high);
        }
        dots[u * GROUP + g] = low + high;
      }
    }
    const HeldDots held = reduce_dots(dots, lanes.lanes, lanes.part);
    #pragma unroll
    for (int j = 0; j < kDotsPerBatch; ++j) {
      if (j >= held.count || !held.writer) break;
      const int index = held.first + j, g = index % GROUP;
      const int row = base + (index / GROUP) * lanes.groups + lanes.group;
      if (row >= count) continue;
      const std::int64_t key_position = stage_positions != nullptr ? stage_positions[row] : first + row;
      const bool visible = device::key_visible(position, key_position, a.window, a.sink_tokens);
      logits[row * GROUP + g] = visible ? dots[j] : -INFINITY;
      if (g == 0) flags[row] = visible;
    }
  }
}

// One round's softmax step, a warp per head: the round max m_r, the new running max
// M = max(M, m_r), the weights e^{s − M} in place of the logits, the running Σ rescaled by
// correction = e^{M_old − M} (also applied to the accumulators) plus the round's weights.
template <int GROUP>
__device__ void softmax_round(float* logits, int count, float* running_max, float* running_sum, float* correction) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int g = warp; g < GROUP; g += kWarps) {
    float top = -INFINITY;
    for (int row = lane; row < count; row += 32) top = fmaxf(top, logits[row * GROUP + g]);
    const float old_max = running_max[g], new_max = fmaxf(old_max, device::warp_max(top));
    const float shift = new_max == -INFINITY ? 0.0f : new_max;  // keeps e^{−∞ − shift} = 0
    float sum = 0.0f;
    for (int row = lane; row < count; row += 32) {
      const float weight = exp2f(logits[row * GROUP + g] - shift);
      logits[row * GROUP + g] = weight;
      sum += weight;
    }
    sum = device::warp_sum(sum);
    __syncwarp();  // every lane has read running_max
    if (lane == 0) {
      const float factor = exp2f(old_max - shift);
      correction[g] = factor;
      running_sum[g] = running_sum[g] * factor + sum;
      running_max[g] = new_max;
    }
  }
}

// acc[g][·] = acc·correction_g + Σ_rows w_g(row) · v_row over this row group's visible rows
// (hidden rows are skipped, never multiplied: their values may be NaN).
template <typename T, int GROUP>
__device__ void accumulate_values(const unsigned char* stage_values, const float* weights, const unsigned char* flags,
                                  int count, int pitch, const float* correction, const RowLanes& lanes,
                                  float (&acc)[GROUP][kElementsPerLane]) {
  #pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    const float factor = correction[g];
    #pragma unroll
    for (int e = 0; e < kElementsPerLane; ++e) acc[g][e] *= factor;
  }
  if (!lanes.active) return;
  #pragma unroll 2
  for (int row = lanes.group; row < count; row += lanes.groups) {
    if (!flags[row]) continue;
    float v[kElementsPerLane];
    load8_shared<T>(stage_values + row * pitch + lanes.part * kElementsPerLane * int(sizeof(T)), v);
    #pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      const float weight = weights[row * GROUP + g];
      #pragma unroll
      for (int e = 0; e < kElementsPerLane; ++e) acc[g][e] = fmaf(weight, v[e], acc[g][e]);
    }
  }
}

}  // namespace bifocal::cuda::window_decode
