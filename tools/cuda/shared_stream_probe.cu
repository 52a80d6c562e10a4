// How fast can an SM stream device memory into its own shared memory, by access pattern?
//
// Stops 17 and 25 measured a weight ring (chain_probe_ring.cuh: one block an SM, a producer
// streaming the block's share of the weights into shared-memory stages) at ~60% of the copy
// bandwidth, with bulk copies or cp.async, reading the stages or not — where plain loads into
// registers reach ~110%. They concluded that copies into shared memory cap near 60% "for this
// read pattern" and dropped the ring, and with it every design that lets a kernel's weights land
// in its SM before its wait for the previous kernel. Every variant they ran had each block stream
// ONE CONTIGUOUS SHARE (1/132 of the bytes, ~750 KB apart), all blocks in lockstep. This probe
// asks whether the pattern, not the copy path, was the cap: the same ring with the pieces dealt
// round-robin (piece p to block p mod G, so that the SMs read one moving window of G pieces),
// beside the contiguous shares, for bulk copies (one copy a stage, or 4 KiB copies), cp.async
// from one warp, several stage sizes and depths, 1 or 2 blocks an SM, stages read or only handed
// back. Reference rows: plain 16-byte loads into registers (each warp a contiguous share, as the
// chain probe's ceiling) and the device copy the roofline uses.
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a tools/cuda/shared_stream_probe.cu -o shared_stream_probe
//   ./shared_stream_probe            (a Markdown table; 2 GiB + 2 GiB of device memory)
//
// Measured (H200, 2026-12-04, copy bandwidth 4.22 TB/s; docs/notes/cuda-stop37-2026-12-04.md):
// every ring variant 106.5–107.3% (4.49–4.53 TB/s) — contiguous or interleaved, bulk copies of a
// stage or of 4 KiB, a cp.async warp, read or handed back, rings of 64–192 KiB, 1 or 2 blocks an
// SM; registers 99.0% (4 loads a lane) and 86.9% (8). So the pattern was not the cap, and neither
// were the copies: the ring probe's ~60% came from its consumers (ring_chain_probe.cu).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "chain_probe_barriers.cuh"  // the ring's mbarriers, bulk copies and timer
#include "chain_probe_common.cuh"  // check, MedianTimer, copy_bandwidth

