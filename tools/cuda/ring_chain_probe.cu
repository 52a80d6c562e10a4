// A Qwen3-4B decode step's products as ONE persistent kernel fed by a shared-memory weight ring:
// what fraction of the copy bandwidth it streams, with the products' dependencies and a stand-in
// for the window attention's latency — and where a boundary's time goes.
//
// shared_stream_probe.cu measured that one producer thread an SM streams device memory into a
// ring of shared-memory stages at ~107% of the copy bandwidth, with as little as 64 KiB a ring.
// The weights depend on no activation, so such a producer never waits for the previous product:
// while the consumers wait for every SM to finish product p − 1 and rebuild its output as their
// input, the ring could keep HBM busy with the bytes of p, p + 1, … (8 × 20 KiB × 132 SMs ≈ 21 MB
// ≈ 4.7 µs of HBM time). This probe measures how much of that a real consumer keeps.
//
// The step: per layer q+k+v (6,144 × 2,560), o_proj (2,560 × 4,096), gate/up (19,456 × 2,560),
// down (2,560 × 9,728); 36 layers; the LM head (151,936 × 2,560): 8.04 GB of bf16. Each block
// owns rows [p.rows·b/G, p.rows·(b+1)/G) of every product; a stage holds whole rows (4 of k 2,560,
// 2 of 4,096, 1 of 9,728). Product p's input is product p − 1's output as a whole vector (o_proj:
// the first 4,096 of q+k+v's; down: silu(gate) · up), normalised by its rms as the RMSNorm would.
// Before each o_proj every block waits `attention_ns` more once q+k+v is done everywhere (the
// attention's latency, which this probe does not compute). The consumer warps form 1 or 2 groups
// taking turns on the stages; every warp of a stage's group takes part: warp w of the group's W
// computes row w / (W / rows a stage), a 1 / (W / rows) part of it, from x held in registers (its
// columns are the same in every row of a product); the parts meet in shared memory.
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a tools/cuda/ring_chain_probe.cu -o ring_chain_probe
//   ./ring_chain_probe [anatomy]   (Markdown tables; ~8.1 GB of device memory. anatomy: the
//                                   blocks' timestamps around layer 18's four boundaries)
//
// Measured (H200, 2026-12-04, copy bandwidth 4.16–4.24 TB/s; docs/notes/cuda-stop37-2026-12-04.md):
// - with the waits 82–88% of the copy bandwidth (≤ 2 stages in flight 82–88%), against 76–78% for
//   the launch chain of stop 26's probe — but about what the engine's own products reach (~85%:
//   stop 35's timeline); with no waits 85–88%, with 2 groups 90%;
// - a 10 µs stand-in attention a layer costs its full 10 µs (+360 µs a step) at every ring depth
//   (4, 6, 8, 9 stages), with or without pacing, at 8 or 16 warps, in 1 or 2 groups: each
//   boundary already idles the consumers ~3.6–4 µs, in which the ring (~4–5 µs of an SM's share of
//   HBM) fills — nothing is left to stream into during the attention;
// - the consumers alone (nothing streamed, no waits): 102–108% in 1 group, 134–136% in 2;
// - a boundary (anatomy): the outputs and the publish ~1–1.5 µs, every block's publish seen
//   ~0.8–1, x rebuilt ~0.75 (3.6 for down's 9,728 gate/up pairs), the first stage ~0.75; a
//   release-ordered add instead of fence + atomic, or polling without sleeping, changed nothing;
// - earlier versions: a warp a whole stage 79.5% / 69.2% (no waits / waits); x read from shared
//   memory instead of registers 79% / 77%; x rebuilt one L2 round trip a value ~50%.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "chain_probe_barriers.cuh"  // the ring's mbarriers, bulk copies and timer
#include "chain_probe_common.cuh"  // check, MedianTimer, copy_bandwidth

