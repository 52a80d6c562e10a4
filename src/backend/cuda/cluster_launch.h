// Launching the recurrent kernels in thread-block clusters (sm_90). One state head (or KV head)
// is too little work for one block to stream at a useful fraction of the H200's bandwidth, so
// its columns / window rows are split over the `ranks` blocks of a cluster, which meet at
// cluster barriers and read each other's partial results through distributed shared memory.
//
// Every cluster launch is also a programmatic dependent launch (dependent_launch.h): a kernel
// launched here obeys that contract — device::wait_for_previous_kernel() before it reads what an
// earlier kernel wrote or writes anything, device::allow_next_kernel_launch() early.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"

namespace bifocal::cuda {

// The portable cluster size limit.
inline constexpr int kMaxClusterRanks = 8;

// Blocks per cluster for `heads` independent heads of dimension d whose d columns are split in
// slices of a multiple of 4 (float4): the largest r ≤ 8 dividing d/4, and no more than needed to
// give every multiprocessor one block (more blocks would only repeat the per-block fixed work).
inline int cluster_ranks(int d, int heads) {
  const int wanted = std::clamp(multiprocessor_count() / std::max(heads, 1), 1, kMaxClusterRanks);
  for (int ranks = wanted; ranks > 1; --ranks)
    if ((d / 4) % ranks == 0) return ranks;
  return 1;
}

// The launch attribute for clusters of (ranks, 1, 1) blocks.
inline cudaLaunchAttribute cluster_dimension(int ranks) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = unsigned(ranks);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// kernel<<<grid, threads, shared_bytes, stream>>>(args...) in clusters of (ranks, 1, 1) blocks,
// as a programmatic dependent of the kernel before it on `stream` (the kernel must follow
// dependent_launch.h's contract); grid.x must be a multiple of ranks. Raises the kernel's dynamic
// shared memory limit when it needs more than the default 48 KiB (no allocation, no
// synchronisation: graph-capture safe).
template <typename... KernelArgs, typename... Args>
void launch_in_clusters(void (*kernel)(KernelArgs...), dim3 grid, int threads, int ranks, std::size_t shared_bytes,
                        cudaStream_t stream, const char* name, Args&&... args) {
  raise_shared_memory_limit(kernel, shared_bytes, name);
  cudaLaunchAttribute attributes[2] = {cluster_dimension(ranks), {}};
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 2;
  check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
}

// How many clusters of (ranks, 1, 1) blocks of `kernel` (threads each, shared_bytes of dynamic
// shared memory) the device runs at once (cudaOccupancyMaxActiveClusters). A cluster is placed
// whole inside one GPC, so this is below multiprocessors / ranks where the GPCs' sizes leave
// remainders — the H200 runs 15 clusters of 8 at one block per multiprocessor, not 16. A launch of
// more clusters than this runs the rest in a second wave. Remembered per (kernel, threads, ranks,
// shared_bytes): launch plans ask it on every launch outside a graph, and the answer is the
// device's (one device per process, as multiprocessor_count).
template <typename... KernelArgs>
int max_active_clusters(void (*kernel)(KernelArgs...), int threads, int ranks, std::size_t shared_bytes,
                        const char* name) {
  using Key = std::tuple<const void*, int, int, std::size_t>;
  static std::mutex mutex;
  static std::map<Key, int> known;
  const Key key{reinterpret_cast<const void*>(kernel), threads, ranks, shared_bytes};
  const std::lock_guard lock(mutex);
  if (const auto found = known.find(key); found != known.end()) return found->second;

  raise_shared_memory_limit(kernel, shared_bytes, name);
  cudaLaunchAttribute attribute = cluster_dimension(ranks);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(ranks));
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = shared_bytes;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  check(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config), name);
  known.emplace(key, clusters);
  return clusters;
}

// cluster_ranks(d, heads), lowered until all `heads` clusters of `kernel` run at once
// (max_active_clusters). One cluster past what the device holds runs in a second wave, which
// doubles a latency-bound decode step: LoLCATs on paper-fig2 (16 KV heads in clusters of 8, 224
// registers a thread, so one block a multiprocessor and 15 clusters at once) took 29.8 µs a layer
// against linear attention's 7.4 (stop 49's timeline). shared_bytes(ranks): the kernel's dynamic
// shared memory at that split.
template <typename... KernelArgs, typename SharedBytes>
int one_wave_cluster_ranks(void (*kernel)(KernelArgs...), int d, int heads, int threads, SharedBytes&& shared_bytes,
                           const char* name) {
  for (int ranks = cluster_ranks(d, heads); ranks > 1; --ranks)
    if ((d / 4) % ranks == 0 && max_active_clusters(kernel, threads, ranks, shared_bytes(ranks), name) >= heads)
      return ranks;
  return 1;
}

}  // namespace bifocal::cuda
