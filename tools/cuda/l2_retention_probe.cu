// Do weights asked into L2 while HBM idles stay there until a product reads them?
//
// The window attention leaves HBM idle for ~10 µs a layer (docs/performance.md), in which the
// 21 MB of o_proj's weights could come into L2 — if L2 keeps them until o_proj reads them. Every
// L2 prefetch tried so far lost (stops 15, 17, 23, 24, 38), but each ran with something else
// streaming at the same time (the q+k+v product, the paced chain) and with the default eviction
// priority; none separated "the lines are not kept" from "the reads are not faster". This probe
// asks the one question, on a 2,560 × 4,096 bf16 matrix (Qwen3-4B's o_proj) read the way gemv.cu
// reads it (a warp a row, 8 warps a block; 8 16-byte loads a lane in flight):
//
//   cold        L2 flushed, then the read
//   hot         the read twice, the second timed
//   bulk        cp.async.bulk.prefetch.L2 from 128 blocks, HBM left idle IDLE µs, then the read
//   bulk+last   the same with an evict-last cache policy on the prefetch
//   lines+last  prefetch.global.L2::evict_last, one 128-byte line a thread, then idle, then read
//   bulk, busy  the prefetch issued while another 31.5 MB product streams (as a prefetch from the
//               attention's blocks before their wait would be), then the read
//   bulk, after the prefetch, idle, then another 31.5 MB product, then the read (retention)
//
// Each read is timed from its first block's start to its last block's end (%globaltimer), median
// of 15. The reads load with __ldcs (evict-first, as gemv.cu) or with an evict-first policy.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/l2_retention_probe.cu -o l2_retention_probe
//   ./l2_retention_probe [IDLE_NS=10000]    (a Markdown table)
//
// Measured (H200, 2026-12-04, docs/notes/cuda-stop39-2026-12-04.md), read µs with __ldcs: cold
// 7.42, hot 6.34; every prefetch variant 5.41–5.57 (idle 10 µs; bulk or lines, evict-last
// or not, beside or before another 31.5 MB product). L2 does keep the lines — stop 38 concluded it
// did not — but a read from L2 at gemv's shape is only ~1.35× a cold one (~1.9 µs of o_proj's
// ~7.4). In the model the prefetch lost at every point of the window attention (1.3–2%, branch
// exp-l2-oproj): what it costs the step is more than the ~1.9 µs a layer it could save.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "chain_probe_common.cuh"

namespace {

using chain_probe::check;

constexpr int kThreads = 256, kWarps = kThreads / 32, kUnroll = 8, kRepeats = 15;

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ std::uint64_t evict_policy(bool last) {
  std::uint64_t policy;
  if (last)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ uint4 load_with_policy(const uint4* p, std::uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// gemv.cu's shape of loads on an m × k matrix (a warp a row, kUnroll 16-byte loads a lane in
// flight), the bytes folded into a value that is stored so that no load is dropped: the read alone,
// not the arithmetic (with gemv's dot products against x the read took ~15 µs hot or cold). The
// span of the whole grid goes to span[0] (min start) and span[1] (max end).
template <bool PolicyLoads>
__global__ void __launch_bounds__(kThreads) row_product(const uint4* w, int m, int k_chunks, float* out,
                                                        unsigned long long* span) {
  const std::uint64_t start = global_ns();
  const std::uint64_t policy = evict_policy(false);
  const int lane = threadIdx.x % 32, row = blockIdx.x * kWarps + threadIdx.x / 32;
  float acc = 0;
  if (row < m) {
    const uint4* r = w + std::int64_t(row) * k_chunks;
    for (int first = 0; first < k_chunks; first += 32 * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = first + u * 32 + lane;
        if (c < k_chunks) v[u] = PolicyLoads ? load_with_policy(r + c, policy) : __ldcs(r + c);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = first + u * 32 + lane;
        if (c < k_chunks) acc += __uint_as_float((v[u].x ^ v[u].y ^ v[u].z ^ v[u].w) & 0x3f80ffffu);
      }
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0 && row < m) out[row] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMin(&span[0], start);
    atomicMax(&span[1], global_ns());
  }
}

// Block b asks L2 for pieces b, b + grid, … of `bytes` (fire and forget), one thread a block.
__global__ void bulk_prefetch(const char* base, long long bytes, int piece, bool evict_last) {
  if (threadIdx.x != 0) return;
  const std::uint64_t policy = evict_policy(true);
  for (long long at = std::int64_t(blockIdx.x) * piece; at < bytes; at += std::int64_t(gridDim.x) * piece) {
    const int n = int(bytes - at < piece ? bytes - at : piece);
    if (evict_last)
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(base + at), "r"(n),
                   "l"(policy)
                   : "memory");
    else
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + at), "r"(n) : "memory");
  }
}

// One 128-byte line a thread, evict-last.
__global__ void line_prefetch(const char* base, long long bytes) {
  for (long long at = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 128; at < bytes;
       at += std::int64_t(gridDim.x) * blockDim.x * 128)
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + at) : "memory");
}

