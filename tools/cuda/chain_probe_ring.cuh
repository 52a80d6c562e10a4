// The weight-ring variant of tools/cuda/persistent_chain_probe.cu: one persistent block an SM in
// which a producer warp streams the block's share of every product, one product after another,
// into a ring of shared-memory stages by bulk copies (TMA, cp.async.bulk), and never waits for
// anything but a free stage: the weights depend on no activation, so HBM keeps working while the
// consumer warps wait for the previous product to finish everywhere (a counter per product, as
// the grid barrier of the persistent variant) and rebuild x. With S stages of B bytes the ring
// holds S·B an SM (6 × 32 KiB × 132 SMs ≈ 26 MB, ~6 µs of HBM time at 4.2 TB/s): enough to cover
// a product boundary many times over, if the consumers keep up.
//
// Stop 17 measured this ring at 57% of the copy bandwidth with no waits at all. Its consumers read
// each chunk's 8 x values as scalar loads 32 bytes apart across the warp (8-way bank conflicts:
// ~68 shared-memory wavefronts per 512 bytes of weights); RingConsumer::split keeps x as two arrays
// of float4 (x[8c..8c+3] and x[8c+4..8c+7] for chunk c), conflict-free: 12 wavefronts. That was not
// the limit: RingConsumer::handshake takes the stages without reading them and streams no faster
// (59.5–63% in stop 25), with bulk copies or RingProducer::cp_async from 1–4 warps, at 1 or 2
// blocks an SM. Stop 25 read that as "the copies into shared memory are the limit"; stop 37 showed
// otherwise (shared_stream_probe.cu: ~107% for the same copies). Most likely rebuild_x holds the
// ring back here: one L2 load a value, in a loop, under the ring's traffic (the same rebuild took
// ring_chain_probe.cu's first version to ~50%; loaded in one round trip, 82–88%).
#pragma once

#include "chain_probe_barriers.cuh"
#include "chain_probe_common.cuh"

namespace chain_probe {

constexpr int kRingConsumerWarps = 16;
constexpr int kConsumerThreads = 32 * kRingConsumerWarps;
// The block: the consumer warps, then the producer warps.
constexpr int ring_threads(int producer_warps) { return 32 * (kRingConsumerWarps + producer_warps); }

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumerThreads) : "memory"); }

// Chunks of the stage starting at `first` in a share ending at `end`.
__device__ __forceinline__ int stage_chunks(std::int64_t first, std::int64_t end, int stage_chunks_max) {
  return int(end - first < stage_chunks_max ? end - first : stage_chunks_max);
}

// How the consumer warps take a stage (the header says why there are three).
enum class RingConsumer { scalar, split, handshake };

// How the producer fills a stage: one thread's bulk copy (TMA), or every producer thread's 16-byte
// cp.async (the copy engine of the load/store units), each thread's completion an arrival.
enum class RingProducer { bulk, cp_async };

// Shared memory: Stages × StageBytes of ring, x, the consumers' sums, 2 × Stages barriers.
template <int StageBytes, int Stages>
constexpr std::size_t ring_shared_bytes() {
  return std::size_t(Stages) * StageBytes + kHidden * sizeof(float) + 32 * sizeof(float) +
         2 * Stages * sizeof(std::uint64_t);
}

// Where x[i] lives in the split layout: chunk i / 8's half (i / 4) % 2, as float4 arrays of
// kHidden / 8 each.
__device__ __forceinline__ int split_position(int i) { return ((i / 4) % 2) * (kHidden / 2) + (i / 8) * 4 + i % 4; }

// split_position as the position map rebuild_x (chain_probe_common.cuh) writes x through.
struct SplitPosition {
  __device__ int operator()(int i) const { return split_position(i); }
};

// Eight bf16 weights · x's chunk `c` in the split layout (two conflict-free float4 loads).
__device__ __forceinline__ float dot8_split(const uint4& raw, const float* x, unsigned c) {
  const float4 low = reinterpret_cast<const float4*>(x)[c];
  const float4 high = reinterpret_cast<const float4*>(x + kHidden / 2)[c];
  const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 w0 = __bfloat1622float2(w[0]), w1 = __bfloat1622float2(w[1]);
  const float2 w2 = __bfloat1622float2(w[2]), w3 = __bfloat1622float2(w[3]);
  float sum = w0.x * low.x;
  sum = fmaf(w0.y, low.y, sum), sum = fmaf(w1.x, low.z, sum), sum = fmaf(w1.y, low.w, sum);
  sum = fmaf(w2.x, high.x, sum), sum = fmaf(w2.y, high.y, sum), sum = fmaf(w3.x, high.z, sum);
  return fmaf(w3.y, high.w, sum);
}

// done[i] counts the blocks that finished product i (zeroed before the launch); partials holds
// two buffers of one sum a block, product i writing buffer i % 2.
template <int StageBytes, int Stages, RingConsumer Consumer, RingProducer Producer = RingProducer::bulk,
          int ProducerWarps = 1, int BlocksPerSm = 1>