namespace {

using chain_probe::barrier_arrive;
using chain_probe::barrier_expect_bytes;
using chain_probe::barrier_init;
using chain_probe::barrier_wait;
using chain_probe::bulk_copy_to_shared;
using chain_probe::check;

constexpr int kConsumerWarps = 8;
constexpr int kRingThreads = 32 * (kConsumerWarps + 1);  // the consumers, then one producer warp
constexpr int kRepeats = 5;
constexpr std::int64_t kStreamBytes = std::int64_t(2) << 30;

enum class Pattern { contiguous, interleaved };
enum class Producer { bulk, bulk_4k, cp_async };
enum class Consumer { handshake, read };

// Block `block` of `blocks`: its pieces of PieceBytes, the i-th at byte offset piece(i).
template <Pattern P>
struct Pieces {
  std::int64_t first, count, stride;
  __device__ Pieces(std::int64_t total_pieces, int block, int blocks) {
    if (P == Pattern::contiguous) {
      first = total_pieces * block / blocks;
      count = total_pieces * (block + 1) / blocks - first;
      stride = 1;
    } else {
      first = block;
      count = (total_pieces - block + blocks - 1) / blocks;
      stride = blocks;
    }
  }
  __device__ std::int64_t operator[](std::int64_t i) const { return first + i * stride; }
};

// The ring: the producer warp fills stage i % Stages with the block's i-th piece once the
// consumers have handed it back; the consumers wait for it, read it (or not), hand it back.
template <int StageBytes, int Stages, Pattern P, Producer Pr, Consumer C, int BlocksPerSm>
__global__ void __launch_bounds__(kRingThreads, BlocksPerSm)
    ring_stream(const unsigned char* data, std::int64_t bytes, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) std::uint64_t full[Stages], empty[Stages];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const Pieces<P> pieces(bytes / StageBytes, int(blockIdx.x), int(gridDim.x));
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) {
      barrier_init(&full[s], Pr == Producer::cp_async ? 32 : 1);
      barrier_init(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == kConsumerWarps) {  // the producer
    for (std::int64_t i = 0; i < pieces.count; ++i) {
      const int stage = int(i % Stages);
      const std::uint32_t parity = std::uint32_t(i / Stages) & 1u;
      barrier_wait(&empty[stage], parity ^ 1u);
      unsigned char* destination = ring + std::size_t(stage) * StageBytes;
      const unsigned char* source = data + pieces[i] * StageBytes;
      if constexpr (Pr == Producer::cp_async) {
        for (int c = lane; c < StageBytes / 16; c += 32) chain_probe::cp_async_16(destination + 16 * c, source + 16 * c);
        chain_probe::cp_async_arrive(&full[stage]);
      } else if (lane == 0) {
        barrier_expect_bytes(&full[stage], StageBytes);
        constexpr int kPiece = Pr == Producer::bulk_4k && StageBytes > 4096 ? 4096 : StageBytes;
        for (int offset = 0; offset < StageBytes; offset += kPiece)
          bulk_copy_to_shared(destination + offset, source + offset, kPiece, &full[stage]);
      }
    }
    return;
  }
  unsigned sum = 0;
  for (std::int64_t i = 0; i < pieces.count; ++i) {
    const int stage = int(i % Stages);
    barrier_wait(&full[stage], std::uint32_t(i / Stages) & 1u);
    if constexpr (C == Consumer::read) {
      const uint4* staged = reinterpret_cast<const uint4*>(ring + std::size_t(stage) * StageBytes);
#pragma unroll 4
      for (int c = int(threadIdx.x); c < StageBytes / 16; c += 32 * kConsumerWarps) {
        const uint4 v = staged[c];
        sum += v.x ^ v.y ^ v.z ^ v.w;
      }
    }
    __syncwarp();
    if (lane == 0) barrier_arrive(&empty[stage]);
  }
  if (sum == 0x12345678u) sink[0] = sum;  // keeps the reads; the fill never makes this
}


__global__ void fill(unsigned* data, std::int64_t words) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < words;
       i += std::int64_t(gridDim.x) * blockDim.x)
    data[i] = unsigned(i) * 2654435761u + 12345u;
}

struct Setup {
  const unsigned char* data;
  unsigned* sink;
  int sms;
  cudaStream_t stream;
  const chain_probe::MedianTimer* timed;
  double copy_bandwidth;
};

void report(const Setup& s, const std::string& name, float ms) {
  const double bandwidth = double(kStreamBytes) / (ms * 1e-3);
  std::printf("| %s | %.3f | %.2f | %.1f%% |\n", name.c_str(), ms, bandwidth / 1e12, 100.0 * bandwidth / s.copy_bandwidth);
}

template <int StageBytes, int Stages, Pattern P, Producer Pr, Consumer C, int BlocksPerSm = 1>
void run_ring(const Setup& s, const char* name) {
  const auto kernel = ring_stream<StageBytes, Stages, P, Pr, C, BlocksPerSm>;
  const std::size_t shared = std::size_t(StageBytes) * Stages;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)), name);
  int resident = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kRingThreads, shared), name);
  if (resident < BlocksPerSm) {
    std::printf("| %s | — | — | only %d block(s) an SM fit |\n", name, resident);
    return;
  }
  const float ms = (*s.timed)([&] {
    kernel<<<s.sms * BlocksPerSm, kRingThreads, shared, s.stream>>>(s.data, kStreamBytes, s.sink);
    check(cudaGetLastError(), name);
  });
  report(s, name, ms);
}

}  // namespace

