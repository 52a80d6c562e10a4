// The dataflow variant of tools/cuda/persistent_chain_probe.cu (its header has the measurements).
#pragma once

#include "chain_probe_common.cuh"

namespace chain_probe {

// ---- Dataflow: one persistent kernel, counters instead of barriers ----------------------------
// A product is cut into items of kTileRows rows × one of kSlices slices of its k. An item waits
// only for its own input slice — the rows of the previous product that feed it, counted as they
// complete — so the next product's early slices stream while the last one drains, and no warp
// waits for the whole grid. Each item's partial sums go to the output by atomics; the item that
// completes a row tile (its kSlices-th) counts it towards the next product's input slice. Items
// are numbered product by product, slice-major, and dealt round-robin to the warps, each taking
// its items in order: an item only waits for lower-numbered ones, all of them on resident warps
// that reach them first, so nothing deadlocks. Input slice s of product p needs the previous
// product's row tiles [s·T/S, (s+1)·T/S) (T its tiles): a proportional stand-in for the real
// mappings (o_proj needs its heads' q rows, down_proj the gate and up rows of its slice). No
// RMSNorm: it would need each vector's sum of squares, which a real chain can apply to the
// outputs of the next product when its last tile completes (the norm is a scalar per vector).
constexpr int kTileRows = 8;      // streamed 8 rows at a time
constexpr int kMaxSlices = 32;
constexpr int kItemBytes = 16384;  // a product's k is cut so that an item streams about this much

struct FlowProduct {
  std::int64_t first_chunk;  // row r, chunk c of the weights: first_chunk + r · k_chunks + c
  std::int64_t first_item;   // its first item in the chain's numbering
  int rows, k_chunks, tiles; // k in 16-byte chunks (8 bf16); tiles = rows / kTileRows
  int slices;                // its k in this many slices (an item: a row tile × a slice)
  int input, output;         // offsets of its input and output vectors in the activations
  int tile_counters;         // offset of its row tiles' completion counters
  int slice_counters;        // offset of its input slices' readiness counters
  int needed[kMaxSlices];    // completed tiles of the previous product each input slice waits for
};

__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    dataflow_chain(const uint4* weights, const FlowProduct* products, int count, std::int64_t items,
                   float* activations, int* counters) {
  const int lane = threadIdx.x % 32, warps = gridDim.x * (kThreads / 32);
  const int rank = (threadIdx.x / 32) * gridDim.x + blockIdx.x;  // consecutive items on different SMs
  int p = 0;
  for (std::int64_t item = rank; item < items; item += warps) {
    while (item >= products[p].first_item + std::int64_t(products[p].slices) * products[p].tiles) ++p;
    const FlowProduct& product = products[p];
    const int local = int(item - product.first_item), slice = local / product.tiles, tile = local % product.tiles;
    if (product.needed[slice] > 0) {
      if (lane == 0)
        while (load_acquire(counters + product.slice_counters + slice) < product.needed[slice]) __nanosleep(100);
      __syncwarp();
    }
    const float* x = activations + product.input;
    const int begin = slice * product.k_chunks / product.slices, end = (slice + 1) * product.k_chunks / product.slices;
    float* out = activations + product.output + tile * kTileRows;
    for (int group = 0; group < kTileRows / 8; ++group) {
      const uint4* rows = weights + product.first_chunk + std::int64_t(tile * kTileRows + 8 * group) * product.k_chunks;
      float sum[8] = {};
      for (int c = begin + lane; c < end; c += 32) {
        uint4 w[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) w[r] = __ldcs(rows + std::int64_t(r) * product.k_chunks + c);
        float xs[8];
        *reinterpret_cast<float4*>(xs) = __ldcg(reinterpret_cast<const float4*>(x + 8 * c));
        *reinterpret_cast<float4*>(xs + 4) = __ldcg(reinterpret_cast<const float4*>(x + 8 * c + 4));
#pragma unroll
        for (int r = 0; r < 8; ++r) {
          const __nv_bfloat162* pair = reinterpret_cast<const __nv_bfloat162*>(&w[r]);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 f = __bfloat1622float2(pair[i]);
            sum[r] = fmaf(f.x, xs[2 * i], fmaf(f.y, xs[2 * i + 1], sum[r]));
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 8; ++r)
        for (int offset = 16; offset > 0; offset /= 2) sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], offset);
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < 8; ++r) atomicAdd(out + 8 * group + r, sum[r]);
    }
    if (lane == 0) {
      __threadfence();  // the sums before the count
      if (atomicAdd(counters + product.tile_counters + tile, 1) == product.slices - 1 && p + 1 < count) {
        __threadfence();
        atomicAdd(counters + products[p + 1].slice_counters + tile * products[p + 1].slices / product.tiles, 1);
      }
    }
  }
}

}  // namespace chain_probe