__global__ void __launch_bounds__(ring_threads(ProducerWarps), BlocksPerSm)
    ring_chain(const uint4* weights, const Product* products, int count, float* partials, int* done, bool wait) {
  static_assert(StageBytes % 16 == 0, "bulk copies move 16-byte multiples");
  extern __shared__ __align__(128) unsigned char ring_memory[];
  unsigned char* ring = ring_memory;
  float* x = reinterpret_cast<float*>(ring_memory + std::size_t(Stages) * StageBytes);
  float* sums = x + kHidden;
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(sums + 32);
  std::uint64_t* empty = full + Stages;
  const int block = blockIdx.x, blocks = gridDim.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kStageChunks = StageBytes / 16;
  constexpr int kProducerThreads = 32 * ProducerWarps;
  constexpr int kFullArrivals = Producer == RingProducer::bulk ? 1 : kProducerThreads;
  if (threadIdx.x == 0)
    for (int s = 0; s < Stages; ++s) barrier_init(&full[s], kFullArrivals), barrier_init(&empty[s], kRingConsumerWarps);
  __syncthreads();

  // The producer: every stage of every product, in order — by one thread's bulk copy, or by every
  // producer thread's cp.async copies, each thread's completion one arrival.
  if (warp >= kRingConsumerWarps) {
    const int producer = threadIdx.x - kConsumerThreads;
    if (Producer == RingProducer::bulk && producer != 0) return;
    int stage = 0;
    std::uint32_t phase = 0;
    for (int i = 0; i < count; ++i) {
      std::int64_t begin, end;
      share_of(products[i], block, blocks, begin, end);
      for (std::int64_t first = begin; first < end; first += kStageChunks) {
        const int chunks = stage_chunks(first, end, kStageChunks);
        barrier_wait(&empty[stage], phase ^ 1);  // the first round passes: nothing to free yet
        unsigned char* destination = ring + std::size_t(stage) * StageBytes;
        if constexpr (Producer == RingProducer::bulk) {
          barrier_expect_bytes(&full[stage], std::uint32_t(chunks) * 16);
          bulk_copy_to_shared(destination, weights + first, std::uint32_t(chunks) * 16, &full[stage]);
        } else {
          for (int c = producer; c < chunks; c += kProducerThreads)
            cp_async_16(reinterpret_cast<uint4*>(destination) + c, weights + first + c);
          cp_async_arrive(&full[stage]);
        }
        if (++stage == Stages) stage = 0, phase ^= 1;
      }
    }
    return;
  }

  int stage = 0;
  std::uint32_t phase = 0;
  for (int i = 0; i < count; ++i) {
    if (i > 0 && wait) {  // the previous product, finished by every block (without: the ring's streaming alone)
      if (threadIdx.x == 0)
        while (load_acquire(done + i - 1) < blocks) __nanosleep(32);
      consumers_sync();
    }
    if (Consumer == RingConsumer::split)
      rebuild_x<kConsumerThreads>(partials + ((i + 1) % 2) * blocks, blocks, x, sums, consumers_sync, SplitPosition{});
    else
      rebuild_x<kConsumerThreads>(partials + ((i + 1) % 2) * blocks, blocks, x, sums, consumers_sync);
    std::int64_t begin, end;
    share_of(products[i], block, blocks, begin, end);
    float sum = 0.0f;
    for (std::int64_t first = begin; first < end; first += kStageChunks) {
      const int chunks = stage_chunks(first, end, kStageChunks);
      barrier_wait(&full[stage], phase);
      const uint4* staged = reinterpret_cast<const uint4*>(ring + std::size_t(stage) * StageBytes);
      // x's index from 32-bit arithmetic (a 64-bit remainder a chunk made the consumers the
      // bottleneck: 8 consumer warps an SM, where the launch chain has 32 to hide it).
      const int base = int(first % (kHidden / 8));
      if (Consumer == RingConsumer::split) {
#pragma unroll 4
        for (int c = threadIdx.x; c < chunks; c += kConsumerThreads)
          sum += dot8_split(staged[c], x, unsigned(base + c) % unsigned(kHidden / 8));
      } else if (Consumer == RingConsumer::scalar) {
        for (int c = threadIdx.x; c < chunks; c += kConsumerThreads) {
          const float* at = x + 8 * (unsigned(base + c) % unsigned(kHidden / 8));
          const __nv_bfloat162* pair = reinterpret_cast<const __nv_bfloat162*>(&staged[c]);
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const float2 f = __bfloat1622float2(pair[k]);
            sum = fmaf(f.x, at[2 * k], fmaf(f.y, at[2 * k + 1], sum));
          }
        }
      }
      __syncwarp();
      if (lane == 0) barrier_arrive(&empty[stage]);
      if (++stage == Stages) stage = 0, phase ^= 1;
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) sums[warp] = sum;
    consumers_sync();
    if (threadIdx.x == 0) {
      float total = 0.0f;
      for (int w = 0; w < kRingConsumerWarps; ++w) total += sums[w];
      partials[(i % 2) * blocks + block] = total;
      __threadfence();
      atomicAdd(done + i, 1);
    }
    consumers_sync();  // sums is rewritten by the next rebuild
  }
}

}  // namespace chain_probe