int main() {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  unsigned char* data = nullptr;
  unsigned* sink = nullptr;
  check(cudaMalloc(&data, 2 * std::size_t(kStreamBytes)), "data");  // the second half: the copy's target
  check(cudaMalloc(&sink, sizeof(unsigned)), "sink");
  fill<<<sms * 8, 256>>>(reinterpret_cast<unsigned*>(data), kStreamBytes / 4);
  check(cudaDeviceSynchronize(), "fill");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const chain_probe::MedianTimer timed(stream, kRepeats);
  const Setup s{data, sink, sms, stream, &timed, chain_probe::copy_bandwidth(timed, data, stream)};
  std::printf("Streaming %lld MiB once, median of %d runs; copy bandwidth %.2f TB/s (read + written)\n\n",
              static_cast<long long>(kStreamBytes >> 20), kRepeats, s.copy_bandwidth / 1e12);
  std::printf("| variant | ms | TB/s | of copy bandwidth |\n| --- | ---: | ---: | ---: |\n");

  const auto registers = [&](auto kernel, int blocks_per_sm, const char* name) {
    const float ms = timed([&] {
      kernel<<<sms * blocks_per_sm, 256, 0, stream>>>(reinterpret_cast<const uint4*>(data), kStreamBytes / 16, sink);
      check(cudaGetLastError(), name);
    });
    report(s, name, ms);
  };
  registers(chain_probe::stream_shares<256, 4, 4>, 4, "registers: a contiguous share a warp, 4 blocks an SM, 4 loads a lane");
  registers(chain_probe::stream_shares<256, 4, 8>, 4, "registers: … 8 loads a lane");

  using enum Pattern;
  using enum Producer;
  using enum Consumer;
  run_ring<16384, 12, contiguous, bulk, handshake>(s, "ring 12 × 16 KiB, contiguous shares, bulk, handed back");
  run_ring<16384, 12, interleaved, bulk, handshake>(s, "ring 12 × 16 KiB, interleaved, bulk, handed back");
  run_ring<16384, 12, contiguous, bulk, read>(s, "ring 12 × 16 KiB, contiguous shares, bulk, read");
  run_ring<16384, 12, interleaved, bulk, read>(s, "ring 12 × 16 KiB, interleaved, bulk, read");
  run_ring<32768, 6, interleaved, bulk, handshake>(s, "ring 6 × 32 KiB, interleaved, bulk, handed back");
  run_ring<8192, 24, interleaved, bulk, handshake>(s, "ring 24 × 8 KiB, interleaved, bulk, handed back");
  run_ring<4096, 48, interleaved, bulk, handshake>(s, "ring 48 × 4 KiB, interleaved, bulk, handed back");
  run_ring<16384, 12, interleaved, bulk_4k, handshake>(s, "ring 12 × 16 KiB, interleaved, 4 KiB bulk copies");
  run_ring<16384, 12, contiguous, cp_async, handshake>(s, "ring 12 × 16 KiB, contiguous shares, cp.async warp");
  run_ring<16384, 12, interleaved, cp_async, handshake>(s, "ring 12 × 16 KiB, interleaved, cp.async warp");
  run_ring<16384, 6, interleaved, bulk, handshake>(s, "ring 6 × 16 KiB (96 KiB), interleaved, bulk");
  run_ring<16384, 4, interleaved, bulk, handshake>(s, "ring 4 × 16 KiB (64 KiB), interleaved, bulk");
  run_ring<8192, 8, interleaved, bulk, handshake>(s, "ring 8 × 8 KiB (64 KiB), interleaved, bulk");
  run_ring<16384, 6, interleaved, bulk, handshake, 2>(s, "2 blocks an SM, each 6 × 16 KiB, interleaved, bulk");
  run_ring<16384, 6, contiguous, bulk, handshake, 2>(s, "2 blocks an SM, each 6 × 16 KiB, contiguous, bulk");
  run_ring<8192, 6, interleaved, bulk, read, 2>(s, "2 blocks an SM, each 6 × 8 KiB, interleaved, bulk, read");
  return 0;
}
