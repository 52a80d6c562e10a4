// Can a decoupled L2 prefetcher keep HBM busy across a decode step's launch boundaries?
//
// The decode step is a chain of ~145 matrix–vector products, each waiting for the one before
// (docs/performance.md): between two products HBM idles while the last blocks drain and the next
// kernel's blocks wait for their input (stop 17's probe, tools/cuda/persistent_chain_probe.cu:
// the launch chain streams at 70–75% of the copy bandwidth). In-kernel ways of hiding the
// boundary lost there: every load a kernel issues ahead of its wait is bounded by what its own
// registers or shared memory hold. The weights, though, depend on nothing. Here a second, small
// kernel runs beside the whole chain (a parallel branch of the graph) and only asks L2 for the
// weights in the order the chain will read them (cp.async.bulk.prefetch.L2, fire and forget),
// never more than LOOKAHEAD bytes ahead of what the chain has consumed (a counter the product
// kernels add their blocks' bytes to): HBM keeps streaming while the chain sits at a boundary,
// and the products then read their first rows from L2.
//
// The chain is Qwen3-4B's 36 layers of products laid out and read the way gemv.cu does: one warp
// a row, 8 rows a block, blocks in row order; q+k+v (6,144 × 2,560), o (2,560 × 4,096), gate and
// up (two 9,728 × 2,560 matrices, a warp reading row r of both, SwiGLU of the two sums), down
// (2,560 × 9,728); bf16, 7.27 GB. Each product's first step of loads is issued before its wait
// (programmatic dependent launch), as in the model.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/l2_prefetch_probe.cu -o l2_prefetch_probe
//   ./l2_prefetch_probe                    (a Markdown table; ~7.3 GB of device memory)
//
// Measured (H200, L2 60 MiB, 2026-12-02; docs/notes/cuda-stop24-2026-12-02.md): the launch chain
// 75.4–75.7% of the copy bandwidth; with the prefetcher 55–61% at 16–132 blocks (the more it runs
// ahead, the less it loses), 21.6% at 4 blocks (one thread's bulk prefetches stream ~230 GB/s),
// 53% unpaced. Prefetched lines do not serve the chain's reads: L2 prefetching of the weights
// loses, whatever its pace.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "chain_probe_common.cuh"

namespace {

// The chain's shape as persistent_chain_probe.cu's: 8-warp blocks, 4 16-byte loads in flight per
// lane and matrix (as gemv.cu), Qwen3-4B's 36 layers.
using chain_probe::check;
using chain_probe::kLayers;
using chain_probe::kThreads;
using chain_probe::kUnroll;
using chain_probe::MedianTimer;

constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kProbeRepeats = 9;

// One product as gemv.cu runs it: row r of each matrix (two for gate/up) dotted with x.
struct RowProduct {
  const uint4* matrices[2];
  int matrix_count;
  int m;         // rows
  int k_chunks;  // k / 8
  const float* x;
  float* out;
};

__device__ float dot8(uint4 raw, const float* x) {
  const float4 low = reinterpret_cast<const float4*>(x)[0], high = reinterpret_cast<const float4*>(x)[1];
  const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(w[0]), b = __bfloat1622float2(w[1]);
  const float2 c = __bfloat1622float2(w[2]), d = __bfloat1622float2(w[3]);
  return a.x * low.x + a.y * low.y + b.x * low.z + b.y * low.w + c.x * high.x + c.y * high.y + d.x * high.z +
         d.y * high.w;
}

// gemv.cu's shape of work; with `consumed`, thread 0 of each block adds the block's weight bytes
// to it when the block is done (what the prefetcher paces itself by).
template <int Matrices>
__global__ void __launch_bounds__(kThreads, 4) row_product(RowProduct p, unsigned long long* consumed) {
  cudaTriggerProgrammaticLaunchCompletion();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row = blockIdx.x * kWarpsPerBlock + warp;
  float acc[Matrices] = {};
  if (row < p.m) {
    const uint4* rows[Matrices];
    for (int r = 0; r < Matrices; ++r) rows[r] = p.matrices[r] + std::int64_t(row) * p.k_chunks;
    for (int first = 0; first < p.k_chunks; first += 32 * kUnroll) {
      uint4 w[kUnroll][Matrices];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = first + u * 32 + lane;
        if (c < p.k_chunks)
#pragma unroll
          for (int r = 0; r < Matrices; ++r) w[u][r] = __ldcs(rows[r] + c);
      }
      if (first == 0) cudaGridDependencySynchronize();
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = first + u * 32 + lane;
        if (c < p.k_chunks)
#pragma unroll
          for (int r = 0; r < Matrices; ++r) acc[r] += dot8(w[u][r], p.x + 8 * c);
      }
    }
  } else {
    cudaGridDependencySynchronize();
  }
  for (int r = 0; r < Matrices; ++r)
    for (int offset = 16; offset > 0; offset /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
  if (lane == 0 && row < p.m) {
    // Kept small so the chain's values stay finite whatever the weights.
    const float value = Matrices == 2 ? acc[0] / (1.0f + __expf(-acc[0])) * acc[1] : acc[0];
    p.out[row] = 1.0f + 1e-6f * value;
  }
  if (consumed == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    const int rows_here = min(kWarpsPerBlock, p.m - int(blockIdx.x) * kWarpsPerBlock);
    atomicAdd(consumed, std::uint64_t(rows_here) * p.k_chunks * 16 * Matrices);
  }
}

