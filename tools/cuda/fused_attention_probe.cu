// Would fusing q+k+v into the window attention's cluster kernel beat the two-kernel chain it
// replaces? Stop 35 (docs/notes/cuda-stop35-2026-12-03.md) found that emptying the attention in
// place saves only 3.4 µs of the ~21 µs that q+k+v and the attention add to a Qwen3-4B layer: the
// rest is the boundary between them. Fused, a cluster would compute only its own heads' q, k and v
// rows, and its attention would wait for its cluster's barrier, not for a whole kernel.
//
// The skeleton, per layer (36 layers, Qwen3-4B shapes, bf16; no real attention):
//   chain  kernel 1: q+k+v, 6,144 rows × 2,560 — one row a warp, 2-warp blocks (3,072), the whole
//          row (10 chunks a lane) in registers before the wait for the previous kernel (the
//          engine's q+k+v holds one step of 4 there: this chain is the kinder one);
//          kernel 2: 16 clusters of 8 blocks (the attention's grid): wait, read the cluster's 512
//          outputs, spin `attention_ns` (the attention's own work), meet the cluster, write x.
//   fused  one kernel of 16 clusters of 8 blocks: a cluster computes its 2 query heads' q rows and
//          its KV head's k and v rows (512 rows; the two clusters of a KV head both read its k and
//          v: 42 MB a layer against 31.5), its first rows in registers before the wait; then meets
//          the cluster, spins, meets it again and writes x.
// Every layer's products read x, which the layer before wrote: the chain's dependency is real (two
// buffers, alternating: a fused cluster writes the next x while other clusters still read this one).
// A layer's weights are distinct (1.13 GB in all), so nothing is served from L2 across layers.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/fused_attention_probe.cu -o fused_attention_probe
//   ./fused_attention_probe            (a Markdown table: µs a layer, medians of 7 replays)
//
// Written in stop 35, compiled but not yet run (no device time was left).
#include <cooperative_groups.h>

#include "chain_probe_common.cuh"

namespace {

using chain_probe::check;
using chain_probe::kHidden;

namespace cg = cooperative_groups;

constexpr int kRows = 6144;            // q 4,096 + k 1,024 + v 1,024
constexpr int kChunksPerRow = kHidden / 8;  // 320 16-byte chunks
constexpr int kChunksPerLane = kChunksPerRow / 32;  // 10
constexpr int kClusters = 16, kRanks = 8;  // the window attention's grid for Qwen3-4B at 576 slots
constexpr int kClusterRows = 512;      // 2 q heads + the KV head's k and v, 128 rows each
constexpr int kLayers = chain_probe::kLayers;

static_assert(kChunksPerRow % 32 == 0, "a lane takes the same number of chunks of every row");

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Lane l's chunks l, l + 32, … of one row, loaded (streaming) into registers.
struct RowChunks {
  uint4 chunk[kChunksPerLane];
  __device__ void load(const uint4* row, int lane) {
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) chunk[i] = __ldcs(row + lane + 32 * i);
  }
  __device__ float dot(const float* x, int lane) const {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) sum += chain_probe::dot8(chunk[i], x, lane + 32 * i);
    return sum;
  }
};

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The cluster's 512 rows, in order: its two q heads, then its KV head's k and v.
__device__ int cluster_row(int cluster, int i) {
  const int kv = cluster / 2, slice = cluster % 2;
  if (i < 256) return (4 * kv + 2 * slice) * 128 + i;
  if (i < 384) return 4096 + kv * 128 + (i - 256);
  return 5120 + kv * 128 + (i - 384);
}

// Spins `ns` nanoseconds (the attention's own work), then writes the block's slice of x from the
// values it read, so that the next layer depends on this one.
__device__ void attention_stand_in(float value, int attention_ns, float* x) {
  const unsigned long long until = now_ns() + attention_ns;
  while (now_ns() < until) {
  }
  const int block = int(blockIdx.x), per_block = kHidden / (kClusters * kRanks);
  if (int(threadIdx.x) < per_block) x[block * per_block + threadIdx.x] = 1.0f + 1e-6f * value;
}

// chain, kernel 1: row block · 2 + warp of the layer's weights.
__global__ void qkv_kernel(const uint4* weights, const float* x, float* outputs) {
  cudaTriggerProgrammaticLaunchCompletion();
  const int lane = int(threadIdx.x) % 32, row = int(blockIdx.x) * 2 + int(threadIdx.x) / 32;
  RowChunks w;
  w.load(weights + std::int64_t(row) * kChunksPerRow, lane);
  cudaGridDependencySynchronize();
  const float sum = warp_sum(w.dot(x, lane));
  if (lane == 0) outputs[row] = sum;
}