// HBM left idle: one thread waits `ns`.
__global__ void idle(long long ns) {
  const std::uint64_t until = global_ns() + ns;
  while (global_ns() < until) {
  }
}

struct Matrix {  // a shape; its bytes are passed beside it
  int m, k;
  long long bytes() const { return (long long)m * k * 2; }
};

}  // namespace

int main(int argc, char** argv) {
  const long long idle_ns = argc > 1 ? std::atoll(argv[1]) : 10000;
  int device = 0, l2_bytes = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), "L2 size");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");

  const Matrix o{2560, 4096}, qkv{6144, 2560};
  const std::size_t flush_bytes = std::size_t(512) << 20;
  char *o_bytes = nullptr, *qkv_bytes = nullptr, *flush = nullptr;
  check(cudaMalloc(&o_bytes, o.bytes()), "o");
  check(cudaMalloc(&qkv_bytes, qkv.bytes()), "qkv");
  check(cudaMalloc(&flush, flush_bytes), "flush");
  check(cudaMemset(o_bytes, 0x3c, o.bytes()), "fill");
  check(cudaMemset(qkv_bytes, 0x3c, qkv.bytes()), "fill");
  float* out = nullptr;
  unsigned long long* span = nullptr;
  check(cudaMalloc(&out, 9728 * sizeof(float)), "out");
  check(cudaMalloc(&span, 2 * sizeof(unsigned long long)), "span");
  cudaStream_t stream, side;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "stream");
  cudaEvent_t fork;
  check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");

  auto read = [&](const char* bytes, const Matrix& shape, bool policy_loads, cudaStream_t s) {
    const int blocks = (shape.m + kWarps - 1) / kWarps;
    if (policy_loads)
      row_product<true><<<blocks, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(bytes), shape.m, shape.k / 8, out, span);
    else
      row_product<false><<<blocks, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(bytes), shape.m, shape.k / 8, out,
                                                     span);
  };
  // Runs setup() then the timed read of o; returns the median read span in µs.
  auto measure = [&](auto&& setup, bool policy_loads) {
    std::vector<double> us;
    for (int r = 0; r < kRepeats + 1; ++r) {
      check(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream), "flush");
      setup();
      const unsigned long long reset[2] = {~0ull, 0ull};
      check(cudaMemcpyAsync(span, reset, sizeof(reset), cudaMemcpyHostToDevice, stream), "span");
      read(o_bytes, o, policy_loads, stream);
      unsigned long long got[2];
      check(cudaMemcpyAsync(got, span, sizeof(got), cudaMemcpyDeviceToHost, stream), "span");
      check(cudaStreamSynchronize(stream), "run");
      if (r > 0) us.push_back((got[1] - got[0]) * 1e-3);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  const int prefetch_blocks = 128, piece = 64 << 10;
  auto bulk = [&](bool last, cudaStream_t s) {
    bulk_prefetch<<<prefetch_blocks, 32, 0, s>>>(o_bytes, o.bytes(), piece, last);
  };
  auto wait_idle = [&] { idle<<<1, 1, 0, stream>>>(idle_ns); };

  std::printf("L2 %d MiB, %d SMs, o_proj %.1f MB, idle %.1f µs\n\n", l2_bytes >> 20, sms, o.bytes() / 1e6, idle_ns * 1e-3);
  std::printf("| variant | read µs (__ldcs) | read µs (evict-first policy) |\n| --- | ---: | ---: |\n");
  struct Variant {
    const char* name;
    std::function<void()> setup;
  };
  const std::vector<Variant> variants = {
      {"cold", [] {}},
      {"hot", [&] { read(o_bytes, o, false, stream); }},
      {"bulk prefetch, idle", [&] { bulk(false, stream); wait_idle(); }},
      {"bulk prefetch evict-last, idle", [&] { bulk(true, stream); wait_idle(); }},
      {"line prefetch evict-last, idle", [&] {
         line_prefetch<<<sms, 256, 0, stream>>>(o_bytes, o.bytes());
         wait_idle();
       }},
      {"bulk evict-last beside a 31.5 MB product", [&] {
         check(cudaEventRecord(fork, stream), "fork");
         check(cudaStreamWaitEvent(side, fork), "fork");
         bulk(true, side);
         read(qkv_bytes, qkv, false, stream);
         check(cudaEventRecord(fork, side), "join");
         check(cudaStreamWaitEvent(stream, fork), "join");
       }},
      {"bulk evict-last, idle, then a 31.5 MB product", [&] {
         bulk(true, stream);
         wait_idle();
         read(qkv_bytes, qkv, false, stream);
       }},
      {"bulk evict-last, idle, then a 31.5 MB product (policy loads)", [&] {
         bulk(true, stream);
         wait_idle();
         read(qkv_bytes, qkv, true, stream);
       }},
  };
  for (const Variant& v : variants)
    std::printf("| %s | %.2f | %.2f |\n", v.name, measure(v.setup, false), measure(v.setup, true));
  return 0;
}
