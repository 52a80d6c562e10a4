// How long a decode step's kernel boundary is, from the inside: in a CUDA graph of dependent
// launches (programmatic dependent launch, as the decode step uses), the time from the last block
// of one kernel leaving to the first (and the last) block of the next returning from its
// cudaGridDependencySynchronize(). The chain probe prices a boundary at 3.7–4.5 µs beyond its
// bytes (persistent_chain_probe.cu); this one says how much of that the release itself is, with no
// memory traffic at all: each block spins for a set time on %globaltimer (the blocks' times
// staggered, as a product's tail is) and stamps its start, its release and its exit.
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/dependency_release_probe.cu -o dependency_release_probe
//   ./dependency_release_probe            (a Markdown table, medians over the chain's boundaries)
//
// Measured (H200, 2026-12-03, two runs; docs/notes/cuda-stop26-2026-12-03.md; %globaltimer ticks
// every 256 ns here, so the times are ±0.26 µs): with a dependent launch the next kernel's first
// and last blocks return from their wait 0.26–0.77 µs after the last block of the one before
// leaves (0.5 in most runs), at 1 or 4 blocks an SM; in plain stream order its blocks start 0.77–1.02
// µs after. With the trigger at the start and room on the SMs, the next kernels' blocks are
// resident long before (24 µs — several kernels ahead — at 1 block of 256 an SM). Grids of small
// blocks in several waves pay the block dispatcher instead: 8,448 one-warp blocks of 1 µs in 10.5
// µs, 16,896 two-warp blocks of 0.5 µs in 20.7 µs — ~1.2 ns a block, however short the work. So a
// decode step's ~3.5 µs a boundary beyond its bytes is not the launch: it is the memory
// pipeline's drain and refill, and for grids of thousands of small blocks, their dispatch.
// A kernel in clusters of 8 (or 2), with or without a cluster barrier before its blocks leave, as
// the window attention, releases the plain kernel after it in the same 0.51 µs (stop 35, one run:
// docs/notes/cuda-stop35-2026-12-03.md).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "chain_probe_barriers.cuh"  // global_ns

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "dependency_release_probe: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

constexpr int kKernels = 200;  // a chain a little longer than a Qwen3-4B decode step (181 launches)

// One block of one kernel of the chain: when it started, returned from the dependency wait and
// left (%globaltimer nanoseconds). Stamped without atomics (no block waits on another's stamp);
// the host takes the minima and maxima.
struct BlockStamps {
  unsigned long long start, release, exit;
};

using chain_probe::global_ns;

// trigger_early: let the next kernel launch at this one's start (as the decode kernels do), else at
// its end. Block b works work_ns + (b % 8) · stagger_ns. stamps: this kernel's gridDim.x entries.
// cluster_sync: the block meets its cluster before it leaves (launched in clusters), as the window
// attention's merge does; its exit stamp is taken after the barrier.
__global__ void chain_kernel(BlockStamps* stamps, bool trigger_early, int work_ns, int stagger_ns, bool cluster_sync) {
  const unsigned long long start = global_ns();
  if (trigger_early) cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  const unsigned long long released = global_ns();
  const unsigned long long until = released + work_ns + (blockIdx.x % 8) * stagger_ns;
  while (global_ns() < until) {
  }
  __syncthreads();
  if (cluster_sync) cooperative_groups::this_cluster().sync();
  if (threadIdx.x == 0) stamps[blockIdx.x] = {start, released, global_ns()};
}

struct Variant {
  const char* name;
  int blocks, threads;
  bool dependent_launch, trigger_early;
  int work_ns, stagger_ns;
  // The even kernels of the chain in clusters of `ranks` blocks (1: none), meeting at a cluster
  // barrier before they leave when cluster_sync; the odd ones plain. The boundaries are then
  // reported apart: after a cluster kernel (the window attention → o_proj) and after a plain one.
  int ranks = 1;
  bool cluster_sync = false;
};

