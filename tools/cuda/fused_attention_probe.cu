// Would fusing q+k+v into the window attention's cluster kernel beat the two-kernel chain it
// replaces? Fused, a cluster computes only its own heads' q, k and v rows, and its attention waits
// for its cluster's barrier, not for a whole kernel. (Stop 35 asked this when its ablation said the
// attention's own work was only 3.4 µs of a layer and the rest the boundary around it; stop 36
// found that number an artifact of the ablation's stand-in: the attention costs ~10 µs in place.)
//
// The skeleton, per layer (36 layers, Qwen3-4B shapes, bf16; no real attention). x is the bf16
// vector the engine's products read (carried_rms_norm.h's g ⊙ x), read in 16-byte chunks as
// gemv.cu reads it; a lane takes chunks l, l + 32, … of every row, so a fused warp keeps its 10 x
// chunks in registers for all of its rows.
//   chain  kernel 1: q+k+v, 6,144 rows × 2,560 — one row a warp, 2-warp blocks (3,072), the whole
//          row (10 chunks a lane) in registers before the wait for the previous kernel (the
//          engine's q+k+v holds 4 of the 10 there: this chain is the kinder one);
//          kernel 2: 16 clusters of 8 blocks (the attention's grid): wait, read the cluster's 512
//          outputs, spin `attention_ns` (the attention's own work), meet the cluster, write x.
//   fused  one kernel: a cluster computes its query heads' q rows and its KV head's k and v rows,
//          `Depth` rows a warp in flight (all of them requested before the wait), x in registers;
//          then it meets the cluster, spins, meets it again and writes x. The shapes (clusters ×
//          blocks): 16 × 8 and 16 × 4 serve 2 query heads a cluster, so the two clusters of a KV
//          head both read its k and v (42 MB a layer against 31.5); 8 × 8 serves 4, 64 blocks;
//          8 × 16 is a non-portable cluster size. "Alone on its SM": 120 KiB of unused dynamic
//          shared memory keeps a block alone on its SM.
// Every layer's products read x, which the layer before wrote: the chain's dependency is real (two
// buffers, alternating: a fused cluster writes the next x while other clusters still read this one).
// A layer's weights are distinct (1.13 GB in all), so nothing is served from L2 across layers.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/fused_attention_probe.cu -o fused_attention_probe
//   ./fused_attention_probe            (a Markdown table: µs a layer, medians of 7 replays)
//
// Written in stop 35; stop 36 ran it (docs/notes/cuda-stop36-2026-12-04.md has the table): no fused
// shape beats the chain (10.4–10.7 µs a layer with no attention work). A 128-block grid of 8-block
// clusters at one block an SM does not fit at once (15 resident clusters of 16); at two blocks an
// SM it takes 12.8 µs, and the best shape, 8 × 8 (64 blocks, one an SM), 11.2–11.7: a fused cluster
// streams its rows more slowly than the chain's 3,072 small blocks stream theirs and cross the
// boundary together.
#include <cooperative_groups.h>

#include "chain_probe_barriers.cuh"  // global_ns
#include "chain_probe_common.cuh"