// chain, kernel 2: the attention's grid.
__global__ void attention_kernel(const float* outputs, float* next_x, int attention_ns) {
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  const int cluster = int(blockIdx.x) / kRanks;
  float value = 0.0f;
  for (int i = int(threadIdx.x); i < kClusterRows; i += blockDim.x) value += __ldcg(outputs + cluster_row(cluster, i));
  cg::this_cluster().sync();
  attention_stand_in(value, attention_ns, next_x);
  cg::this_cluster().sync();
}

// fused: the cluster's rows, then the attention's stand-in. Warps × ranks share the 512 rows: a
// warp takes rows w, w + W, … (W = the cluster's warps), the first one in registers before the wait.
__global__ void fused_kernel(const uint4* weights, const float* x, float* next_x, int attention_ns) {
  cudaTriggerProgrammaticLaunchCompletion();
  const cg::cluster_group cluster = cg::this_cluster();
  const int lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  const int cluster_index = int(blockIdx.x) / kRanks;
  const int warp = int(cluster.block_rank()) * warps + int(threadIdx.x) / 32, cluster_warps = kRanks * warps;
  RowChunks current;
  current.load(weights + std::int64_t(cluster_row(cluster_index, warp)) * kChunksPerRow, lane);
  cudaGridDependencySynchronize();
  float value = 0.0f;
  for (int i = warp; i < kClusterRows; i += cluster_warps) {
    RowChunks next;  // the warp's next row in flight while it sums this one
    const bool more = i + cluster_warps < kClusterRows;
    if (more) next.load(weights + std::int64_t(cluster_row(cluster_index, i + cluster_warps)) * kChunksPerRow, lane);
    value += warp_sum(current.dot(x, lane));
    if (more) current = next;
  }
  cluster.sync();  // the cluster's q, k and v are computed (the real kernel would exchange them here)
  attention_stand_in(value, attention_ns, next_x);
  cluster.sync();
}

template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), int blocks, int threads, int ranks, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = unsigned(ranks), attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(blocks)), config.blockDim = dim3(unsigned(threads)), config.stream = stream;
  config.attrs = attributes, config.numAttrs = ranks > 1 ? 2 : 1;
  check(cudaLaunchKernelEx(&config, kernel, args...), "launch");
}

}  // namespace

int main() {
  const std::size_t layer_chunks = std::size_t(kRows) * kChunksPerRow;
  uint4* weights = nullptr;
  float *x = nullptr, *outputs = nullptr;
  check(cudaMalloc(&weights, kLayers * layer_chunks * sizeof(uint4)), "weights");
  check(cudaMemset(weights, 0x3c, kLayers * layer_chunks * sizeof(uint4)), "weights");  // bf16 ~0.0115
  check(cudaMalloc(&x, 2 * kHidden * sizeof(float)), "x");  // layer l reads x + (l % 2)·kHidden
  check(cudaMemset(x, 0, 2 * kHidden * sizeof(float)), "x");
  check(cudaMalloc(&outputs, kRows * sizeof(float)), "outputs");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const chain_probe::MedianTimer timed(stream, chain_probe::kRepeats);

  std::printf("Qwen3-4B's q+k+v and a stand-in attention, %d layers; µs a layer (median of %d replays)\n\n", kLayers,
              chain_probe::kRepeats);
  std::printf("| attention's own work, µs | chain: q+k+v, then the attention | fused, 256 threads a block | "
              "fused, 512 |\n| ---: | ---: | ---: | ---: |\n");
  for (const int attention_ns : {0, 3000}) {
    const float chain_ms = chain_probe::time_graph(timed, stream, [&] {
      for (int l = 0; l < kLayers; ++l) {
        const float* layer_x = x + (l % 2) * kHidden;
        float* next_x = x + ((l + 1) % 2) * kHidden;
        launch(qkv_kernel, kRows / 2, 64, 1, stream, static_cast<const uint4*>(weights + l * layer_chunks), layer_x,
               outputs);
        launch(attention_kernel, kClusters * kRanks, 256, kRanks, stream, static_cast<const float*>(outputs), next_x,
               attention_ns);
      }
    });
    float fused_ms[2];
    for (const int threads : {256, 512}) {
      fused_ms[threads / 512] = chain_probe::time_graph(timed, stream, [&] {
        for (int l = 0; l < kLayers; ++l)
          launch(fused_kernel, kClusters * kRanks, threads, kRanks, stream,
                 static_cast<const uint4*>(weights + l * layer_chunks), static_cast<const float*>(x + (l % 2) * kHidden),
                 x + ((l + 1) % 2) * kHidden, attention_ns);
      });
    }
    std::printf("| %.1f | %.2f | %.2f | %.2f |\n", attention_ns * 1e-3, 1e3 * chain_ms / kLayers,
                1e3 * fused_ms[0] / kLayers, 1e3 * fused_ms[1] / kLayers);
  }
  check(cudaStreamDestroy(stream), "stream");
  check(cudaFree(weights), "weights");
  check(cudaFree(x), "x");
  check(cudaFree(outputs), "outputs");
  return 0;
}
