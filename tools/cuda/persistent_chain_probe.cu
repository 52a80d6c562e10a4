// Can one persistent kernel stream a decode step's weights closer to the bandwidth limit than a
// chain of launches? Qwen3-4B's decode reaches 68.6% of its roofline; its products stream at
// 87–98% of the bandwidth where they run, and the rest is the latency between them (norms,
// attention, launch boundaries: the ablation in docs/performance/history.md). A megakernel would
// replace the ~250 launches of a step by grid-wide barriers inside one kernel, streaming the next product's
// weights while it waits. This probe measures that skeleton before anyone builds it.
//
// The chain: Qwen3-4B's per-layer products (q+k+v 6,144 × 2,560, o 2,560 × 4,096, gate+up
// 2 × 9,728 × 2,560, down 2,560 × 9,728; bf16, 36 layers: 7.27 GB) in order, each one depending on
// all of the previous one's output: every warp streams an even share of the product's 16-byte
// chunks (dot products with x in shared memory), writes one partial sum; then x for the next
// product is rebuilt in every block from all the partials and RMS-normalised (a block reduction),
// as a layer's RMSNorm would. No attention: this is the skeleton's floor, not a model.
//
// Variants, each timed over a whole chain (one decode step's products), median of repeats:
//   launches          one kernel per product in a CUDA graph, programmatic dependent launch
//                     (each kernel issues its first weight loads before waiting for the last)
//   persistent        one cooperative kernel, a grid barrier between products
//   persistent+ahead  the same, each warp's first weight loads of the next product issued before
//                     the barrier, so they are in flight while it waits
//   … + L2 lookahead  each warp, done with its share, asks L2 to prefetch the first BYTES of its
//                     share of the next product (cp.async.bulk.prefetch): HBM busy through the drain,
//                     the barrier or the launch boundary, the next product's first reads from L2
//   launches, ahead   how deep the loads before the wait go (none; 1, 2, 4 steps at 2 blocks an SM)
//   dataflow          one persistent kernel, per-slice counters instead of any barrier (dataflow_chain)
//   weight ring       one block an SM; a producer warp streams every product's weights into a ring of
//                     shared-memory stages by bulk copies (or cp.async), waiting only for free stages
//                     (ring_chain)
//   one kernel        every weight read once by one launch: the bandwidth a read-only stream reaches
//   fused MLP         three launches a layer: gate/up and down as one kernel split over the intermediate,
//                     its partial outputs added by atomics, or first summed in the block or the cluster
//                     (chain_probe_fused_mlp.cuh)
//   room for the next grids of 2 blocks an SM with the registers of 4, so that the next kernel's blocks
//                     are resident, their loads before the wait in flight, while this one streams
//   pipelined         each warp's next step of loads issued before it sums the step it holds
//                     (chain_probe_pipelined.cuh)
// With `bare`, the persistent kernel builds x once and never again: the barrier and the streaming
// alone, without the per-block rebuild and norm that a real chain needs.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/persistent_chain_probe.cu -o persistent_chain_probe
//   ./persistent_chain_probe [bare] [lookahead=BYTES]   (a Markdown table; ~7.3 GB of device memory;
//                                                       lookahead: per warp, default 4096)
//
// Measured (H200, 2026-12-02; docs/notes/cuda-stop16-2026-12-02.md, cuda-stop17-2026-12-02.md):
// launches 70–75% of the copy bandwidth (the same binary, runs of different machines), persistent
// 63–66%, persistent+ahead 60–63%; bare persistent 74.9%. A grid barrier per product costs as much
// as a launch boundary, and rebuilding x after it costs more. Loads before the wait: none 63.5%,
// 1 step 74.4%; at 2 blocks an SM 1, 2, 4 steps 64.7, 55.6, 57.9%. L2 lookahead (2 KiB a warp)
// 69.4%, persistent 62.7%. Dataflow (below): 8 rows × ¼ of k 56.4%, 32 rows × ¼ 37.9%, 8 rows ×
// ~4 / 8 / 16 KiB 40.4 / 51.2 / 54.7%. Weight ring (chain_probe_ring.cuh): 6 × 32 / 12 × 16 /
// 24 × 8 KiB stages 65–66 / 66–67 / 61%, and 57% with no waits at all: its bulk-copy streaming,
// one producer thread an SM, is itself the limit (withdrawn in stop 37, below). Nothing beat the
// launch chain.
// Stop 25 (three runs, one H200, copy bandwidth 4.19–4.21 TB/s): one kernel reading every weight
// once, no boundary, streams at 4.62–4.64 TB/s, 110% of the copy bandwidth (a read-only stream
// beats a copy); the launch chain 77.7–77.9%, so its 144 boundaries cost ~4.5 µs each against that
// ceiling. The ring with conflict-free x (split): 67.6–68.7% with waits, 62% without; taking the
// stages unread (handshake) 59.5–63.0% — bulk copies or a 1-, 2- or 4-warp cp.async producer
// (59.3–61.1%), 1 or 2 blocks an SM (58.8%) alike. Stop 25 concluded that copies into shared
// memory cap near 60%; WRONG (stop 37): shared_stream_probe.cu streams into a ring at ~107% with any
// producer and pattern. The cap was most likely this ring's consumers rebuilding x one L2 load at
// a time (ring_chain_probe.cu, with x loaded in one round trip: 82–88% with waits).
// Stop 26 (H200, copy bandwidth 4.24 TB/s, two runs each of three builds): the ceiling 106.9–110.0%,
// launches 76.4–77.9%; the fused MLP's three launches a layer 26–68% (chain_probe_fused_mlp.cuh
// says why): fewer launches by fusing across a full-vector dependency lose more inside the kernel
// than the boundary costs. Room for the next kernel (grids of 2 blocks an SM with the registers of
// 4) 68.0–68.4%, as 2 blocks an SM without it: co-residence does not pay for half the warps.
// **Pipelined** (one_product_pipelined: step s + 1's loads issued before step s is summed) at 4
// blocks an SM, steps of 4: **81.8–81.9%** against 77.4–77.6% for the same run's launches — the
// first variant to beat the launch chain; at 2 blocks of steps of 8 80.4%, 3 blocks of 8 77.4%.
// (A first try that consumed the loads before the wait ahead of the loop, with the next step's
// loads only after them, fell to 70.5%: the order of loads and sums inside a warp is the lever.)
// dependency_release_probe.cu: a dependent launch returns from its wait 0.5 µs after the previous
// kernel's last block exits (%globaltimer's 256 ns ticks), so the boundary's ~3.5 µs beyond its
// bytes is the memory pipeline's drain and refill, not the launch.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "chain_probe_common.cuh"
#include "chain_probe_dataflow.cuh"
#include "chain_probe_fused_mlp.cuh"
#include "chain_probe_pipelined.cuh"
#include "chain_probe_ring.cuh"