namespace {

using chain_probe::check;
using chain_probe::kHidden;

namespace cg = cooperative_groups;

constexpr int kRows = 6144;                         // q 4,096 + k 1,024 + v 1,024
constexpr int kChunksPerRow = kHidden / 8;          // 320 16-byte chunks
constexpr int kChunksPerLane = kChunksPerRow / 32;  // 10
constexpr int kBlocks = 128;                        // the window attention's grid for Qwen3-4B at 576 slots
constexpr int kWarps = 8;                           // 256 threads a block (the chain's attention)
constexpr int kHeadDim = 128;
constexpr int kLayers = chain_probe::kLayers;
constexpr int kLoneBlockSharedBytes = 120 * 1024;  // more than half an SM's 228 KiB: one block an SM

static_assert(kChunksPerRow % 32 == 0, "a lane takes the same number of chunks of every row");

using chain_probe::global_ns;

// Lane l's chunks l, l + 32, … of one row of 16-bit values.
struct RowChunks {
  uint4 chunk[kChunksPerLane];
  __device__ void load_streaming(const uint4* row, int lane) {  // W: read once, evict first
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) chunk[i] = __ldcs(row + lane + 32 * i);
  }
  __device__ void load(const uint4* row, int lane) {  // x: written by the kernel before, read by every warp
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) chunk[i] = row[lane + 32 * i];
  }
  __device__ float dot(const RowChunks& x) const {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) {
      const auto* w = reinterpret_cast<const __nv_bfloat162*>(&chunk[i]);
      const auto* v = reinterpret_cast<const __nv_bfloat162*>(&x.chunk[i]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 a = __bfloat1622float2(w[j]), b = __bfloat1622float2(v[j]);
        sum = fmaf(a.x, b.x, fmaf(a.y, b.y, sum));
      }
    }
    return sum;
  }
};

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A cluster shape: Clusters clusters of Ranks blocks of Warps warps; cluster c serves KV head
// c / kSlices, its query heads [kHeadsPerCluster · (c % kSlices), +kHeadsPerCluster) of the KV
// head's four, and computes the KV head's k and v rows (each of the kSlices clusters of a KV head
// reads them: kSlices > 1 reads them more than once).
template <int Ranks, int Clusters = kBlocks / Ranks, int Warps = kWarps>
struct ClusterShape {
  static constexpr int kSlices = Clusters / 8;  // clusters a KV head (8 KV heads)
  static constexpr int kHeadsPerCluster = 4 / kSlices;
  static constexpr int kRows = (kHeadsPerCluster + 2) * kHeadDim;  // its q heads, then k and v
  static constexpr int kRowsPerWarp = kRows / (Ranks * Warps);
  static_assert(kRows % (Ranks * Warps) == 0, "every warp of the cluster takes as many rows");
  // The cluster's row i, in the layer's q | k | v rows.
  __device__ static int row(int cluster, int i) {
    const int kv = cluster / kSlices, slice = cluster % kSlices, q_rows = kHeadsPerCluster * kHeadDim;
    if (i < q_rows) return (4 * kv + kHeadsPerCluster * slice) * kHeadDim + i;
    if (i < q_rows + kHeadDim) return 4096 + kv * kHeadDim + (i - q_rows);
    return 5120 + kv * kHeadDim + (i - q_rows - kHeadDim);
  }
};

// Spins `ns` nanoseconds (the attention's own work), then writes the block's slice of x from the
// values it read, so that the next layer depends on this one.
__device__ void attention_stand_in(float value, int attention_ns, __nv_bfloat16* x) {
  const unsigned long long until = global_ns() + attention_ns;
  while (global_ns() < until) {
  }
  const int per_block = kHidden / int(gridDim.x);
  if (int(threadIdx.x) < per_block)
    x[int(blockIdx.x) * per_block + int(threadIdx.x)] = __float2bfloat16(0.01f + 1e-6f * value);
}

// chain, kernel 1: row block · 2 + warp of the layer's weights.
__global__ void qkv_kernel(const uint4* weights, const uint4* x, float* outputs) {
  cudaTriggerProgrammaticLaunchCompletion();
  const int lane = int(threadIdx.x) % 32, row = int(blockIdx.x) * 2 + int(threadIdx.x) / 32;
  RowChunks w, input;
  w.load_streaming(weights + std::int64_t(row) * kChunksPerRow, lane);
  cudaGridDependencySynchronize();
  input.load(x, lane);
  const float sum = warp_sum(w.dot(input));
  if (lane == 0) outputs[row] = sum;
}

// chain, kernel 2: the attention's grid (clusters of 8).
__global__ void attention_kernel(const float* outputs, __nv_bfloat16* next_x, int attention_ns) {
  using Shape = ClusterShape<8>;
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  const int cluster = int(blockIdx.x) / 8;
  float value = 0.0f;
  for (int i = int(threadIdx.x); i < Shape::kRows; i += blockDim.x) value += __ldcg(outputs + Shape::row(cluster, i));
  cg::this_cluster().sync();
  attention_stand_in(value, attention_ns, next_x);
  cg::this_cluster().sync();
}

