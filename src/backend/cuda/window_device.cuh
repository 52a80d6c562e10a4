// Device-side softmax attention of a few query heads over a window of cached keys, the window
// branch of LoLCATs (DESIGN.md lolcats, swa). One block computes the
// unnormalised softmax state of its share of the window's rows — per query head the row max m,
// Σ e^{s_j − m} and Σ e^{s_j − m} v_j, s_j = q·k_j/√d — and window_total() merges such partials
// (of the blocks of a cluster, or of one block) to a common max. DEVICE CODE: include from .cu
// files only.
//
// Rows are read 8 elements (16 bytes of bf16 or fp16, 32 of fp32) per lane; a power of two of lanes ≥ d/8
// shares one row, so dot products reduce with xor shuffles inside aligned lane groups. head_dim
// must be a multiple of 8 and at most 256.
#pragma once

#ifndef __CUDACC__
#error "window_device.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/recurrent_device.cuh"

namespace bifocal::cuda::device {

// Query heads one window pass keeps in registers (more take several passes over the rows).
inline constexpr int kWindowHeads = 8;
// Rows each lane group loads before it computes (4 keys + 4 values in flight per lane): with
// 16 groups a block covers 64 rows per round trip to memory.
inline constexpr int kWindowRowsInFlight = 4;
// Most partials window_total() merges (the cluster size limit).
inline constexpr int kMaxPartials = 8;

// The lanes of a block laid over rows of d elements, 8 elements per lane.
struct RowLanes {
  int lanes_per_row;  // a power of two ≥ d/8, ≤ 32
  int rows_at_once;   // blockDim.x / lanes_per_row
  int row;            // this thread's row group
  int part;           // this thread's 8 elements: [8·part, 8·part + 8); active when part < d/8
  bool active;
};

__host__ __device__ constexpr int lanes_per_row(int d) {
  int lanes = 1;
  while (lanes * 8 < d) lanes *= 2;
  return lanes;
}

__device__ inline RowLanes row_lanes(int d) {
  const int lanes = lanes_per_row(d);
  const int part = threadIdx.x % lanes;
  return {lanes, int(blockDim.x) / lanes, int(threadIdx.x) / lanes, part, part * 8 < d};
}

// Σ over the lanes of one row group (all lanes of the warp take part; the sum lands on each).
__device__ inline float row_group_sum(float x, int lanes) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// 8 consecutive elements as floats; p is 16-byte aligned (32 for fp32).
template <typename T>
__device__ inline void load8(const T* p, float* out) {
  device::unpack16(*reinterpret_cast<const uint4*>(p), out, p);  // bf16 or fp16
}
__device__ inline void load8(const float* p, float* out) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

// The value a T cache keeps of x (the window reads a new token's fp32 key as the cache holds it).
template <typename T>
__device__ inline float stored_as(float x) {
  return device::to_float(device::from_float<T>(x));
}
template <typename T>
__device__ inline T to_storage(float x) {
  return device::from_float<T>(x);
}

// One block's softmax state over its rows, per query head, in shared memory (the same offsets in
// every block of a cluster, so that a block can read another's through map_shared_rank):
// max [heads], sum [heads], acc [heads, d]; relative to its own max, −∞ where it saw no row.
struct WindowPartial {
  float* max;
  float* sum;
  float* acc;
};

// Shared-memory floats window_partial() needs as scratch: per warp a max and a sum per head, and
// two buffers of one warp-summed accumulator row per warp.
__host__ __device__ constexpr int window_scratch_floats(int d, int threads) {
  const int warps = threads / 32;
  return 2 * warps * kWindowHeads + 2 * warps * lanes_per_row(d) * 8;
}

// e^{m − reference}, 0 for a partial that saw nothing (m = −∞).
__device__ inline float rescale(float m, float reference) { return m == -INFINITY ? 0.0f : expf(m - reference); }

// The partial of rows [begin, end) for query heads [0, heads): queries [heads, d] (raw q, in
// shared memory). `rows` provides
//   bool visible(int j)                          whether row j takes part
//   void load_key(int j, int offset, float* k8)  elements [offset, offset + 8) of key j
//   void load_value(int j, int offset, float* v8)
// Each lane group walks its rows with the online-softmax recurrence (cpu::OnlineSoftmax); the
// groups are then merged by warp shuffles and shared memory (a fixed order: deterministic).
// Ends with __syncthreads().
//
// HEADS: the query heads one pass over the rows holds in registers (at most kWindowHeads). A
// caller whose group is smaller asks for fewer: each head's accumulator is 8 registers, and at the
// default 8 a 256-thread block needs 224 registers a thread, one block a multiprocessor.
template <int HEADS = kWindowHeads, typename Rows>
__device__ void window_partial(const Rows& rows, int begin, int end, const float* queries, int heads, int d,
                               WindowPartial out, float* scratch) {
  static_assert(HEADS >= 1 && HEADS <= kWindowHeads, "the scratch holds kWindowHeads heads a warp");
  const RowLanes lanes = row_lanes(d);
  const float scale = 1.0f / sqrtf(float(d));  // s_j = q·k_j / √d
  const int row_floats = lanes.lanes_per_row * 8;

  for (int first = 0; first < heads; first += HEADS) {
    const int count = min(HEADS, heads - first);
    float m[HEADS], l[HEADS], acc[HEADS][8];
    #pragma unroll
    for (int g = 0; g < HEADS; ++g) {
      m[g] = -INFINITY;
      l[g] = 0.0f;
      #pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
    }

    // The loop bounds are the same for every thread, so every lane reaches every shuffle.
    for (int base = begin; base < end; base += lanes.rows_at_once * kWindowRowsInFlight) {
      float key[kWindowRowsInFlight][8], value[kWindowRowsInFlight][8];
      bool seen[kWindowRowsInFlight];
      // The row loads do not wait for visible() (a second memory round trip): an invisible row,
      // possibly an empty slot holding garbage, is loaded and then never added.
      #pragma unroll
      for (int u = 0; u < kWindowRowsInFlight; ++u) {
        const int j = base + u * lanes.rows_at_once + lanes.row;
        if (j < end && lanes.active) {
          rows.load_key(j, lanes.part * 8, key[u]);
          rows.load_value(j, lanes.part * 8, value[u]);
        } else {
          #pragma unroll
          for (int e = 0; e < 8; ++e) key[u][e] = value[u][e] = 0.0f;
        }
        seen[u] = j < end && rows.visible(j);
      }
      #pragma unroll
      for (int u = 0; u < kWindowRowsInFlight; ++u) {
        #pragma unroll
        for (int g = 0; g < HEADS; ++g) {
          if (g >= count) break;
          float dot = 0.0f;
          if (lanes.active) {
            const float* q = queries + (first + g) * d + lanes.part * 8;
            #pragma unroll
            for (int e = 0; e < 8; ++e) dot = fmaf(q[e], key[u][e], dot);
          }
          dot = row_group_sum(dot, lanes.lanes_per_row);
          if (!seen[u]) continue;  // the same on every lane of the group; a NaN dot stops here
          // Online softmax: rescale to the new max, then add e^{s − m} and e^{s − m}·v.
          const float s = dot * scale;
          const float new_max = fmaxf(m[g], s);
          const float correction = expf(m[g] - new_max);  // m = −∞ gives 0
          const float p = expf(s - new_max);
          l[g] = fmaf(l[g], correction, p);
          #pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(acc[g][e], correction, p * value[u][e]);
          m[g] = new_max;
        }
      }
    }

    // Merge the row groups: the block max, then every group's terms rescaled to it and summed —
    // first inside each warp by xor shuffles (its groups are lanes_per_row lanes apart), then over
    // the warps in shared memory, one head at a time through two alternating buffers.
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32, warp_lane = threadIdx.x % 32;
    float* warp_max = scratch;                                 // [warps, kWindowHeads]
    float* warp_sum = warp_max + warps * kWindowHeads;         // [warps, kWindowHeads]
    float* merge = warp_sum + warps * kWindowHeads;            // [2][warps, row_floats]
    #pragma unroll
    for (int g = 0; g < HEADS; ++g) {
      if (g >= count) break;
      float mw = m[g];
      for (int offset = lanes.lanes_per_row; offset < 32; offset *= 2)
        mw = fmaxf(mw, __shfl_xor_sync(0xffffffffu, mw, offset));
      if (warp_lane == 0) warp_max[warp * kWindowHeads + g] = mw;
    }
    __syncthreads();
    #pragma unroll
    for (int g = 0; g < HEADS; ++g) {
      if (g >= count) break;
      float block_max = -INFINITY;
      for (int w = 0; w < warps; ++w) block_max = fmaxf(block_max, warp_max[w * kWindowHeads + g]);
      const float factor = rescale(m[g], block_max);
      float l_sum = l[g] * factor;
      #pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= factor;
      for (int offset = lanes.lanes_per_row; offset < 32; offset *= 2) {
        l_sum += __shfl_xor_sync(0xffffffffu, l_sum, offset);
        #pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], offset);
      }
      if (warp_lane == 0) warp_sum[warp * kWindowHeads + g] = l_sum;
      if (threadIdx.x == 0) out.max[first + g] = block_max;
    }
    #pragma unroll
    for (int g = 0; g < HEADS; ++g) {
      if (g >= count) break;
      float* buffer = merge + (g % 2) * warps * row_floats;
      if (warp_lane < lanes.lanes_per_row && lanes.active)
        #pragma unroll
        for (int e = 0; e < 8; ++e) buffer[warp * row_floats + lanes.part * 8 + e] = acc[g][e];
      __syncthreads();  // (head g − 1's barrier ordered the reads of head g − 2, same buffer, before these writes)
      for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float sum = 0.0f;
        for (int w = 0; w < warps; ++w) sum += buffer[w * row_floats + c];
        out.acc[(first + g) * d + c] = sum;
      }
      if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int w = 0; w < warps; ++w) sum += warp_sum[w * kWindowHeads + g];
        out.sum[first + g] = sum;
      }
    }
    __syncthreads();
  }
}