namespace cg = cooperative_groups;
using namespace chain_probe;

namespace {

// This warp's share of one product: steps of kUnroll chunks a lane; `ahead` holds the first
// AheadSteps steps' loads when the caller issued them early. Writes the warp's partial sum.
template <int AheadSteps, int Unroll>
__device__ void stream_product(const uint4* weights, const Product& p, const float* x, int warp, int warps,
                               const uint4 (&ahead)[AheadSteps][Unroll], bool have_ahead, float* partials) {
  const int lane = threadIdx.x % 32;
  std::int64_t begin, end;
  share_of(p, warp, warps, begin, end);
  float sum = 0.0f;
  int step = 0;
  for (std::int64_t first = begin; first < end; first += 32 * Unroll, ++step) {
    uint4 w[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::int64_t c = first + u * 32 + lane;
      bool from_ahead = false;
#pragma unroll
      for (int a = 0; a < AheadSteps; ++a)
        if (have_ahead && step == a) w[u] = ahead[a][u], from_ahead = true;
      if (!from_ahead && c < end) w[u] = __ldcs(weights + c);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::int64_t c = first + u * 32 + lane;
      if (c < end) sum += dot8(w[u], x, c);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) partials[warp] = sum;
}

// Asks L2 to fetch the first `bytes` of this warp's share of `p` (one bulk prefetch by lane 0;
// a hint: nothing waits for it).
__device__ void prefetch_share_to_l2(const uint4* weights, const Product& p, int warp, int warps, int bytes) {
  std::int64_t begin, end;
  share_of(p, warp, warps, begin, end);
  const std::int64_t chunks = min(end - begin, std::int64_t(bytes / 16));
  if (threadIdx.x % 32 == 0 && chunks > 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(weights + begin), "r"(int(chunks * 16)) : "memory");
}

// The first AheadSteps steps' loads of this warp's share of `p`.
template <int AheadSteps, int Unroll>
__device__ void load_ahead(const uint4* weights, const Product& p, int warp, int warps,
                           uint4 (&ahead)[AheadSteps][Unroll]) {
  const int lane = threadIdx.x % 32;
  std::int64_t begin, end;
  share_of(p, warp, warps, begin, end);
#pragma unroll
  for (int a = 0; a < AheadSteps; ++a)
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::int64_t c = begin + (a * Unroll + u) * 32 + lane;
      ahead[a][u] = c < end ? __ldcs(weights + c) : make_uint4(0, 0, 0, 0);
    }
}

// Two partial buffers alternate: product i reads buffer (i + 1) % 2 and writes buffer i % 2.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    persistent_chain(const uint4* weights, const Product* products, int count, float* partials, bool ahead_loads,
                     int lookahead_bytes, bool bare) {
  __shared__ float x[kHidden];
  const int warps = gridDim.x * (kThreads / 32), warp = blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  cg::grid_group grid = cg::this_grid();
  uint4 ahead[1][kUnroll];
  bool have_ahead = false;
  for (int i = 0; i < count; ++i) {
    if (i == 0 || !bare) rebuild_x(partials + ((i + 1) % 2) * warps, warps, x);
    stream_product(weights, products[i], x, warp, warps, ahead, have_ahead, partials + (i % 2) * warps);
    have_ahead = ahead_loads && i + 1 < count;
    if (have_ahead) load_ahead(weights, products[i + 1], warp, warps, ahead);
    if (lookahead_bytes > 0 && i + 1 < count) prefetch_share_to_l2(weights, products[i + 1], warp, warps, lookahead_bytes);
    grid.sync();
  }
}