// The prefetcher's view of one product: its matrices (read side by side, row by row) and the bytes
// the chain consumes before it.
struct PrefetchProduct {
  const char* matrices[2];
  int matrix_count;
  std::int64_t matrix_bytes;
  std::int64_t consumed_before;
};

__device__ unsigned long long load_relaxed(const unsigned long long* address) {
  unsigned long long value;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
  return value;
}

// Pieces of `piece_bytes`, the products' matrices interleaved piece by piece (gate's piece i, then
// up's piece i), block b taking pieces b, b + blocks, …; a piece is asked for once the chain has
// consumed all but `lookahead` bytes before its end. One thread a block issues.
__global__ void l2_prefetcher(const PrefetchProduct* products, int count, int piece_bytes, long long lookahead,
                              const unsigned long long* consumed) {
  if (threadIdx.x != 0) return;
  unsigned long long seen = 0;
  for (int i = 0; i < count; ++i) {
    const PrefetchProduct p = products[i];
    const long long pieces_per_matrix = (p.matrix_bytes + piece_bytes - 1) / piece_bytes;
    const long long pieces = pieces_per_matrix * p.matrix_count;
    for (long long j = blockIdx.x; j < pieces; j += gridDim.x) {
      const long long offset = (j / p.matrix_count) * piece_bytes;
      const int matrix = int(j % p.matrix_count);
      const long long position = p.consumed_before + (j + 1) * piece_bytes;
      while (position > (long long)seen + lookahead) {
        __nanosleep(100);
        seen = load_relaxed(consumed);
      }
      const int bytes = int(p.matrix_bytes - offset < piece_bytes ? p.matrix_bytes - offset : piece_bytes);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.matrices[matrix] + offset), "r"(bytes)
                   : "memory");
    }
  }
}

}  // namespace