namespace {

using chain_probe::barrier_arrive;
using chain_probe::barrier_expect_bytes;
using chain_probe::barrier_init;
using chain_probe::barrier_wait;
using chain_probe::bulk_copy_to_shared;
using chain_probe::check;
using chain_probe::global_ns;
using chain_probe::load_acquire;

constexpr int kStageBytes = 20480;  // a row of k 9,728 (19,456 bytes) fits; 4 of k 2,560, 2 of 4,096
constexpr int kMaxK = 9728;
constexpr int kMaxBlockRows = 1152;  // the LM head's rows over 132 SMs (1,151.03)
constexpr int kLayers = 36;
constexpr int kMaxProducts = 4 * kLayers + 1;
constexpr int kRepeats = 5;

enum class Input { previous, first_4096, swiglu };  // how product p's input comes from p − 1's output

struct Product {
  std::int64_t offset;  // bytes into the weights
  int rows, k;
  Input input;
  bool after_attention;  // o_proj: wait attention_ns more
};

// The events each block stamps for a product (ring_chain's `stamps`).
enum Event {
  kDependencySeen, kStallOver, kInputRebuilt, kFirstStageLanded, kLastStageDone, kPublished,
  kFirstIssued, kLastIssued,  // by the producer
  kEvents
};

template <int Consumers>
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(Consumers) : "memory");
}

// The block's rows of product p, and its stages: rows_per_stage whole rows each.
struct Share {
  int first, rows, rows_per_stage, stages;
  __device__ Share(const Product& p, int block, int blocks) {
    first = int(std::int64_t(p.rows) * block / blocks);
    rows = int(std::int64_t(p.rows) * (block + 1) / blocks) - first;
    rows_per_stage = max(1, kStageBytes / (2 * p.k));
    stages = (rows + rows_per_stage - 1) / rows_per_stage;
  }
};

// What a run of ring_chain does besides streaming and computing every product.
struct RingOptions {
  bool wait = true;             // wait for product p − 1 everywhere before p (false: the ring's own pace)
  int attention_ns = 0;         // … and this much more before each o_proj
  bool compute = true;          // false: stages handed back unread
  bool consumers_only = false;  // nothing streamed or waited for: the consumers' own speed
  std::uint64_t* stamps = nullptr;  // [count][blocks][kEvents] %globaltimer, or none
};

// One block an SM: ConsumerWarps warps compute, one producer thread streams every product's rows
// into the ring of Stages stages by bulk copies, waiting only for a free stage and, when InFlight
// < Stages, until no more than InFlight of its copies are on their way.
// Groups: the consumer warps in that many groups taking turns on the stages (group g the block's
// stages g, g + Groups, …), so that one group's reductions overlap the next group's loads.
template <int Stages, int ConsumerWarps, int InFlight, int Groups>
  requires(ConsumerWarps / Groups >= 4 && InFlight >= 1 && InFlight <= Stages)
