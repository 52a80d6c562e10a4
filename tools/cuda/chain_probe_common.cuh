// The pieces every variant of tools/cuda/persistent_chain_probe.cu shares: the chain's constants,
// a product as a run of 16-byte weight chunks, the dot product with x and the rebuild of x; and the
// timing both decode-chain probes use (MedianTimer, copy_bandwidth; l2_prefetch_probe.cu too).
// Device and host code for those probes only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace chain_probe {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "decode chain probe: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Median milliseconds of `repeats` runs of run() on `stream`, timed with CUDA events, after one
// untimed warm-up run.
class MedianTimer {
 public:
  MedianTimer(cudaStream_t stream, int repeats) : stream_(stream), repeats_(repeats) {
    check(cudaEventCreate(&start_), "event");
    check(cudaEventCreate(&stop_), "event");
  }
  MedianTimer(const MedianTimer&) = delete;
  MedianTimer& operator=(const MedianTimer&) = delete;
  ~MedianTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  template <typename Run>
  float operator()(Run&& run) const {
    std::vector<float> ms;
    for (int r = 0; r < repeats_ + 1; ++r) {
      check(cudaEventRecord(start_, stream_), "record");
      run();
      check(cudaEventRecord(stop_, stream_), "record");
      check(cudaEventSynchronize(stop_), "run");
      float t = 0;
      check(cudaEventElapsedTime(&t, start_, stop_), "elapsed");
      if (r > 0) ms.push_back(t);  // the first run warms up
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

 private:
  cudaStream_t stream_;
  int repeats_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The copy bandwidth the roofline uses, as bifocal bench measures it: a 1 GiB device copy, here
// within `scratch` (at least 2 GiB of device memory), in bytes a second (read + written).
inline double copy_bandwidth(const MedianTimer& timed, void* scratch, cudaStream_t stream) {
  const std::size_t copy_bytes = std::size_t(1) << 30;
  char* bytes = static_cast<char*>(scratch);
  const float copy_ms = timed([&] {
    check(cudaMemcpyAsync(bytes + copy_bytes, bytes, copy_bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  });
  return 2.0 * copy_bytes / (copy_ms * 1e-3);
}

// The median time of one replay of the graph that launch() records on `stream` (stream capture).
template <typename Launch>
float time_graph(const MedianTimer& timed, cudaStream_t stream, Launch&& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  launch();
  check(cudaStreamEndCapture(stream, &graph), "capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const float ms = timed([&] { check(cudaGraphLaunch(exec, stream), "graph"); });
  check(cudaGraphExecDestroy(exec), "graph");
  check(cudaGraphDestroy(graph), "graph");
  return ms;
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

// The read ceiling: every chunk of `data` read once by one kernel, no boundary and no shared
// memory — each warp a contiguous share, Unroll 16-byte loads a lane in flight, the bytes summed
// so that they are used (the sum is written only in a case the probes' fills never make).
template <int Threads, int BlocksPerSm, int Unroll>
__global__ void __launch_bounds__(Threads, BlocksPerSm) stream_shares(const uint4* data, std::int64_t chunks, unsigned* sink) {
  constexpr int kWarpsPerBlock = Threads / 32;
  const int warps = int(gridDim.x) * kWarpsPerBlock, warp = int(blockIdx.x) * kWarpsPerBlock + int(threadIdx.x) / 32;
  const int lane = int(threadIdx.x) % 32;
  const std::int64_t begin = chunks * warp / warps, end = chunks * (warp + 1) / warps;
  unsigned sum = 0;
  for (std::int64_t first = begin; first < end; first += 32 * Unroll) {
    uint4 w[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::int64_t c = first + u * 32 + lane;
      w[u] = c < end ? __ldcs(data + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) sum += w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
  }
  if (sum == 0x12345678u) sink[0] = sum;
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
// Element i goes to x[position(i)] (the identity, or a permutation of a layout a variant reads).
struct IdentityPosition {
  __device__ int operator()(int i) const { return i; }
};
template <int Threads, typename Barrier, typename Position = IdentityPosition>
__device__ void rebuild_x(const float* partials, int count, float* x, float* sums, Barrier sync,
                          Position position = {}) {
  float squares = 0.0f;
  for (int i = threadIdx.x; i < kHidden; i += Threads) {
    const float value = 1.0f + 1e-3f * __ldcg(partials + i % count);
    x[position(i)] = value;
    squares += value * value;
  }
  for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = squares;
  sync();
  float total = 0.0f;
  for (int w = 0; w < Threads / 32; ++w) total += sums[w];
  const float inverse = rsqrtf(total / kHidden + 1e-6f);
  for (int i = threadIdx.x; i < kHidden; i += Threads) x[i] *= inverse;  // all of x: any permutation
  sync();
}

// rebuild_x by a whole block of kThreads.
__device__ void rebuild_x(const float* partials, int warps, float* x) {
  __shared__ float block_sums[kThreads / 32];
  rebuild_x<kThreads>(partials, warps, x, block_sums, [] { __syncthreads(); });
}

}  // namespace chain_probe
