// The fused-MLP variant of tools/cuda/persistent_chain_probe.cu: three launches a layer instead of
// four. The MLP needs no barrier between gate/up and down if it is split over the intermediate
// (split-K for the down projection): block b takes intermediate rows [b·I/B, (b+1)·I/B), their
// gate and up rows (dot products with x, SwiGLU into shared memory), then the same rows of W_downᵀ
// — the down projection's columns for that slice, stored transposed so that they are contiguous —
// each thread accumulating 8-column groups of the output, added into `out` by atomics. No block
// waits for another inside the MLP; the price is B × 2,560 atomic adds a layer.
//
// Measured (stop 18: 34–40%; H200, 2026-12-03, two runs; docs/notes/cuda-stop26-2026-12-03.md), of the copy
// bandwidth, against 76.4% for the chain of four launches a layer: fused_mlp at 1 / 2 / 4 blocks
// an SM 26.3 / 35.5 / 29.9% (its 84–86 registers fit only 3 blocks of 256 an SM: the "4" is two
// waves); fused_mlp_cluster, partials summed in the block, 1 block of 1,024 an SM 63.4%, 2 of 512
// 66.8%; summed over clusters of 4 or 8 before the atomics 42.9–47.7%. A block's two phases
// (gate/up rows, then W_downᵀ rows once SwiGLU is known) are a boundary of their own, with no
// loads across it and fewer bytes in flight in the second: one launch fewer a layer does not pay
// for it.
#pragma once

#include <cooperative_groups.h>

#include "chain_probe_common.cuh"

namespace chain_probe {

constexpr int kIntermediate = 9728;
constexpr int kRowChunks = kHidden / 8;                              // 16-byte chunks of a 2,560-wide row
constexpr int kGateUpLoads = kRowChunks / 32;                        // a lane's chunks of one gate/up row
constexpr int kDownParts = (kRowChunks + kThreads - 1) / kThreads;  // a thread's chunks of one W_downᵀ row
constexpr int kMlpMaxRows = 80;                                      // intermediate rows a block (≥ 9728 / 132)

static_assert(kRowChunks % 32 == 0, "gate/up rows are dealt out 32 chunks at a time");

// acc[i] += weight · (the 8 bf16 values of raw)[i]: one W_downᵀ chunk scaled by its row's h.
__device__ void add_scaled8(float (&acc)[8], float weight, const uint4& raw) {
  const __nv_bfloat162* pair = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(pair[k]);
    acc[2 * k] = fmaf(weight, f.x, acc[2 * k]);
    acc[2 * k + 1] = fmaf(weight, f.y, acc[2 * k + 1]);
  }
}

// A block's slice of the intermediate, [first_row, first_row + rows), and its 2·rows gate/up rows
// (item i < rows: gate row first_row + i; else up row first_row + i − rows). gate_up_first: the gate
// rows [0, I) then the up rows [I, 2I) of the weight buffer, each kRowChunks chunks.
struct MlpSlice {
  const uint4* weights;
  std::int64_t gate_up_first;
  int first_row, rows;

  // This block's slice; `first` gets the warp's first gate/up row, loaded before the kernel waits
  // for the previous one (as the launch chain's kernels do: the weights depend on no kernel).
  __device__ static MlpSlice of_block(const uint4* weights, std::int64_t gate_up_first,
                                      uint4 (&first)[kGateUpLoads]) {
    const int first_row = kIntermediate * blockIdx.x / gridDim.x;
    const MlpSlice slice{weights, gate_up_first, first_row,
                         kIntermediate * int(blockIdx.x + 1) / int(gridDim.x) - first_row};
    const int warp = threadIdx.x / 32;
    if (warp < 2 * slice.rows)
#pragma unroll
      for (int j = 0; j < kGateUpLoads; ++j) first[j] = __ldcs(slice.gate_up_row(warp) + threadIdx.x % 32 + 32 * j);
    return slice;
  }
  __device__ const uint4* gate_up_row(int item) const {
    const std::int64_t row = item < rows ? first_row + item : kIntermediate + first_row + (item - rows);
    return weights + gate_up_first + row * kRowChunks;
  }
  // h[r] = silu(gate_r · x) · (up_r · x) for the slice's rows: a warp a gate or up row (Warps warps),
  // every lane kGateUpLoads chunks in flight; the warp's first row from `first`. Ends in a barrier.
  template <int Warps>
  __device__ void swiglu(const float* x, const uint4 (&first)[kGateUpLoads], float* gate_up, float* h) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int item = warp; item < 2 * rows; item += Warps) {
      uint4 raw[kGateUpLoads];
#pragma unroll
      for (int j = 0; j < kGateUpLoads; ++j)
        raw[j] = item == warp ? first[j] : __ldcs(gate_up_row(item) + lane + 32 * j);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kGateUpLoads; ++j) sum += dot8(raw[j], x, lane + 32 * j);
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane == 0) gate_up[item] = sum;
    }
    __syncthreads();
    if (int(threadIdx.x) < rows) {
      const float g = gate_up[threadIdx.x], u = gate_up[rows + threadIdx.x];
      h[threadIdx.x] = g / (1.0f + expf(-g)) * u;
    }
    __syncthreads();
  }
};