// The ranks' row max and Σ e^{s − m} of every head, copied from the partials (possibly other
// blocks' shared memory) into this block's shared memory in one round trip: stats_max and
// stats_sum [partials, heads]. Ends with __syncthreads().
template <typename PartialOf>
__device__ void gather_window_stats(const PartialOf& partial_of, int partials, int heads, float* stats_max,
                                    float* stats_sum) {
  for (int i = threadIdx.x; i < partials * heads; i += blockDim.x) {
    const WindowPartial p = partial_of(i / heads);
    stats_max[i] = p.max[i % heads];
    stats_sum[i] = p.sum[i % heads];
  }
  __syncthreads();
}

// The window's two sums for query head `head`, column `col`, merged over `partials` partials
// (partial_of(r) gives the r-th WindowPartial, possibly another block's shared memory) at their
// common max m = max(max_r m_r, sink_logit):
//   numerator = Σ_j e^{s_j − m} v_j[col],  denominator = Σ_j e^{s_j − m} (+ e^{S_h − m}).
// sink_logit: the gpt-oss learned sink S_h (DESIGN.md: not scaled by 1/√d, denominator only), or
// −∞ for none. m is then the window row max that LoLCATs subtracts (no sink there).
struct WindowSums {
  float numerator, denominator;
};

template <typename PartialOf>
__device__ inline WindowSums window_total(const PartialOf& partial_of, int partials, const float* stats_max,
                                          const float* stats_sum, int heads, int head, int col, int d,
                                          float sink_logit) {
  // The accumulators first, all loads issued before any is used (remote loads are slow).
  float acc[kMaxPartials];
  #pragma unroll
  for (int r = 0; r < kMaxPartials; ++r) acc[r] = r < partials ? partial_of(r).acc[head * d + col] : 0.0f;
  float common_max = sink_logit;
  for (int r = 0; r < partials; ++r) common_max = fmaxf(common_max, stats_max[r * heads + head]);
  WindowSums sums{0.0f, sink_logit == -INFINITY ? 0.0f : expf(sink_logit - common_max)};
  #pragma unroll
  for (int r = 0; r < kMaxPartials; ++r) {
    if (r >= partials) break;
    const float factor = rescale(stats_max[r * heads + head], common_max);
    sums.numerator += acc[r] * factor;
    sums.denominator += stats_sum[r * heads + head] * factor;
  }
  return sums;
}

}  // namespace bifocal::cuda::device