// One product of the chain. AheadSteps steps of this warp's weights are loaded before the wait
// for the previous kernel (0: none); BlocksPerSm sets the register budget that they need; Unroll
// loads a lane make a step.
template <int AheadSteps, int BlocksPerSm, int Unroll = kUnroll>
__global__ void __launch_bounds__(kThreads, BlocksPerSm)
    one_product(const uint4* weights, Product product, Product next, int lookahead_bytes, const float* in, int in_count,
                float* out) {
  __shared__ float x[kHidden];
  const int warps = gridDim.x * (kThreads / 32), warp = blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  cudaTriggerProgrammaticLaunchCompletion();
  constexpr int kSteps = AheadSteps > 0 ? AheadSteps : 1;
  uint4 ahead[kSteps][Unroll];
  if (AheadSteps > 0) load_ahead(weights, product, warp, warps, ahead);  // the weights depend on no earlier kernel
  cudaGridDependencySynchronize();
  rebuild_x(in, in_count, x);
  stream_product(weights, product, x, warp, warps, ahead, AheadSteps > 0, out);
  if (lookahead_bytes > 0 && next.chunks > 0) prefetch_share_to_l2(weights, next, warp, warps, lookahead_bytes);
}


}  // namespace

int main(int argc, char** argv) {
  bool bare = false;
  int lookahead = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "bare") bare = true;
    else if (arg.starts_with("lookahead=")) lookahead = std::atoi(argv[i] + 10);
    else {
      std::fprintf(stderr, "persistent_chain_probe: unknown argument '%s' (bare, lookahead=BYTES)\n", argv[i]);
      return 2;
    }
  }
  if (lookahead < 0 || lookahead % 16 != 0) {
    std::fprintf(stderr, "persistent_chain_probe: lookahead=%d is not a multiple of 16 bytes ≥ 0\n", lookahead);
    return 2;
  }
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  int resident = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, persistent_chain, kThreads, 0), "occupancy");
  const int blocks = sms * std::min(resident, kBlocksPerSm), warps = blocks * (kThreads / 32);

  // Qwen3-4B's per-layer products, k folded into the chunk counts (rows × k / 8).
  const std::int64_t layer_chunks[4] = {6144LL * 2560 / 8, 2560LL * 4096 / 8, 2 * 9728LL * 2560 / 8, 2560LL * 9728 / 8};
  std::vector<Product> chain;
  std::int64_t total = 0;
  for (int layer = 0; layer < kLayers; ++layer)
    for (std::int64_t chunks : layer_chunks) chain.push_back({total, chunks}), total += chunks;
  const double bytes = double(total) * 16;

  uint4* weights = nullptr;
  float* partials = nullptr;
  Product* products = nullptr;
  check(cudaMalloc(&weights, std::size_t(total) * 16), "weights");
  check(cudaMemset(weights, 0x3c, std::size_t(total) * 16), "weights fill");  // bf16 ≈ 0.0115
  check(cudaMalloc(&partials, 2 * std::size_t(warps) * sizeof(float)), "partials");
  check(cudaMemset(partials, 0, 2 * std::size_t(warps) * sizeof(float)), "partials");
  check(cudaMalloc(&products, chain.size() * sizeof(Product)), "products");
  check(cudaMemcpy(products, chain.data(), chain.size() * sizeof(Product), cudaMemcpyHostToDevice), "products");

  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const MedianTimer timed(stream, kRepeats);
  const double copy_bandwidth = chain_probe::copy_bandwidth(timed, weights, stream);

  // The median time of one replay of the graph that `launch` captures on `stream`; programmatic
  // dependent launch for the kernels it launches with `dependent_launch`.
  cudaLaunchAttribute dependent_launch{};
  dependent_launch.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent_launch.val.programmaticStreamSerializationAllowed = 1;
  const auto time_graph = [&](auto&& launch) {
    return chain_probe::time_graph(timed, stream, launch);
  };

  // launches: the chain as one CUDA graph of programmatic dependent launches, each kernel
  // optionally prefetching the next product's first bytes into L2 when done.
  const auto launches = [&](auto kernel, int blocks_per_sm, int lookahead_bytes) {
    const int launch_blocks = sms * blocks_per_sm, launch_warps = launch_blocks * (kThreads / 32);
    return time_graph([&] {
      for (std::size_t i = 0; i < chain.size(); ++i) {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(launch_blocks), config.blockDim = dim3(kThreads), config.stream = stream;
        config.attrs = &dependent_launch, config.numAttrs = 1;
        const Product next = i + 1 < chain.size() ? chain[i + 1] : Product{0, 0};
        check(cudaLaunchKernelEx(&config, kernel, static_cast<const uint4*>(weights), chain[i], next, lookahead_bytes,
                                 static_cast<const float*>(partials + ((i + 1) % 2) * launch_warps), launch_warps,
                                 partials + (i % 2) * launch_warps),
              "one_product");
      }
    });
  };
  const float launches_ms = launches(one_product<1, kBlocksPerSm>, kBlocksPerSm, 0);
  const float launches_lookahead_ms = launches(one_product<1, kBlocksPerSm>, kBlocksPerSm, lookahead);
  // How deep the loads before the wait go: none, and 2 or 4 steps (2 or 4 KiB a warp, 2 blocks an SM
  // for the registers), against the 1 step of 4 blocks an SM above.
  const float no_ahead_ms = launches(one_product<0, kBlocksPerSm>, kBlocksPerSm, 0);
  const float ahead1_two_blocks_ms = launches(one_product<1, 2>, 2, 0);
  const float ahead2_ms = launches(one_product<2, 2>, 2, 0);
  const float ahead4_ms = launches(one_product<4, 2>, 2, 0);
  // Room for the next kernel: grids of 2 blocks an SM whose registers fit 4 blocks an SM, so that
  // the next kernel's blocks are resident (and their loads before the wait in flight) while this
  // one streams, not only as its blocks leave.
  const float room1_ms = launches(one_product<1, kBlocksPerSm>, 2, 0);
  const float room2_ms = launches(one_product<2, kBlocksPerSm>, 2, 0);
  const float room1_one_block_ms = launches(one_product<1, kBlocksPerSm>, 1, 0);
  // 8 loads a lane a step (4 KiB a warp in flight, as many bytes an SM as 4 blocks of 4) at 2 blocks
  // an SM, the registers of 2 (with the registers of 4 it spills: not measured).
  const float no_room_deep_ms = launches(one_product<1, 2, 8>, 2, 0);
  const float pipelined_4_ms = launches(one_product_pipelined<kBlocksPerSm, 4>, kBlocksPerSm, 0);
  const float pipelined_2x8_ms = launches(one_product_pipelined<2, 8>, 2, 0);
  const float pipelined_3x8_ms = launches(one_product_pipelined<3, 8>, 3, 0);
  const float pipelined_2x4_ms = launches(one_product_pipelined<kBlocksPerSm, 4>, 2, 0);

  // fused MLP: per layer q+k+v and o as above, then gate/up and down as one kernel of
  // blocks_per_sm blocks an SM of `threads` (chain_probe_fused_mlp.cuh) adding into that layer's output.
  float* mlp_out = nullptr;
  check(cudaMalloc(&mlp_out, std::size_t(kLayers) * kHidden * sizeof(float)), "mlp outputs");
  // kernel: fused_mlp, or an instance of fused_mlp_cluster (cluster_size > 1: launched in clusters).
  const auto fused_mlp_launches = [&](auto kernel, int threads, int blocks_per_sm, int cluster_size) {
    const int product_blocks = sms * kBlocksPerSm, product_warps = product_blocks * (kThreads / 32);
    return time_graph([&] {
      check(cudaMemsetAsync(mlp_out, 0, std::size_t(kLayers) * kHidden * sizeof(float), stream), "zero");
      for (int layer = 0; layer < kLayers; ++layer) {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(product_blocks), config.blockDim = dim3(kThreads), config.stream = stream;
        config.attrs = &dependent_launch, config.numAttrs = 1;
        const Product* p = chain.data() + 4 * layer;
        const float* layer_in = layer == 0 ? partials + product_warps : mlp_out + std::size_t(layer - 1) * kHidden;
        check(cudaLaunchKernelEx(&config, one_product<1, kBlocksPerSm>, static_cast<const uint4*>(weights), p[0], p[1],
                                 0, layer_in, layer == 0 ? product_warps : kHidden, partials),
              "q+k+v");
        check(cudaLaunchKernelEx(&config, one_product<1, kBlocksPerSm>, static_cast<const uint4*>(weights), p[1], p[2],
                                 0, static_cast<const float*>(partials), product_warps, partials + product_warps),
              "o");
        cudaLaunchAttribute attributes[2] = {dependent_launch, {}};
        attributes[1].id = cudaLaunchAttributeClusterDimension;
        attributes[1].val.clusterDim.x = cluster_size, attributes[1].val.clusterDim.y = 1;
        attributes[1].val.clusterDim.z = 1;
        config.attrs = attributes, config.numAttrs = cluster_size > 1 ? 2 : 1;
        config.gridDim = dim3(sms * blocks_per_sm), config.blockDim = dim3(threads);
        check(cudaLaunchKernelEx(&config, kernel, static_cast<const uint4*>(weights), p[2].first, p[3].first,
                                 static_cast<const float*>(partials + product_warps), product_warps,
                                 mlp_out + std::size_t(layer) * kHidden),
              "fused MLP");
      }
    });
  };
  const float fused_mlp_1_ms = fused_mlp_launches(fused_mlp, kThreads, 1, 1);
  const float fused_mlp_2_ms = fused_mlp_launches(fused_mlp, kThreads, 2, 1);
  const float fused_mlp_4_ms = fused_mlp_launches(fused_mlp, kThreads, 4, 1);
  // The same with the down partials summed in each block, then across a cluster, before the atomics.
  const float fused_1024_c1_ms = fused_mlp_launches(fused_mlp_cluster<1024, 1>, 1024, 1, 1);
  const float fused_1024_c4_ms = fused_mlp_launches(fused_mlp_cluster<1024, 4>, 1024, 1, 4);
  const float fused_512_c1_ms = fused_mlp_launches(fused_mlp_cluster<512, 1>, 512, 2, 1);
  const float fused_512_c4_ms = fused_mlp_launches(fused_mlp_cluster<512, 4>, 512, 2, 4);
  const float fused_512_c8_ms = fused_mlp_launches(fused_mlp_cluster<512, 8>, 512, 2, 8);
  std::vector<float> mlp_check(kHidden);
  check(cudaMemcpy(mlp_check.data(), mlp_out + std::size_t(kLayers - 1) * kHidden, kHidden * sizeof(float),
                   cudaMemcpyDeviceToHost), "mlp outputs");

  const auto persistent = [&](bool ahead, int lookahead_bytes) {
    const uint4* w = weights;
    const Product* p = products;
    int count = int(chain.size());
    float* out = partials;
    void* args[] = {&w, &p, &count, &out, &ahead, &lookahead_bytes, &bare};
    return timed([&] {
      check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_chain), dim3(blocks), dim3(kThreads), args, 0,
                                        stream),
            "persistent_chain");
    });
  };
  const float stream_all_ms = timed([&] {
    // The ceiling: every weight of the chain read once by one kernel, no boundary at all.
    stream_shares<kThreads, kBlocksPerSm, kUnroll><<<sms * kBlocksPerSm, kThreads, 0, stream>>>(
        weights, total, reinterpret_cast<unsigned*>(partials));
    check(cudaGetLastError(), "stream_shares");
  });
  const float persistent_ms = persistent(false, 0), ahead_ms = persistent(true, 0);
  const float persistent_lookahead_ms = persistent(false, lookahead);

  // dataflow: the same products as items with counters (dataflow_chain above).
  const int shapes[4][2] = {{6144, 2560}, {2560, 4096}, {2 * 9728, 2560}, {2560, 9728}};  // rows, k
  std::vector<FlowProduct> flow;
  int activation_floats = 2560, counter_ints = 0;  // the first product's input, then every output
  std::int64_t flow_chunk = 0, flow_items = 0;
  for (int layer = 0; layer < kLayers; ++layer)
    for (const auto& shape : shapes) {
      FlowProduct f{};
      f.first_chunk = flow_chunk, f.first_item = flow_items;
      f.rows = shape[0], f.k_chunks = shape[1] / 8, f.tiles = shape[0] / kTileRows;
      f.slices = std::clamp(kTileRows * shape[1] * 2 / kItemBytes, 1, kMaxSlices);
      f.input = flow.empty() ? 0 : flow.back().output;
      f.output = activation_floats, activation_floats += f.rows;
      f.tile_counters = counter_ints, counter_ints += f.tiles;
      f.slice_counters = counter_ints, counter_ints += f.slices;
      for (int t = 0; !flow.empty() && t < flow.back().tiles; ++t) ++f.needed[t * f.slices / flow.back().tiles];
      flow_chunk += std::int64_t(f.rows) * f.k_chunks, flow_items += std::int64_t(f.slices) * f.tiles;
      flow.push_back(f);
    }
  if (flow_chunk != total) {
    std::fprintf(stderr, "persistent_chain_probe: the dataflow chain has %lld chunks, the chain %lld\n",
                 (long long)flow_chunk, (long long)total);
    return 1;
  }
  FlowProduct* flow_products = nullptr;
  float* activations = nullptr;
  int* counters = nullptr;
  check(cudaMalloc(&flow_products, flow.size() * sizeof(FlowProduct)), "flow products");
  check(cudaMemcpy(flow_products, flow.data(), flow.size() * sizeof(FlowProduct), cudaMemcpyHostToDevice), "flow");
  check(cudaMalloc(&activations, std::size_t(activation_floats) * sizeof(float)), "activations");
  check(cudaMalloc(&counters, std::size_t(counter_ints) * sizeof(int)), "counters");
  int flow_resident = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&flow_resident, dataflow_chain, kThreads, 0), "occupancy");
  const int flow_blocks = sms * std::min(flow_resident, kBlocksPerSm);
  const float dataflow_ms = timed([&] {
    check(cudaMemsetAsync(activations, 0, std::size_t(activation_floats) * sizeof(float), stream), "zero");
    check(cudaMemsetAsync(counters, 0, std::size_t(counter_ints) * sizeof(int), stream), "zero");
    const uint4* w = weights;
    const FlowProduct* fp = flow_products;
    int count = int(flow.size());
    std::int64_t items = flow_items;
    void* args[] = {&w, &fp, &count, &items, &activations, &counters};
    check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(dataflow_chain), dim3(flow_blocks), dim3(kThreads), args,
                                      0, stream),
          "dataflow_chain");
  });
  std::vector<int> counts(counter_ints);  // every row tile counted kSlices times: every item ran
  check(cudaMemcpy(counts.data(), counters, counts.size() * sizeof(int), cudaMemcpyDeviceToHost), "counters");
  for (const FlowProduct& f : flow)
    for (int t = 0; t < f.tiles; ++t)
      if (counts[f.tile_counters + t] != f.slices) {
        std::fprintf(stderr, "persistent_chain_probe: dataflow tile %d counted %d times\n", t, counts[f.tile_counters + t]);
        return 1;
      }

  // weight ring: one block an SM, a producer warp streaming weights into shared memory by bulk
  // copies, waiting for nothing but a free stage (chain_probe_ring.cuh).
  int* done = nullptr;
  check(cudaMalloc(&done, chain.size() * sizeof(int)), "done counters");
  const auto ring = [&](auto kernel, std::size_t shared_bytes, bool wait = true, int producer_warps = 1,
                        int blocks_per_sm = 1) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)), "ring smem");
    const uint4* w = weights;
    const Product* p = products;
    int count = int(chain.size());
    void* args[] = {&w, &p, &count, &partials, &done, &wait};
    return timed([&] {
      check(cudaMemsetAsync(done, 0, chain.size() * sizeof(int), stream), "zero");
      check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), dim3(sms * blocks_per_sm), dim3(ring_threads(producer_warps)), args,
                                        shared_bytes, stream),
            "ring_chain");
    });
  };
  using enum RingConsumer;
  const float ring_scalar_ms = ring(ring_chain<16384, 12, scalar>, ring_shared_bytes<16384, 12>());
  const float ring_32k_ms = ring(ring_chain<32768, 6, split>, ring_shared_bytes<32768, 6>());
  const float ring_16k_ms = ring(ring_chain<16384, 12, split>, ring_shared_bytes<16384, 12>());
  const float ring_8k_ms = ring(ring_chain<8192, 24, split>, ring_shared_bytes<8192, 24>());
  const float ring_no_wait_ms = ring(ring_chain<16384, 12, split>, ring_shared_bytes<16384, 12>(), false);
  const float ring_handshake_16k_ms = ring(ring_chain<16384, 12, handshake>, ring_shared_bytes<16384, 12>(), false);
  const float ring_handshake_32k_ms = ring(ring_chain<32768, 6, handshake>, ring_shared_bytes<32768, 6>(), false);
  using enum RingProducer;
  constexpr std::size_t ring_16k = ring_shared_bytes<16384, 12>();
  const float copier1_handshake_ms = ring(ring_chain<16384, 12, handshake, cp_async, 1>, ring_16k, false, 1);
  const float copier2_handshake_ms = ring(ring_chain<16384, 12, handshake, cp_async, 2>, ring_16k, false, 2);
  const float copier4_handshake_ms = ring(ring_chain<16384, 12, handshake, cp_async, 4>, ring_16k, false, 4);
  const float copier1_ms = ring(ring_chain<16384, 12, split, cp_async, 1>, ring_16k, true, 1);
  const float copier2_ms = ring(ring_chain<16384, 12, split, cp_async, 2>, ring_16k, true, 2);
  const float copier4_ms = ring(ring_chain<16384, 12, split, cp_async, 4>, ring_16k, true, 4);
  constexpr std::size_t ring_6x16k = ring_shared_bytes<16384, 6>();
  const float bulk_2_blocks_handshake_ms = ring(ring_chain<16384, 6, handshake, bulk, 1, 2>, ring_6x16k, false, 1, 2);
  const float bulk_2_blocks_ms = ring(ring_chain<16384, 6, split, bulk, 1, 2>, ring_6x16k, true, 1, 2);
  const float copier4_no_wait_ms = ring(ring_chain<16384, 12, split, cp_async, 4>, ring_16k, false, 4);
  std::vector<int> done_counts(chain.size());  // every block finished every product
  check(cudaMemcpy(done_counts.data(), done, done_counts.size() * sizeof(int), cudaMemcpyDeviceToHost), "done");
  for (int d : done_counts)
    if (d != sms) {
      std::fprintf(stderr, "persistent_chain_probe: a ring product was finished by %d blocks of %d\n", d, sms);
      return 1;
    }

  std::printf("%d SMs, %d blocks of %d threads (%d warps); %zu products, %.2f GB; copy bandwidth %.2f TB/s\n\n", sms,
              blocks, kThreads, warps, chain.size(), bytes * 1e-9, copy_bandwidth * 1e-12);
  std::printf("| variant | ms per chain | TB/s | of copy bandwidth | µs per product boundary beyond the bytes |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  const double ideal_ms = bytes / copy_bandwidth * 1e3;
  const auto row = [&](const char* name, float ms) {
    std::printf("| %s | %.3f | %.2f | %.1f%% | %.2f |\n", name, ms, bytes / (ms * 1e-3) * 1e-12,
                100.0 * ideal_ms / ms, (ms - ideal_ms) * 1e3 / chain.size());
  };
  row("one kernel reading every weight once (no boundary: the ceiling)", stream_all_ms);
  row("launches (graph, dependent launch)", launches_ms);
  std::printf("| launches + L2 lookahead of %d bytes a warp | %.3f | %.2f | %.1f%% | %.2f |\n", lookahead,
              launches_lookahead_ms, bytes / (launches_lookahead_ms * 1e-3) * 1e-12, 100.0 * ideal_ms / launches_lookahead_ms,
              (launches_lookahead_ms - ideal_ms) * 1e3 / chain.size());
  row("launches, no loads before the wait", no_ahead_ms);
  row("launches, 3 a layer: gate/up and down one kernel (split over the intermediate, atomics), 1 block an SM",
      fused_mlp_1_ms);
  row("launches, 3 a layer: fused MLP of 2 blocks an SM", fused_mlp_2_ms);
  row("launches, 3 a layer: fused MLP of 4 blocks an SM", fused_mlp_4_ms);
  row("launches, 3 a layer: fused MLP, partials summed in the block, 1 block an SM of 1,024 threads", fused_1024_c1_ms);
  row("launches, 3 a layer: fused MLP, 1 block an SM of 1,024, summed over clusters of 4", fused_1024_c4_ms);
  row("launches, 3 a layer: fused MLP, 2 blocks an SM of 512, summed in the block", fused_512_c1_ms);
  row("launches, 3 a layer: fused MLP, 2 blocks an SM of 512, summed over clusters of 4", fused_512_c4_ms);
  row("launches, 3 a layer: fused MLP, 2 blocks an SM of 512, summed over clusters of 8", fused_512_c8_ms);
  std::printf("| (fused MLP output check: last layer's out[0], out[2559] = %g, %g) | | | | |\n", mlp_check[0],
              mlp_check[kHidden - 1]);
  row("launches, grids of 2 blocks an SM with the registers of 4 (room for the next), 1 step before the wait", room1_ms);
  row("launches, grids of 2 blocks an SM with the registers of 4, 2 steps before the wait", room2_ms);
  row("launches, grids of 1 block an SM with the registers of 4, 1 step before the wait", room1_one_block_ms);
  row("launches, grids of 2 blocks an SM with the registers of 2, steps of 8 loads a lane, 1 before the wait",
      no_room_deep_ms);
  row("launches, pipelined (next step's loads before this one's sums), 4 blocks an SM, steps of 4", pipelined_4_ms);
  row("launches, pipelined, 2 blocks an SM, steps of 8", pipelined_2x8_ms);
  row("launches, pipelined, 3 blocks an SM, steps of 8", pipelined_3x8_ms);
  row("launches, pipelined, 2 blocks an SM with the registers of 4 (room for the next), steps of 4", pipelined_2x4_ms);
  row("launches, 2 blocks an SM, 1 step (2 KiB a warp) before the wait", ahead1_two_blocks_ms);
  row("launches, 2 blocks an SM, 2 steps (4 KiB a warp) before the wait", ahead2_ms);
  row("launches, 2 blocks an SM, 4 steps (8 KiB a warp) before the wait", ahead4_ms);
  std::printf("| dataflow: items of %d rows × ~%d bytes, counters instead of barriers (%d blocks, no norm) | %.3f | %.2f | "
              "%.1f%% | %.2f |\n", kTileRows, kItemBytes, flow_blocks, dataflow_ms, bytes / (dataflow_ms * 1e-3) * 1e-12,
              100.0 * ideal_ms / dataflow_ms, (dataflow_ms - ideal_ms) * 1e3 / chain.size());
  row("weight ring, scalar x (stop 17): 12 stages of 16 KiB, consumers wait on counters", ring_scalar_ms);
  row("weight ring, split x: 1 block an SM (16 consumer warps), 6 stages of 32 KiB, consumers wait on counters",
      ring_32k_ms);
  row("weight ring, split x: 12 stages of 16 KiB", ring_16k_ms);
  row("weight ring, split x: 24 stages of 8 KiB", ring_8k_ms);
  row("weight ring, split x: 12 stages of 16 KiB, no waits", ring_no_wait_ms);
  row("weight ring, handshake only (stages taken unread, no waits): 12 × 16 KiB", ring_handshake_16k_ms);
  row("weight ring, handshake only: 6 × 32 KiB", ring_handshake_32k_ms);
  row("weight ring, cp.async producer of 1 warp, handshake only: 12 × 16 KiB", copier1_handshake_ms);
  row("weight ring, cp.async producer of 2 warps, handshake only", copier2_handshake_ms);
  row("weight ring, cp.async producer of 4 warps, handshake only", copier4_handshake_ms);
  row("weight ring, cp.async producer of 1 warp, split x, waits", copier1_ms);
  row("weight ring, cp.async producer of 2 warps, split x, waits", copier2_ms);
  row("weight ring, cp.async producer of 4 warps, split x, waits", copier4_ms);
  row("weight ring, cp.async producer of 4 warps, split x, no waits", copier4_no_wait_ms);
  row("weight ring, bulk copies, 2 blocks an SM of 6 × 16 KiB, handshake only", bulk_2_blocks_handshake_ms);
  row("weight ring, bulk copies, 2 blocks an SM of 6 × 16 KiB, split x, waits", bulk_2_blocks_ms);
  row(bare ? "persistent, grid barrier (bare: x built once)" : "persistent, grid barrier", persistent_ms);
  row(bare ? "persistent, next loads before the barrier (bare)" : "persistent, next loads before the barrier", ahead_ms);
  std::printf("| persistent + L2 lookahead of %d bytes a warp%s | %.3f | %.2f | %.1f%% | %.2f |\n", lookahead,
              bare ? " (bare)" : "", persistent_lookahead_ms, bytes / (persistent_lookahead_ms * 1e-3) * 1e-12,
              100.0 * ideal_ms / persistent_lookahead_ms, (persistent_lookahead_ms - ideal_ms) * 1e3 / chain.size());
  return 0;
}
