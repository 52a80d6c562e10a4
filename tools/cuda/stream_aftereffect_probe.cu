// Does running kernels on a second stream, side by side with the first, slow the CUDA graphs a
// process replays afterwards?
//
// Stop 39 found Bifocal's decode ~1% slower (every kernel, a pure weight stream too) in every
// session of a process after a Bifocal prefill of ≥ 2–4K tokens, and stop 40 found the cause in
// the prefill's second stream: with its window branch on the main stream the slowdown is gone
// (docs/notes/cuda-stop40-2026-12-04.md). This probe asks the question without the model:
//
//   1. a decode-like graph (36 × 4 streaming reads of 25–100 MB, with the weights of one
//      Qwen3-4B layer each, 7.4 GB in all) is captured on the main stream and timed (median of 9
//      replays, events);
//   2. a "prefill" phase of ROUNDS rounds: a shared-memory-heavy kernel (one 160 KiB block an SM,
//      as the tensor-core prefill attention) and a small-block streaming kernel (as the mLSTM
//      chunkwise kernels), either both on the main stream (serial) or the first on a second
//      non-blocking stream forked and joined by events around the second (concurrent: what
//      Bifocal's prefill did);
//   3. the graph timed again, a graph captured anew (as each session's is), and the first graph
//      again after a 2 s pause.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/stream_aftereffect_probe.cu -o stream_aftereffect_probe
//   ./stream_aftereffect_probe MODE [ROUNDS=400 [CARVEOUT]]   (one process a mode: the state asked about is
//   process-wide); MODE: none, serial, concurrent, alternate (the heavy kernel on the second
//   stream but ordered between the reads: two streams, no overlap), concurrent-destroy (the
//   second stream destroyed after the phase), host-sync (the heavy kernel on the second stream,
//   each kernel waited for by the host: no events), events-only (the fork and join events of
//   concurrent with nothing on the second stream, both kernels on the first), side-empty (only
//   an empty kernel on the second stream), null-kernels (the heavy kernel on the legacy default
//   stream), null-copies (1 MiB host-to-device copies and memsets on the legacy stream),
//   side-read (a streaming kernel without shared memory on the second stream), side-smem48 (the
//   heavy kernel with 48 KiB of shared memory on the second stream). CARVEOUT: the graph's
//   kernels' preferred shared-memory carveout in percent (cudaFuncAttributePreferredSharedMemoryCarveout).
//
// Measured (H200, CUDA 13, 2026-12-04, docs/notes/cuda-stop40-2026-12-04.md), the graph's time
// after the phase against before (7.3 GB of reads, ~2,215 µs): none, serial, events-only,
// null-copies, side-empty, side-read, side-smem48: −0.4 to +0.4%; concurrent, alternate,
// concurrent-destroy, host-sync, null-kernels (400 rounds; concurrent with 10): +0.8 to +1.5%, the
// same after a recapture and after the pause; concurrent with 1 round, host-sync with 2 or 5: none.
// CUDA_DEVICE_MAX_CONNECTIONS 1 or 2 and the graph kernels' carveout (0, 50, 100%) change nothing.
// So: a kernel with 160 KiB of dynamic shared memory run ≥ ~10 times on a stream other than the
// one the graph replays on — overlapping or not — slows every later replay of the process ~1%.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "chain_probe_common.cuh"

