// The fused-MLP variant of tools/cuda/persistent_chain_probe.cu: three launches a layer instead of
// four. The MLP needs no barrier between gate/up and down if it is split over the intermediate
// (split-K for the down projection): block b takes intermediate rows [b·I/B, (b+1)·I/B), their
// gate and up rows (dot products with x, SwiGLU into shared memory), then the same rows of W_downᵀ
// — the down projection's columns for that slice, stored transposed so that they are contiguous —
// each thread accumulating 8-column groups of the output, added into `out` by atomics. No block
// waits for another inside the MLP; the price is B × 2,560 atomic adds a layer.
#pragma once

#include "chain_probe_common.cuh"

namespace chain_probe {

constexpr int kIntermediate = 9728;
constexpr int kRowChunks = kHidden / 8;                              // 16-byte chunks of a 2,560-wide row
constexpr int kGateUpLoads = kRowChunks / 32;                        // a lane's chunks of one gate/up row
constexpr int kDownParts = (kRowChunks + kThreads - 1) / kThreads;  // a thread's chunks of one W_downᵀ row
constexpr int kMlpMaxRows = 80;                                      // intermediate rows a block (≥ 9728 / 132)

static_assert(kRowChunks % 32 == 0, "gate/up rows are dealt out 32 chunks at a time");

// gate_up_first: the gate rows [0, I) then the up rows [I, 2I), each kRowChunks chunks;
// down_first: W_downᵀ's I rows of kRowChunks chunks. `in` holds in_count values (rebuild_x).
__global__ void __launch_bounds__(kThreads)
    fused_mlp(const uint4* weights, std::int64_t gate_up_first, std::int64_t down_first, const float* in,
              int in_count, float* out) {
  __shared__ float x[kHidden];
  __shared__ float gate_up[2 * kMlpMaxRows];
  __shared__ float h[kMlpMaxRows];
  cudaTriggerProgrammaticLaunchCompletion();
  const int first_row = kIntermediate * blockIdx.x / gridDim.x;
  const int rows = kIntermediate * (blockIdx.x + 1) / gridDim.x - first_row;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  cudaGridDependencySynchronize();
  rebuild_x(in, in_count, x);

  // Gate and up rows: a warp a row, every lane kGateUpLoads chunks in flight.
  for (int item = warp; item < 2 * rows; item += kThreads / 32) {
    const std::int64_t row = item < rows ? first_row + item : kIntermediate + first_row + (item - rows);
    const uint4* source = weights + gate_up_first + row * kRowChunks;
    uint4 raw[kGateUpLoads];
#pragma unroll
    for (int j = 0; j < kGateUpLoads; ++j) raw[j] = __ldcs(source + lane + 32 * j);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kGateUpLoads; ++j) sum += dot8(raw[j], x, lane + 32 * j);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) gate_up[item] = sum;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    const float g = gate_up[threadIdx.x], u = gate_up[rows + threadIdx.x];
    h[threadIdx.x] = g / (1.0f + expf(-g)) * u;
  }
  __syncthreads();

  // W_downᵀ rows of the slice: thread t owns output columns 8c … 8c+7 for c = t, t + kThreads, …
  float acc[kDownParts][8] = {};
#pragma unroll 4
  for (int r = 0; r < rows; ++r) {
    const uint4* source = weights + down_first + std::int64_t(first_row + r) * kRowChunks;
    const float weight = h[r];
#pragma unroll
    for (int part = 0; part < kDownParts; ++part) {
      const int c = threadIdx.x + part * kThreads;
      if (c >= kRowChunks) continue;
      const uint4 raw = __ldcs(source + c);
      const __nv_bfloat162* pair = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(pair[k]);
        acc[part][2 * k] = fmaf(weight, f.x, acc[part][2 * k]);
        acc[part][2 * k + 1] = fmaf(weight, f.y, acc[part][2 * k + 1]);
      }
    }
  }
#pragma unroll
  for (int part = 0; part < kDownParts; ++part) {
    const int c = threadIdx.x + part * kThreads;
    if (c >= kRowChunks) continue;
#pragma unroll
    for (int k = 0; k < 8; ++k) atomicAdd(out + 8 * c + k, acc[part][k]);
  }
}

}  // namespace chain_probe