// gate_up_first: as MlpSlice; down_first: W_downᵀ's I rows of kRowChunks chunks. `in` holds
// in_count values (rebuild_x).
__global__ void __launch_bounds__(kThreads)
    fused_mlp(const uint4* weights, std::int64_t gate_up_first, std::int64_t down_first, const float* in,
              int in_count, float* out) {
  __shared__ float x[kHidden];
  __shared__ float gate_up[2 * kMlpMaxRows];
  __shared__ float h[kMlpMaxRows];
  cudaTriggerProgrammaticLaunchCompletion();
  uint4 first[kGateUpLoads];
  const MlpSlice slice = MlpSlice::of_block(weights, gate_up_first, first);
  const int first_row = slice.first_row, rows = slice.rows;
  cudaGridDependencySynchronize();
  rebuild_x(in, in_count, x);
  slice.swiglu<kThreads / 32>(x, first, gate_up, h);

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
      add_scaled8(acc[part], weight, __ldcs(source + c));
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

// fused_mlp's atomics, fewer: block b of a cluster of ClusterSize blocks (Threads threads, one
// intermediate slice each) sums its down partials in shared memory first (Threads / 320 thread
// groups, each a share of the slice's W_downᵀ rows, 8 loads a thread in flight), then the cluster
// sums its blocks' partials over distributed shared memory, each block a 1/ClusterSize share of the
// 2,560 outputs, and adds that share into `out`: gridDim / ClusterSize × 2,560 atomics a layer
// instead of gridDim × 2,560.
template <int Threads, int ClusterSize>
__global__ void __launch_bounds__(Threads, 1024 / Threads)
    fused_mlp_cluster(const uint4* weights, std::int64_t gate_up_first, std::int64_t down_first, const float* in,
                      int in_count, float* out) {
  static_assert(Threads >= kRowChunks, "a thread an output chunk in the down phase");
  constexpr int kWarps = Threads / 32, kGroups = Threads / kRowChunks, kDownUnroll = 8;
  __shared__ float x[kHidden];
  __shared__ float gate_up[2 * kMlpMaxRows];
  __shared__ float h[kMlpMaxRows];
  __shared__ float partial[kHidden];
  __shared__ float sums[kWarps];
  cudaTriggerProgrammaticLaunchCompletion();
  uint4 first[kGateUpLoads];
  const MlpSlice slice = MlpSlice::of_block(weights, gate_up_first, first);
  const int first_row = slice.first_row, rows = slice.rows;
  for (int i = threadIdx.x; i < kHidden; i += Threads) partial[i] = 0.0f;
  cudaGridDependencySynchronize();
  rebuild_x<Threads>(in, in_count, x, sums, [] { __syncthreads(); });
  slice.swiglu<kWarps>(x, first, gate_up, h);

  // Down: thread t of group t / 320 owns output chunk t % 320, the group every kGroups-th row.
  const int group = threadIdx.x / kRowChunks, chunk = threadIdx.x % kRowChunks;
  if (group < kGroups) {
    float acc[8] = {};
    for (int r0 = group; r0 < rows; r0 += kGroups * kDownUnroll) {
      uint4 raw[kDownUnroll];
#pragma unroll
      for (int u = 0; u < kDownUnroll; ++u) {
        const int r = r0 + u * kGroups;
        raw[u] = r < rows ? __ldcs(weights + down_first + std::int64_t(first_row + r) * kRowChunks + chunk)
                          : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kDownUnroll; ++u) {
        const int r = r0 + u * kGroups;
        add_scaled8(acc, r < rows ? h[r] : 0.0f, raw[u]);
      }
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) atomicAdd(&partial[8 * chunk + k], acc[k]);
  }
  __syncthreads();

  if constexpr (ClusterSize == 1) {
    for (int i = threadIdx.x; i < kHidden; i += Threads) atomicAdd(out + i, partial[i]);
  } else {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's partial is complete
    const int rank = int(cluster.block_rank());
    const int begin = kHidden * rank / ClusterSize, end = kHidden * (rank + 1) / ClusterSize;
    for (int i = begin + int(threadIdx.x); i < end; i += Threads) {
      float total = 0.0f;
#pragma unroll
      for (int r = 0; r < ClusterSize; ++r) total += cluster.map_shared_rank(partial, r)[i];
      atomicAdd(out + i, total);
    }
    cluster.sync();  // no block leaves while another reads its partial
  }
}

}  // namespace chain_probe