int main() {
  int device = 0, sms = 0, l2_bytes = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), "L2 size");

  // Qwen3-4B's per-layer products: rows, k, matrices.
  struct Shape { int m, k, matrices; };
  const Shape layer[4] = {{6144, 2560, 1}, {2560, 4096, 1}, {9728, 2560, 2}, {2560, 9728, 1}};
  std::int64_t total_bytes = 0;
  for (int l = 0; l < kLayers; ++l)
    for (const Shape& s : layer) total_bytes += std::int64_t(s.m) * s.k * 2 * s.matrices;
  char* weights = nullptr;
  check(cudaMalloc(&weights, std::size_t(total_bytes)), "weights");
  check(cudaMemset(weights, 0x3c, std::size_t(total_bytes)), "weights fill");  // bf16 ≈ 0.0115
  float* activations = nullptr;                                                // two ping-pong vectors
  constexpr int kVector = 9728;
  check(cudaMalloc(&activations, 2 * kVector * sizeof(float)), "activations");
  std::vector<float> ones(2 * kVector, 1.0f);
  check(cudaMemcpy(activations, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice), "x");
  unsigned long long* consumed = nullptr;
  check(cudaMalloc(&consumed, sizeof(unsigned long long)), "counter");

  std::vector<RowProduct> chain;
  std::vector<PrefetchProduct> prefetch;
  std::int64_t at = 0;
  for (int l = 0; l < kLayers; ++l)
    for (const Shape& s : layer) {
      const int i = int(chain.size());
      RowProduct p{};
      PrefetchProduct f{};
      const std::int64_t matrix_bytes = std::int64_t(s.m) * s.k * 2;
      f.consumed_before = at;
      for (int r = 0; r < s.matrices; ++r) {
        p.matrices[r] = reinterpret_cast<const uint4*>(weights + at);
        f.matrices[r] = weights + at;
        at += matrix_bytes;
      }
      p.matrix_count = f.matrix_count = s.matrices;
      p.m = s.m, p.k_chunks = s.k / 8;
      f.matrix_bytes = matrix_bytes;
      p.x = activations + (i % 2) * kVector;
      p.out = activations + ((i + 1) % 2) * kVector;
      chain.push_back(p);
      prefetch.push_back(f);
    }
  PrefetchProduct* prefetch_device = nullptr;
  check(cudaMalloc(&prefetch_device, prefetch.size() * sizeof(PrefetchProduct)), "prefetch products");
  check(cudaMemcpy(prefetch_device, prefetch.data(), prefetch.size() * sizeof(PrefetchProduct),
                   cudaMemcpyHostToDevice),
        "prefetch products");

  cudaStream_t stream, side;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "side stream");
  cudaEvent_t fork, join;
  check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "event");
  const MedianTimer timed(stream, kProbeRepeats);
  const double copy_bandwidth = chain_probe::copy_bandwidth(timed, weights, stream);

  cudaLaunchAttribute dependent_launch{};
  dependent_launch.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent_launch.val.programmaticStreamSerializationAllowed = 1;
  // The chain (and, with prefetcher_blocks > 0, the prefetcher beside it) as one graph.
  const auto time_chain = [&](bool report, int prefetcher_blocks, int piece_bytes, long long lookahead) {
    return chain_probe::time_graph(timed, stream, [&] {
      check(cudaMemsetAsync(consumed, 0, sizeof(unsigned long long), stream), "zero");
      if (prefetcher_blocks > 0) {
        check(cudaEventRecord(fork, stream), "fork");
        check(cudaStreamWaitEvent(side, fork), "fork");
        l2_prefetcher<<<prefetcher_blocks, 32, 0, side>>>(prefetch_device, int(prefetch.size()), piece_bytes,
                                                          lookahead, consumed);
        check(cudaGetLastError(), "l2_prefetcher");
        check(cudaEventRecord(join, side), "join");
      }
      for (const RowProduct& p : chain) {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3((p.m + kWarpsPerBlock - 1) / kWarpsPerBlock), config.blockDim = dim3(kThreads);
        config.stream = stream, config.attrs = &dependent_launch, config.numAttrs = 1;
        unsigned long long* counter = report ? consumed : nullptr;
        if (p.matrix_count == 2)
          check(cudaLaunchKernelEx(&config, row_product<2>, p, counter), "row_product");
        else
          check(cudaLaunchKernelEx(&config, row_product<1>, p, counter), "row_product");
      }
      if (prefetcher_blocks > 0) check(cudaStreamWaitEvent(stream, join), "join");
    });
  };

  std::printf("%d SMs, L2 %.1f MiB; %zu products, %.2f GB; copy bandwidth %.2f TB/s\n\n", sms, l2_bytes / 1048576.0,
              chain.size(), total_bytes * 1e-9, copy_bandwidth * 1e-12);
  std::printf("| variant | ms per chain | TB/s | of copy bandwidth |\n| --- | ---: | ---: | ---: |\n");
  const double ideal_ms = total_bytes / copy_bandwidth * 1e3;
  const auto row = [&](const char* name, float ms) {
    std::printf("| %s | %.3f | %.2f | %.1f%% |\n", name, ms, total_bytes / (ms * 1e-3) * 1e-12, 100.0 * ideal_ms / ms);
    std::fflush(stdout);
  };
  row("launch chain", time_chain(false, 0, 0, 0));
  row("launch chain, blocks count their bytes", time_chain(true, 0, 0, 0));
  const long long MiB = 1 << 20;
  for (int blocks : {4, 16, 64, 132})
    for (long long lookahead : {8, 16, 32}) {
      char name[160];
      std::snprintf(name, sizeof name, "+ prefetcher: %d blocks, pieces of 64 KiB, %lld MiB ahead", blocks, lookahead);
      row(name, time_chain(true, blocks, 64 * 1024, lookahead * MiB));
    }
  for (int piece : {16 * 1024, 256 * 1024}) {
    char name[160];
    std::snprintf(name, sizeof name, "+ prefetcher: 16 blocks, pieces of %d KiB, 16 MiB ahead", piece / 1024);
    row(name, time_chain(true, 16, piece, 16 * MiB));
  }
  row("+ prefetcher, 16 blocks, 64 KiB, no limit (races ahead)", time_chain(true, 16, 64 * 1024, 1LL << 40));
  row("launch chain again", time_chain(false, 0, 0, 0));
  return 0;
}
