// The pipelined variant of tools/cuda/persistent_chain_probe.cu's launch chain: each warp issues
// the loads of its next step before it sums the step it holds, so that a lane has weights in flight
// while it computes, not only between steps (one_product loads a step, then sums it).
//
// Measured (H200, 2026-12-03, two runs; docs/notes/cuda-stop26-2026-12-03.md): at 4 blocks an SM,
// steps of 4 loads a lane, 81.8–81.9% of the copy bandwidth against 77.4–77.6% for the same run's
// one_product chain; 2 blocks of steps of 8 80.4%, 3 blocks of 8 77.4%. The same change in
// gemv.cu's warp-a-row products (whose warps stream 5–20 KB each, in 2–5 steps) measured no gain
// in the model (the note has the four builds).
#pragma once

#include "chain_probe_common.cuh"

namespace chain_probe {

// Step `first` of a warp's share that ends at `end`: Unroll 16-byte loads a lane (zeros past `end`).
template <int Unroll>
__device__ void load_step(const uint4* weights, std::int64_t first, std::int64_t end, uint4 (&w)[Unroll]) {
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const std::int64_t c = first + u * 32 + threadIdx.x % 32;
    w[u] = c < end ? __ldcs(weights + c) : make_uint4(0, 0, 0, 0);
  }
}

// stream_product with the loads of step s + 1 issued before step s is summed (two steps of
// registers): a lane always has Unroll loads in flight while it computes. `current` holds step 0,
// loaded before the wait.
template <int Unroll>
__device__ void stream_product_pipelined(const uint4* weights, const Product& p, const float* x, int warp, int warps,
                                         uint4 (&current)[Unroll], float* partials) {
  const int lane = threadIdx.x % 32;
  std::int64_t begin, end;
  share_of(p, warp, warps, begin, end);
  float sum = 0.0f;
  for (std::int64_t first = begin; first < end; first += 32 * Unroll) {
    uint4 next[Unroll];
    load_step(weights, first + 32 * Unroll, end, next);  // past `end` loads nothing
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::int64_t c = first + u * 32 + lane;
      if (c < end) sum += dot8(current[u], x, c);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) current[u] = next[u];
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) partials[warp] = sum;
}

// A product of the launch chain (persistent_chain_probe.cu's one_product with one step before the
// wait) streamed by stream_product_pipelined; one_product's parameters, so that launches() can
// launch either (`next` and `lookahead_bytes` unused).
template <int BlocksPerSm, int Unroll>
__global__ void __launch_bounds__(kThreads, BlocksPerSm)
    one_product_pipelined(const uint4* weights, Product product, Product next, int lookahead_bytes, const float* in,
                          int in_count, float* out) {
  __shared__ float x[kHidden];
  const int warps = gridDim.x * (kThreads / 32), warp = blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  cudaTriggerProgrammaticLaunchCompletion();
  std::int64_t begin, end;
  share_of(product, warp, warps, begin, end);
  uint4 first_step[Unroll];
  load_step(weights, begin, end, first_step);  // the weights depend on no earlier kernel
  cudaGridDependencySynchronize();
  rebuild_x(in, in_count, x);
  stream_product_pipelined(weights, product, x, warp, warps, first_step, out);
}

}  // namespace chain_probe