// fused: warp w of the cluster takes its rows w, w + W, … (W = the cluster's warps), Depth of them
// in flight (the first Depth requested before the wait), x in registers; then the attention's
// stand-in.
template <int Ranks, int Clusters, int Warps, int Depth, int BlocksPerSm>
__global__ void __launch_bounds__(Warps * 32, BlocksPerSm)
    fused_kernel(const uint4* weights, const uint4* x, __nv_bfloat16* next_x, int attention_ns) {
  using Shape = ClusterShape<Ranks, Clusters, Warps>;
  constexpr int kClusterWarps = Ranks * Warps, kSteps = Shape::kRowsPerWarp;
  cudaTriggerProgrammaticLaunchCompletion();
  const cg::cluster_group cluster = cg::this_cluster();
  const int lane = int(threadIdx.x) % 32, cluster_index = int(blockIdx.x) / Ranks;
  const int warp = int(cluster.block_rank()) * Warps + int(threadIdx.x) / 32;
  auto row_of = [&](int step) {
    return weights + std::int64_t(Shape::row(cluster_index, warp + step * kClusterWarps)) * kChunksPerRow;
  };
  RowChunks ring[Depth];
#pragma unroll
  for (int d = 0; d < Depth && d < kSteps; ++d) ring[d].load_streaming(row_of(d), lane);
  cudaGridDependencySynchronize();
  RowChunks input;
  input.load(x, lane);
  float value = 0.0f;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    value += warp_sum(ring[step % Depth].dot(input));
    if (step + Depth < kSteps) ring[step % Depth].load_streaming(row_of(step + Depth), lane);
  }
  cluster.sync();  // the cluster's q, k and v are computed (the real kernel would exchange them here)
  attention_stand_in(value, attention_ns, next_x);
  cluster.sync();
}

template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), int blocks, int threads, int ranks, int shared_bytes, cudaStream_t stream,
            Args... args) {
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = unsigned(ranks), attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(blocks)), config.blockDim = dim3(unsigned(threads)), config.stream = stream;
  config.dynamicSmemBytes = std::size_t(shared_bytes);
  config.attrs = attributes, config.numAttrs = ranks > 1 ? 2 : 1;
  check(cudaLaunchKernelEx(&config, kernel, args...), "launch");
}

// How many clusters of this kernel's shape can be resident at once (all of them must be: the
// stand-in's barriers assume no cluster waits for another to leave).
template <typename... KernelArgs>
int max_active_clusters(void (*kernel)(KernelArgs...), int ranks, int shared_bytes, int blocks = kBlocks,
                        int threads = kWarps * 32) {
  if (ranks > 8) check(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "non-portable");
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes), "shared memory");
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = unsigned(ranks), attribute.val.clusterDim.y = 1, attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(blocks)), config.blockDim = dim3(unsigned(threads)), config.dynamicSmemBytes = std::size_t(shared_bytes);
  config.attrs = &attribute, config.numAttrs = 1;
  int clusters = 0;
  check(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config), "max active clusters");
  return clusters;
}

struct FusedVariant {
  const char* name;
  void (*kernel)(const uint4*, const uint4*, __nv_bfloat16*, int);
  int clusters, ranks, warps, shared_bytes;
};

}  // namespace