struct Boundary {
  double release_first_us, release_last_us, early_start_us, period_us;
  double after_cluster_first_us = 0, after_cluster_last_us = 0;  // ranks > 1: the boundaries after a cluster kernel
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

Boundary measure(const Variant& v, BlockStamps* stamps, cudaStream_t stream) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (int i = 0; i < kKernels; ++i) {
    const bool clustered = v.ranks > 1 && i % 2 == 0;
    cudaLaunchAttribute attributes[2] = {attribute, {}};
    attributes[1].id = cudaLaunchAttributeClusterDimension;
    attributes[1].val.clusterDim.x = unsigned(v.ranks), attributes[1].val.clusterDim.y = 1;
    attributes[1].val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(v.blocks), config.blockDim = dim3(v.threads), config.stream = stream;
    if (v.dependent_launch) {
      config.attrs = attributes, config.numAttrs = clustered ? 2 : 1;
    } else if (clustered) {
      config.attrs = attributes + 1, config.numAttrs = 1;
    }
    check(cudaLaunchKernelEx(&config, chain_kernel, stamps + std::size_t(i) * v.blocks, v.trigger_early, v.work_ns,
                             v.stagger_ns, clustered && v.cluster_sync),
          v.name);
  }
  check(cudaStreamEndCapture(stream, &graph), "capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int replay = 0; replay < 2; ++replay) check(cudaGraphLaunch(exec, stream), "replay");  // the first warms up
  std::vector<BlockStamps> host(std::size_t(kKernels) * v.blocks);
  check(cudaMemcpyAsync(host.data(), stamps, host.size() * sizeof(BlockStamps), cudaMemcpyDeviceToHost, stream), "read");
  check(cudaStreamSynchronize(stream), "replay");
  check(cudaGraphExecDestroy(exec), "graph");
  check(cudaGraphDestroy(graph), "graph");
  // Per kernel: the earliest start and release, the latest release and exit.
  std::vector<double> first_start(kKernels, 1e30), first_release(kKernels, 1e30), last_release(kKernels, 0),
      last_exit(kKernels, 0);
  for (int i = 0; i < kKernels; ++i)
    for (int b = 0; b < v.blocks; ++b) {
      const BlockStamps& s = host[std::size_t(i) * v.blocks + b];
      first_start[i] = std::min(first_start[i], double(s.start));
      first_release[i] = std::min(first_release[i], double(s.release));
      last_release[i] = std::max(last_release[i], double(s.release));
      last_exit[i] = std::max(last_exit[i], double(s.exit));
    }
  std::vector<double> first, last, early, period, cluster_first, cluster_last;
  for (int i = 1; i < kKernels; ++i) {
    const double release_first = (first_release[i] - last_exit[i - 1]) * 1e-3;
    const double release_last = (last_release[i] - last_exit[i - 1]) * 1e-3;
    if (v.ranks > 1 && (i - 1) % 2 == 0) {  // kernel i − 1 ran in clusters
      cluster_first.push_back(release_first);
      cluster_last.push_back(release_last);
      continue;
    }
    first.push_back(release_first);
    last.push_back(release_last);
    early.push_back((last_exit[i - 1] - first_start[i]) * 1e-3);
    period.push_back((last_exit[i] - last_exit[i - 1]) * 1e-3);
  }
  Boundary boundary{median(first), median(last), median(early), median(period)};
  if (!cluster_first.empty()) {
    boundary.after_cluster_first_us = median(cluster_first);
    boundary.after_cluster_last_us = median(cluster_last);
  }
  return boundary;
}

}  // namespace

int main() {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  BlockStamps* stamps = nullptr;  // room for the largest grid below
  check(cudaMalloc(&stamps, std::size_t(kKernels) * 128 * sms * sizeof(BlockStamps)), "stamps");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const std::vector<Variant> variants = {
      {"dependent launch, trigger at start, 1 block an SM", sms, 256, true, true, 3000, 0},
      {"dependent launch, trigger at start, 4 blocks an SM", 4 * sms, 256, true, true, 3000, 0},
      {"dependent launch, trigger at start, 1 block an SM, tail of 8 × 200 ns", sms, 256, true, true, 3000, 200},
      {"dependent launch, trigger at start, 1 block an SM, 64 threads", sms, 64, true, true, 3000, 0},
      {"dependent launch, trigger at start, 2 waves of 1-warp blocks", 2 * 32 * sms, 32, true, true, 1000, 0},
      {"dependent launch, trigger at start, 4 waves of 2-warp blocks", 4 * 32 * sms, 64, true, true, 500, 0},
      {"dependent launch, trigger at exit", sms, 256, true, false, 3000, 0},
      {"stream order (no dependent launch)", sms, 256, false, false, 3000, 0},
      {"stream order, 4 blocks an SM", 4 * sms, 256, false, false, 3000, 0},
      // The window attention → o_proj boundary: 16 clusters of 8 (128 blocks), then a plain kernel.
      {"dependent launch, clusters of 8 with a cluster barrier, alternating with plain", 128, 256, true, true, 3000, 0,
       8, true},
      {"dependent launch, clusters of 8, no barrier, alternating with plain", 128, 256, true, true, 3000, 0, 8, false},
      {"dependent launch, clusters of 2 with a cluster barrier, alternating with plain", 128, 256, true, true, 3000, 0,
       2, true},
  };
  std::printf("%d SMs; a graph of %d kernels; medians over its boundaries, from the last block's exit of the "
              "kernel before\n\n",
              sms, kKernels);
  std::printf("| variant | first release µs | last release µs | first block resident before µs | kernel period µs | "
              "after a cluster kernel: first / last release µs |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Variant& v : variants) {
    const Boundary b = measure(v, stamps, stream);
    std::printf("| %s (%d × %d, %.1f µs work) | %.2f | %.2f | %.2f | %.2f |", v.name, v.blocks, v.threads,
                v.work_ns * 1e-3, b.release_first_us, b.release_last_us, b.early_start_us, b.period_us);
    if (v.ranks > 1)
      std::printf(" %.2f / %.2f |\n", b.after_cluster_first_us, b.after_cluster_last_us);
    else
      std::printf(" — |\n");
  }
  check(cudaStreamDestroy(stream), "stream");
  check(cudaFree(stamps), "stamps");
  return 0;
}