__global__ void __launch_bounds__(32 * (ConsumerWarps + 1), 1)
    ring_chain(const unsigned char* weights, const Product* products, int count, const float* input, float* outputs,
               int* done, const RingOptions options) {
  constexpr int kConsumers = 32 * ConsumerWarps;
  extern __shared__ __align__(128) unsigned char shared[];
  unsigned char* ring = shared;
  float* x = reinterpret_cast<float*>(shared + std::size_t(Stages) * kStageBytes);
  float* warp_sums = x + kMaxK;
  float* row_sums = warp_sums + ConsumerWarps;  // the block's rows of the product
  __shared__ __align__(8) std::uint64_t full[Stages], empty[Stages];
  __shared__ Product product_list[kMaxProducts];  // read once: a global load a product stalled the producer
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) product_list[i] = products[i];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int block = int(blockIdx.x), blocks = int(gridDim.x);
  const auto stamp = [&](int product, int event) {  // thread 0's, or the producer's
    if (options.stamps != nullptr && (threadIdx.x == 0 || event >= kFirstIssued))
      options.stamps[(std::size_t(product) * blocks + block) * kEvents + event] = global_ns();
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) barrier_init(&full[s], 1), barrier_init(&empty[s], ConsumerWarps / Groups);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == ConsumerWarps) {  // the producer
    if (lane != 0 || options.consumers_only) return;
    int stage = 0;
    std::uint32_t phase = 0;
    std::int64_t issued = 0;
    for (int i = 0; i < count; ++i) {
      const Product p = product_list[i];
      const Share share(p, block, blocks);
      const std::int64_t row_bytes = 2 * std::int64_t(p.k);
      for (int s = 0; s < share.stages; ++s) {
        const int row = share.first + s * share.rows_per_stage;
        const int rows = min(share.rows_per_stage, share.first + share.rows - row);
        barrier_wait(&empty[stage], phase ^ 1u);  // the first round passes: nothing to free yet
        if (InFlight < Stages && issued >= InFlight) {
          const std::int64_t landed = issued - InFlight;
          barrier_wait(&full[landed % Stages], std::uint32_t(landed / Stages) & 1u);
        }
        ++issued;
        const std::uint32_t bytes = std::uint32_t(rows * row_bytes);
        barrier_expect_bytes(&full[stage], bytes);
        bulk_copy_to_shared(ring + std::size_t(stage) * kStageBytes, weights + p.offset + row * row_bytes, bytes, &full[stage]);
        if (s == 0) stamp(i, kFirstIssued);
        if (s == share.stages - 1) stamp(i, kLastIssued);
        if (++stage == Stages) stage = 0, phase ^= 1u;
      }
    }
    return;
  }

  std::int64_t sequence = 0;  // the block's stages so far, over every product
  for (int i = 0; i < count; ++i) {
    const Product p = product_list[i];
    const Share share(p, block, blocks);
    // 1. Wait for product i − 1 everywhere (and the attention's stand-in latency).
    if (i > 0 && options.wait && !options.consumers_only) {
      if (threadIdx.x == 0) {
        while (load_acquire(done + i - 1) < blocks) __nanosleep(32);
        stamp(i, kDependencySeen);
        if (p.after_attention) {
          const std::uint64_t until = global_ns() + std::uint64_t(options.attention_ns);
          while (global_ns() < until) __nanosleep(64);
        }
      }
      consumers_sync<kConsumers>();
      stamp(i, kStallOver);
    }
    // 2. The input: product i − 1's output (L2), normalised by its rms — every load of a thread
    //    issued before any is used (one L2 round trip; one a value took the probe to ~50%).
    const float* previous = i == 0 ? input : outputs + std::size_t((i - 1) % 2) * 151936;
    constexpr int kQuads = (kMaxK / 4 + kConsumers - 1) / kConsumers;
    const bool swiglu = i > 0 && p.input == Input::swiglu;
    float4 first[kQuads], second[kQuads];
#pragma unroll
    for (int n = 0; n < kQuads; ++n) {
      const int q = int(threadIdx.x) + n * kConsumers;
      const bool inside = 4 * q < p.k;
      first[n] = inside ? __ldcg(reinterpret_cast<const float4*>(previous) + q) : make_float4(0, 0, 0, 0);
      second[n] = inside && swiglu ? __ldcg(reinterpret_cast<const float4*>(previous + p.k) + q) : make_float4(0, 0, 0, 0);
    }
    float squares = 0.0f;
#pragma unroll
    for (int n = 0; n < kQuads; ++n) {
      const int q = int(threadIdx.x) + n * kConsumers;
      if (4 * q >= p.k) break;
      float4 v = first[n];
      if (swiglu) {
        const auto silu_times = [](float gate, float up) { return gate / (1.0f + __expf(-gate)) * up; };
        v = make_float4(silu_times(v.x, second[n].x), silu_times(v.y, second[n].y), silu_times(v.z, second[n].z),
                        silu_times(v.w, second[n].w));
      }
      reinterpret_cast<float4*>(x)[q] = v;
      squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int j = int(threadIdx.x); j < share.rows; j += kConsumers) row_sums[j] = 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    if (lane == 0) warp_sums[warp] = squares;
    consumers_sync<kConsumers>();
    stamp(i, kInputRebuilt);
    float total = 0.0f;
    for (int w = 0; w < ConsumerWarps; ++w) total += warp_sums[w];
    const float inverse_rms = rsqrtf(total / float(p.k) + 1e-6f);
    // 3. The block's rows, stage by stage, every warp of the stage's group on it: warp w a part of
    //    row w / parts; its columns, the same in every row, with their x in registers.
    const int row_chunks = p.k / 8;
    constexpr int kGroupWarps = ConsumerWarps / Groups;
    const int group = warp / kGroupWarps, group_warp = warp % kGroupWarps;
    const int parts = kGroupWarps / share.rows_per_stage;  // warps a row (rows a stage: 4, 2 or 1)
    const int my_row = group_warp / parts, part = group_warp % parts;
    const int begin = row_chunks * part / parts, end = row_chunks * (part + 1) / parts;
    constexpr int kColumns = (40 + kGroupWarps - 1) / kGroupWarps;  // ⌈chunks of a part / 32⌉, k ≤ 9,728
    if (end - begin > 32 * kColumns) __trap();  // a part wider than the registers hold: never silently dropped
    float xr[kColumns][8];
#pragma unroll
    for (int n = 0; n < kColumns; ++n) {
      const int column = begin + lane + 32 * n;
      const float4 low = column < end ? reinterpret_cast<const float4*>(x)[2 * column] : make_float4(0, 0, 0, 0);
      const float4 high = column < end ? reinterpret_cast<const float4*>(x)[2 * column + 1] : make_float4(0, 0, 0, 0);
      xr[n][0] = low.x, xr[n][1] = low.y, xr[n][2] = low.z, xr[n][3] = low.w;
      xr[n][4] = high.x, xr[n][5] = high.y, xr[n][6] = high.z, xr[n][7] = high.w;
    }
    for (int s = 0; s < share.stages; ++s, ++sequence) {
      const int slot = int(sequence % Stages);
      const int first_row = s * share.rows_per_stage;
      const int rows = min(share.rows_per_stage, share.rows - first_row);
      if (int(sequence % Groups) != group) continue;
      if (!options.consumers_only) barrier_wait(&full[slot], std::uint32_t(sequence / Stages) & 1u);
      if (s < Groups) stamp(i, kFirstStageLanded);  // thread 0's group's first stage
      float dot = 0.0f, dot2 = 0.0f, dot3 = 0.0f, dot4 = 0.0f;  // four chains: the FMA latency
      if (my_row < rows && options.compute) {
        const uint4* row_weights =
            reinterpret_cast<const uint4*>(ring + std::size_t(slot) * kStageBytes) + my_row * row_chunks;
        uint4 raw[kColumns];
#pragma unroll
        for (int n = 0; n < kColumns; ++n)
          raw[n] = begin + lane + 32 * n < end ? row_weights[begin + lane + 32 * n] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int n = 0; n < kColumns; ++n) {
          const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&raw[n]);
          const float2 w0 = __bfloat1622float2(w[0]), w1 = __bfloat1622float2(w[1]);
          const float2 w2 = __bfloat1622float2(w[2]), w3 = __bfloat1622float2(w[3]);
          dot = fmaf(w0.x, xr[n][0], dot), dot2 = fmaf(w0.y, xr[n][1], dot2);
          dot3 = fmaf(w1.x, xr[n][2], dot3), dot4 = fmaf(w1.y, xr[n][3], dot4);
          dot = fmaf(w2.x, xr[n][4], dot), dot2 = fmaf(w2.y, xr[n][5], dot2);
          dot3 = fmaf(w3.x, xr[n][6], dot3), dot4 = fmaf(w3.y, xr[n][7], dot4);
        }
      }
      __syncwarp();
      if (lane == 0 && !options.consumers_only) barrier_arrive(&empty[slot]);  // the bytes are used: free the stage first
      if (options.compute) {
        dot = (dot + dot2) + (dot3 + dot4);
        for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        if (lane == 0 && my_row < rows) atomicAdd(row_sums + first_row + my_row, dot);
      }
    }
    // 4. The outputs, then "done" for this block.
    consumers_sync<kConsumers>();
    stamp(i, kLastStageDone);
    float* out = outputs + std::size_t(i % 2) * 151936;
    for (int j = int(threadIdx.x); j < share.rows; j += kConsumers) out[share.first + j] = row_sums[j] * inverse_rms;
    consumers_sync<kConsumers>();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(done + i, 1);
    }
    stamp(i, kPublished);
  }
}