int main() {
  const std::size_t layer_chunks = std::size_t(kRows) * kChunksPerRow;
  uint4* weights = nullptr;
  __nv_bfloat16* x = nullptr;  // layer l reads x + (l % 2)·kHidden
  float* outputs = nullptr;
  check(cudaMalloc(&weights, kLayers * layer_chunks * sizeof(uint4)), "weights");
  check(cudaMemset(weights, 0x3c, kLayers * layer_chunks * sizeof(uint4)), "weights");  // bf16 ~0.0115
  check(cudaMalloc(&x, 2 * kHidden * sizeof(__nv_bfloat16)), "x");
  check(cudaMemset(x, 0, 2 * kHidden * sizeof(__nv_bfloat16)), "x");
  check(cudaMalloc(&outputs, kRows * sizeof(float)), "outputs");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const chain_probe::MedianTimer timed(stream, chain_probe::kRepeats);
  auto layer_x = [&](int l) { return reinterpret_cast<const uint4*>(x + (l % 2) * kHidden); };
  auto next_x = [&](int l) { return x + ((l + 1) % 2) * kHidden; };

  // {name, kernel<Ranks, Clusters, Warps, Depth, BlocksPerSm>, clusters, ranks, warps, shared bytes}
  const FusedVariant variants[] = {
      {"16 × 8, 2 query heads, 8 warps, 2 rows in flight, ≤ 2 blocks an SM", fused_kernel<8, 16, 8, 2, 2>, 16, 8, 8, 0},
      {"16 × 8, 8 warps, 3 in flight", fused_kernel<8, 16, 8, 3, 1>, 16, 8, 8, 0},
      {"8 × 8, 4 query heads, 8 warps, 3 in flight", fused_kernel<8, 8, 8, 3, 1>, 8, 8, 8, 0},
      {"8 × 8, 8 warps, 3 in flight, alone on its SM", fused_kernel<8, 8, 8, 3, 1>, 8, 8, 8, kLoneBlockSharedBytes},
      {"8 × 8, 16 warps, 2 in flight", fused_kernel<8, 8, 16, 2, 1>, 8, 8, 16, 0},
      {"16 × 4, 2 query heads, 8 warps, 3 in flight", fused_kernel<4, 16, 8, 3, 1>, 16, 4, 8, 0},
      {"16 × 4, 8 warps, 3 in flight, alone on its SM", fused_kernel<4, 16, 8, 3, 1>, 16, 4, 8, kLoneBlockSharedBytes},
      {"8 × 16, 4 query heads, 8 warps, 3 in flight", fused_kernel<16, 8, 8, 3, 1>, 8, 16, 8, 0},
  };
  std::printf("Qwen3-4B's q+k+v and a stand-in attention, %d layers; µs a layer (median of %d replays)\n\n", kLayers,
              chain_probe::kRepeats);
  std::printf("| kernel (clusters × blocks) | resident clusters | attention 0 µs | attention 3 µs |\n"
              "| --- | ---: | ---: | ---: |\n");
  {
    float ms[2];
    for (const int attention_ns : {0, 3000})
      ms[attention_ns > 0] = chain_probe::time_graph(timed, stream, [&] {
        for (int l = 0; l < kLayers; ++l) {
          launch(qkv_kernel, kRows / 2, 64, 1, 0, stream, static_cast<const uint4*>(weights + l * layer_chunks),
                 layer_x(l), outputs);
          launch(attention_kernel, kBlocks, kWarps * 32, 8, 0, stream, static_cast<const float*>(outputs), next_x(l),
                 attention_ns);
        }
      });
    std::printf("| chain: q+k+v, then the attention (16 × 8) | %d | %.2f | %.2f |\n",
                max_active_clusters(attention_kernel, 8, 0), 1e3 * ms[0] / kLayers, 1e3 * ms[1] / kLayers);
  }
  for (const FusedVariant& v : variants) {
    const int blocks = v.clusters * v.ranks, threads = v.warps * 32;
    const int resident = max_active_clusters(v.kernel, v.ranks, v.shared_bytes, blocks, threads);
    if (resident < v.clusters) {  // a cluster would wait for another to leave: not this design
      std::printf("| fused, %s | %d | – | – |\n", v.name, resident);
      continue;
    }
    float ms[2];
    for (const int attention_ns : {0, 3000})
      ms[attention_ns > 0] = chain_probe::time_graph(timed, stream, [&] {
        for (int l = 0; l < kLayers; ++l)
          launch(v.kernel, blocks, threads, v.ranks, v.shared_bytes, stream,
                 static_cast<const uint4*>(weights + l * layer_chunks), layer_x(l), next_x(l), attention_ns);
      });
    std::printf("| fused, %s | %d | %.2f | %.2f |\n", v.name, resident, 1e3 * ms[0] / kLayers, 1e3 * ms[1] / kLayers);
  }
  std::printf("\nq+k+v's bytes at 4.3 TB/s: %.2f µs a layer (fused 16 × 8 reads %.2f)\n",
              kRows * kHidden * 2.0 / 4.3e6, (kRows + 2048) * kHidden * 2.0 / 4.3e6);
  check(cudaStreamDestroy(stream), "stream");
  check(cudaFree(weights), "weights");
  check(cudaFree(x), "x");
  check(cudaFree(outputs), "outputs");
  return 0;
}
