// The pieces every variant of tools/cuda/persistent_chain_probe.cu shares: the chain's constants,
// a product as a run of 16-byte weight chunks, the dot product with x and the rebuild of x.
// Device and host code for that probe only (included by it and by its kernel headers).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace chain_probe {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "persistent_chain_probe: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

constexpr int kHidden = 2560;        // x: the layer width every product reads (k is folded in below)
constexpr int kThreads = 256;        // 8 warps a block
constexpr int kBlocksPerSm = 4;      // 32 warps an SM
constexpr int kUnroll = 4;           // 16-byte loads in flight per lane per step
constexpr int kLayers = 36;
constexpr int kRepeats = 7;

// One product: its weights as 16-byte chunks [first, first + chunks) of the weight buffer.
struct Product {
  std::int64_t first, chunks;
};

// Chunk range of part `part` of `parts` in a product (a warp's or a block's share): an even
// split, ±1 chunk.
__device__ void share_of(const Product& p, int part, int parts, std::int64_t& begin, std::int64_t& end) {
  begin = p.first + p.chunks * part / parts;
  end = p.first + p.chunks * (part + 1) / parts;
}

// An int another block writes, read with acquire semantics at GPU scope (a counter to wait on).
__device__ __forceinline__ int load_acquire(const int* address) {
  int value;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

// Eight bf16 weights · eight consecutive x values (x indexed modulo kHidden: the probe's stand-in
// for each row's own k range).
__device__ float dot8(uint4 raw, const float* x, std::int64_t chunk) {
  const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const int at = int((chunk * 8) % kHidden);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(w[i]);
    sum = fmaf(f.x, x[at + 2 * i], fmaf(f.y, x[at + 2 * i + 1], sum));
  }
  return sum;
}

// x for the next product, in shared memory: built from every warp's partial sum of the last
// product and RMS-normalised (one block reduction), as the next layer input would be.
// Threads: the threads taking part (threadIdx.x < Threads), `sync` their barrier; sums: Threads / 32
// floats of shared memory. Partials are read past L1: other blocks wrote them in this kernel.
template <int Threads, typename Barrier>
__device__ void rebuild_x(const float* partials, int count, float* x, float* sums, Barrier sync) {
  float squares = 0.0f;
  for (int i = threadIdx.x; i < kHidden; i += Threads) {
    const float value = 1.0f + 1e-3f * __ldcg(partials + i % count);
    x[i] = value;
    squares += value * value;
  }
  for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = squares;
  sync();
  float total = 0.0f;
  for (int w = 0; w < Threads / 32; ++w) total += sums[w];
  const float inverse = rsqrtf(total / kHidden + 1e-6f);
  for (int i = threadIdx.x; i < kHidden; i += Threads) x[i] *= inverse;
  sync();
}

// rebuild_x by a whole block of kThreads.
__device__ void rebuild_x(const float* partials, int warps, float* x) {
  __shared__ float block_sums[kThreads / 32];
  rebuild_x<kThreads>(partials, warps, x, block_sums, [] { __syncthreads(); });
}

}  // namespace chain_probe