namespace {

using chain_probe::check;
using chain_probe::MedianTimer;

// A weight stream as gemv.cu reads it: 16-byte evict-first loads, a sum so nothing is dropped.
__global__ void stream_read(const uint4* data, std::size_t count, float* sink) {
  float sum = 0.0f;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(data + i);
    sum += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  if (sum == 1234.5f) sink[blockIdx.x] = sum;  // practically never: keeps the loads
}

// Shared-memory-heavy compute (the prefill attention's stand-in): fills its 160 KiB and spins
// over it.
__global__ void smem_heavy(float* sink, int iterations, int count = 160 * 1024 / 4) {
  extern __shared__ float tile[];
  for (int i = threadIdx.x; i < count; i += blockDim.x) tile[i] = float(i);
  __syncthreads();
  float acc = 0.0f;
  for (int it = 0; it < iterations; ++it)
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc = fmaf(acc, 0.999f, tile[(i + it) % count]);
  if (acc == 1234.5f) sink[blockIdx.x] = acc;
}

__global__ void empty_kernel() {}

struct Graph {
  cudaGraphExec_t exec = nullptr;
};

Graph capture_decode(cudaStream_t stream, const uint4* weights, float* sink) {
  // One Qwen3-4B layer's products in bytes: q+k+v 31.5 MB, o_proj 21 MB, gate/up 100.7 MB, down 50.3 MB.
  const std::size_t products[] = {31'457'280, 20'971'520, 100'663'296, 50'331'648};
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  std::size_t offset = 0;
  for (int layer = 0; layer < 36; ++layer)
    for (const std::size_t bytes : products) {
      stream_read<<<132 * 4, 256, 0, stream>>>(weights + offset / 16, bytes / 16, sink);
      offset += bytes;
    }
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  Graph g;
  check(cudaGraphInstantiate(&g.exec, graph, 0), "instantiate");
  cudaGraphDestroy(graph);
  return g;
}

// One replay's median µs over 9 (after a warm-up); the same graph before and after the phase.
double time_graph_us(const Graph& g, cudaStream_t stream) {
  const MedianTimer timed(stream, 9);
  return 1000.0 * timed([&] { check(cudaGraphLaunch(g.exec, stream), "launch"); });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "concurrent";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 400;
  const bool two_streams = mode == "concurrent" || mode == "alternate" || mode == "concurrent-destroy";
  const std::vector<std::string> modes = {"none", "serial", "concurrent", "alternate", "concurrent-destroy",
                                          "host-sync", "events-only", "side-empty", "null-kernels", "null-copies",
                                          "side-read", "side-smem48"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    std::fprintf(stderr, "usage: %s MODE [ROUNDS]; MODE one of none, serial, concurrent, alternate, "
                 "concurrent-destroy, host-sync, events-only, side-empty, null-kernels, null-copies\n", argv[0]);
    return 2;
  }
  const std::size_t weight_bytes = 36ull * (31'457'280 + 20'971'520 + 100'663'296 + 50'331'648);
  uint4* weights = nullptr;
  uint4* activations = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&weights, weight_bytes), "cudaMalloc weights");
  check(cudaMemset(weights, 1, weight_bytes), "cudaMemset");
  const std::size_t activation_bytes = 256ull << 20;
  check(cudaMalloc(&activations, activation_bytes), "cudaMalloc activations");
  check(cudaMemset(activations, 2, activation_bytes), "cudaMemset");
  check(cudaMalloc(&sink, 1 << 20), "cudaMalloc sink");
  check(cudaFuncSetAttribute(smem_heavy, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024), "attribute");
  if (argc > 3)  // the graph's kernels ask for a carveout (percent of the unified L1/shared memory as shared)
    check(cudaFuncSetAttribute(stream_read, cudaFuncAttributePreferredSharedMemoryCarveout, std::atoi(argv[3])),
          "carveout");

  cudaStream_t main_stream, side_stream;
  check(cudaStreamCreate(&main_stream), "stream");
  check(cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking), "side stream");
  cudaEvent_t forked, done;
  cudaEventCreateWithFlags(&forked, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);

  const Graph decode = capture_decode(main_stream, weights, sink);
  const double before = time_graph_us(decode, main_stream);

  const std::vector<char> host_block(1 << 20, 7);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds && mode != "none"; ++r) {
    if (mode == "host-sync") {  // the second stream used, ordered by the host instead of events
      smem_heavy<<<132, 256, 160 * 1024, side_stream>>>(sink, 8);
      check(cudaStreamSynchronize(side_stream), "host-sync");
      stream_read<<<64, 128, 0, main_stream>>>(activations, activation_bytes / 16, sink);
      check(cudaStreamSynchronize(main_stream), "host-sync");
      continue;
    }
    if (mode == "side-read") {  // a streaming kernel without shared memory on the second stream
      stream_read<<<64, 128, 0, side_stream>>>(activations, activation_bytes / 16, sink);
      check(cudaStreamSynchronize(side_stream), "side-read");
      continue;
    }
    if (mode == "side-smem48") {  // the heavy kernel with 48 KiB of shared memory on the second stream
      smem_heavy<<<132, 256, 48 * 1024, side_stream>>>(sink, 8, 48 * 1024 / 4);
      check(cudaStreamSynchronize(side_stream), "side-smem48");
      continue;
    }
    if (mode == "side-empty") {  // only an empty kernel on the second stream
      empty_kernel<<<1, 32, 0, side_stream>>>();
      check(cudaStreamSynchronize(side_stream), "side-empty");
      continue;
    }
    if (mode == "null-kernels") {  // the heavy kernel on the legacy default stream
      smem_heavy<<<132, 256, 160 * 1024>>>(sink, 8);
      stream_read<<<64, 128, 0, main_stream>>>(activations, activation_bytes / 16, sink);
      continue;
    }
    if (mode == "null-copies") {  // what uploads do: copies and memsets on the legacy stream
      check(cudaMemcpy(activations, host_block.data(), host_block.size(), cudaMemcpyHostToDevice), "null-copies");
      check(cudaMemset(activations, 3, host_block.size()), "null-copies");
      continue;
    }
    if (mode == "events-only") {  // the cross-stream waits with nothing on the second stream
      cudaEventRecord(forked, main_stream);
      cudaStreamWaitEvent(side_stream, forked, 0);
      cudaEventRecord(done, side_stream);
      cudaStreamWaitEvent(main_stream, done, 0);
      smem_heavy<<<132, 256, 160 * 1024, main_stream>>>(sink, 8);
      stream_read<<<64, 128, 0, main_stream>>>(activations, activation_bytes / 16, sink);
      continue;
    }
    cudaStream_t heavy_stream = main_stream;
    if (two_streams) {
      cudaEventRecord(forked, main_stream);
      cudaStreamWaitEvent(side_stream, forked, 0);
      heavy_stream = side_stream;
    }
    smem_heavy<<<132, 256, 160 * 1024, heavy_stream>>>(sink, 8);
    if (mode == "alternate") {  // the second stream used, but never beside the first
      cudaEventRecord(done, side_stream);
      cudaStreamWaitEvent(main_stream, done, 0);
    }
    stream_read<<<64, 128, 0, main_stream>>>(activations, activation_bytes / 16, sink);
    if (mode == "concurrent" || mode == "concurrent-destroy") {
      cudaEventRecord(done, side_stream);
      cudaStreamWaitEvent(main_stream, done, 0);
    }
  }
  check(cudaStreamSynchronize(main_stream), "prefill phase");
  if (mode == "concurrent-destroy") check(cudaStreamDestroy(side_stream), "destroy side stream");
  const double phase_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const double after = time_graph_us(decode, main_stream);
  const Graph recaptured = capture_decode(main_stream, weights, sink);  // as each session's graph
  const double after_recaptured = time_graph_us(recaptured, main_stream);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double paused = time_graph_us(decode, main_stream);
  const double gb = weight_bytes / 1e9;
  const auto change = [&](double t) { return 100.0 * (t / before - 1.0); };
  std::printf("| %s | %d rounds, %.2f s | %.1f µs (%.3f TB/s) | %.1f µs (%+.2f%%) | %.1f µs (%+.2f%%) | %.1f µs (%+.2f%%) |\n",
              mode.c_str(), rounds, phase_s, before, gb / before * 1e3, after, change(after), after_recaptured,
              change(after_recaptured), paused, change(paused));
  return 0;
}