__global__ void fill_weights(std::uint16_t* w, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    w[i] = std::uint16_t(0x3c00u + ((std::uint32_t(i) * 2654435761u) >> 24));  // bf16 in [0.0078, 0.0156)
}

struct Run {
  const unsigned char* weights;
  const Product* products;
  int count;
  const float* input;
  float* outputs;
  int* done;
  int sms;
  cudaStream_t stream;
};

template <int Stages, int ConsumerWarps = 8, int InFlight = Stages, int Groups = 1>
float time_ring(const chain_probe::MedianTimer& timed, const Run& r, const RingOptions& options) {
  const auto kernel = ring_chain<Stages, ConsumerWarps, InFlight, Groups>;
  const std::size_t shared =
      std::size_t(Stages) * kStageBytes + (kMaxK + ConsumerWarps + kMaxBlockRows) * sizeof(float);
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)), "shared limit");
  return timed([&] {
    check(cudaMemsetAsync(r.done, 0, r.count * sizeof(int), r.stream), "done");
    kernel<<<r.sms, 32 * (ConsumerWarps + 1), shared, r.stream>>>(r.weights, r.products, r.count, r.input, r.outputs,
                                                                  r.done, options);
    check(cudaGetLastError(), "ring_chain");
  });
}

// The blocks' stamps around layer 18's four boundaries: µs from the first block's publish of the
// product before, median / max over the blocks.
void print_anatomy(const std::vector<std::uint64_t>& stamps, int sms) {
  const auto at = [&](int product, int block, int event) {
    return stamps[(std::size_t(product) * sms + block) * kEvents + event];
  };
  std::printf("| into | last stage of the one before done | published | dependency seen | stall over | input rebuilt | "
              "first stage issued | first stage taken | last stage issued | last stage done |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  const char* names[4] = {"q+k+v", "o_proj", "gate/up", "down"};
  for (int n = 0; n < 4; ++n) {
    const int product = 4 * 18 + n;
    std::uint64_t reference = ~0ull;
    for (int b = 0; b < sms; ++b) reference = std::min(reference, at(product - 1, b, kPublished));
    std::printf("| %s |", names[n]);
    const auto column = [&](int of, int event) {
      std::vector<double> t;
      for (int b = 0; b < sms; ++b) t.push_back((double(at(of, b, event)) - double(reference)) / 1e3);
      std::sort(t.begin(), t.end());
      std::printf(" %.2f / %.2f |", t[t.size() / 2], t.back());
    };
    column(product - 1, kLastStageDone);
    column(product - 1, kPublished);
    for (int event : {kDependencySeen, kStallOver, kInputRebuilt, kFirstIssued, kFirstStageLanded, kLastIssued,
                      kLastStageDone})
      column(product, event);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool anatomy = argc > 1 && std::string_view(argv[1]) == "anatomy";
  if (argc > 2 || (argc == 2 && !anatomy)) {
    std::fprintf(stderr, "ring_chain_probe: unknown argument '%s' (anatomy)\n", argv[argc - 1]);
    return 2;
  }
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  std::vector<Product> chain;
  std::int64_t bytes = 0;
  const auto add = [&](int rows, int k, Input input, bool after_attention = false) {
    chain.push_back({bytes, rows, k, input, after_attention});
    bytes += 2 * std::int64_t(rows) * k;
  };
  for (int layer = 0; layer < kLayers; ++layer) {
    add(6144, 2560, Input::previous);
    add(2560, 4096, Input::first_4096, true);
    add(19456, 2560, Input::previous);
    add(2560, 9728, Input::swiglu);
  }
  add(151936, 2560, Input::previous);

  unsigned char* weights = nullptr;
  Product* products = nullptr;
  float *input = nullptr, *outputs = nullptr;
  int* done = nullptr;
  std::uint64_t* stamps = nullptr;
  const std::size_t stamp_count = chain.size() * std::size_t(sms) * kEvents;
  check(cudaMalloc(&weights, std::size_t(bytes)), "weights");
  fill_weights<<<sms * 8, 256>>>(reinterpret_cast<std::uint16_t*>(weights), bytes / 2);
  check(cudaMalloc(&products, chain.size() * sizeof(Product)), "products");
  check(cudaMemcpy(products, chain.data(), chain.size() * sizeof(Product), cudaMemcpyHostToDevice), "products");
  const std::vector<float> ones(2560, 1.0f);
  check(cudaMalloc(&input, ones.size() * sizeof(float)), "input");
  check(cudaMemcpy(input, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice), "input");
  check(cudaMalloc(&outputs, 2 * 151936 * sizeof(float)), "outputs");
  check(cudaMalloc(&done, chain.size() * sizeof(int)), "done");
  check(cudaMalloc(&stamps, stamp_count * sizeof(std::uint64_t)), "stamps");
  check(cudaDeviceSynchronize(), "setup");

  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const chain_probe::MedianTimer timed(stream, kRepeats);
  const double copy = chain_probe::copy_bandwidth(timed, weights, stream);  // within the weights: ≥ 2 GiB
  const Run run{weights, products, int(chain.size()), input, outputs, done, sms, stream};
  std::printf("%zu products, %.2f GB of bf16 weights; copy bandwidth %.2f TB/s; the step at it %.1f µs\n\n",
              chain.size(), bytes / 1e9, copy / 1e12, bytes / copy * 1e6);

  if (anatomy) {
    for (int attention_ns : {0, 10000}) {
      check(cudaMemset(stamps, 0, stamp_count * sizeof(std::uint64_t)), "stamps");
      const float ms = time_ring<8, 8, 2>(timed, run, {.attention_ns = attention_ns, .stamps = stamps});
      std::vector<std::uint64_t> host(stamp_count);
      check(cudaMemcpy(host.data(), stamps, stamp_count * sizeof(std::uint64_t), cudaMemcpyDeviceToHost), "stamps");
      std::printf("8 × 20 KiB, ≤ 2 in flight, %d µs stand-in attention: step %.1f µs (the last timed run's stamps)\n\n",
                  attention_ns / 1000, ms * 1e3);
      print_anatomy(host, sms);
      std::printf("\n");
    }
    return 0;
  }

  // The output's first 64 values summed: the same in every run that waits (each row is summed in
  // the same order), garbage in one that does not.
  std::printf("| ring | what runs | attention stand-in | step µs | of copy bandwidth | checksum |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
  const auto row = [&](const char* ring, const char* what, const RingOptions& options, float ms) {
    std::vector<float> head(64);
    check(cudaMemcpy(head.data(), outputs + std::size_t((chain.size() - 1) % 2) * 151936, head.size() * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "checksum");
    double sum = 0;
    for (float v : head) sum += v;
    std::printf("| %s | %s | %d µs | %.1f | %.1f%% | %.6g |\n", ring, what, options.attention_ns / 1000, ms * 1e3,
                100.0 * (bytes / copy) / (ms * 1e-3), sum);
  };
  const RingOptions unread{.wait = false, .compute = false}, no_waits{.wait = false}, waited{};
  const RingOptions alone{.wait = false, .consumers_only = true}, attention{.attention_ns = 10000};
  row("8 × 20 KiB", "stages handed back unread, no waits", unread, time_ring<8>(timed, run, unread));
  row("—", "the consumers alone (nothing streamed)", alone, time_ring<8>(timed, run, alone));
  row("8 × 20 KiB", "computed, no waits", no_waits, time_ring<8>(timed, run, no_waits));
  row("8 × 20 KiB", "computed, waits", waited, time_ring<8>(timed, run, waited));
  row("8 × 20 KiB", "computed, waits", attention, time_ring<8>(timed, run, attention));
  row("8 × 20 KiB, ≤ 2 in flight", "computed, waits", waited, time_ring<8, 8, 2>(timed, run, waited));
  row("8 × 20 KiB, ≤ 2 in flight", "computed, waits", attention, time_ring<8, 8, 2>(timed, run, attention));
  row("4 × 20 KiB", "computed, waits", waited, time_ring<4>(timed, run, waited));
  row("8 × 20 KiB, 16 consumer warps", "computed, waits", waited, time_ring<8, 16>(timed, run, waited));
  // Two groups of warps taking turns on the stages.
  row("—, 2 groups", "the consumers alone (nothing streamed)", alone, time_ring<8, 8, 8, 2>(timed, run, alone));
  row("8 × 20 KiB, 2 groups", "computed, no waits", no_waits, time_ring<8, 8, 8, 2>(timed, run, no_waits));
  row("8 × 20 KiB, 2 groups", "computed, waits", waited, time_ring<8, 8, 8, 2>(timed, run, waited));
  row("8 × 20 KiB, 2 groups", "computed, waits", attention, time_ring<8, 8, 8, 2>(timed, run, attention));
  row("8 × 20 KiB, 2 groups, ≤ 2 in flight", "computed, waits", attention, time_ring<8, 8, 2, 2>(timed, run, attention));
  row("—, 16 warps in 2 groups", "the consumers alone (nothing streamed)", alone, time_ring<8, 16, 8, 2>(timed, run, alone));
  row("8 × 20 KiB, 16 warps in 2 groups", "computed, waits", waited, time_ring<8, 16, 8, 2>(timed, run, waited));
  row("8 × 20 KiB, 16 warps in 2 groups", "computed, waits", attention, time_ring<8, 16, 8, 2>(timed, run, attention));
  return 0;
}
