// one_wave_cluster_ranks (cluster_launch.h): the split of a head over a cluster is lowered until
// every head's cluster runs at once. A cluster lives inside one GPC, so a kernel that fits one
// block a multiprocessor runs fewer clusters of 8 at once than multiprocessors / 8 (15 on the
// H200's 132); 16 heads in clusters of 8 would run the last one in a second wave.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/device_properties.h"
#include "cuda/cuda_test_support.h"

namespace bifocal {
namespace {

// Dynamic shared memory that leaves room for one block a multiprocessor.
std::size_t over_half_a_multiprocessor() {
  return std::size_t(cuda::device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor)) / 2 + 1024;
}

// Never launched: only its occupancy is asked.
__global__ void cluster_probe_kernel(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

class ClusterLaunch : public testing::CudaTest {};

TEST_F(ClusterLaunch, OneWaveRanksRunEveryHeadsClusterAtOnce) {
  constexpr int kThreads = 256, kHeadDim = 64;
  const std::size_t one_block = over_half_a_multiprocessor();
  const int multiprocessors = cuda::multiprocessor_count();
  for (const int heads : {1, 4, 8, 16, 24, multiprocessors / 4}) {
    SCOPED_TRACE(heads);
    for (const bool crowded : {true, false}) {
      // crowded: one block a multiprocessor (the H200 runs 15 clusters of 8, not 16); else several.
      const auto shared_bytes = [&](int) { return crowded ? one_block : std::size_t(1024); };
      const int widest = cuda::cluster_ranks(kHeadDim, heads);
      const int ranks = cuda::one_wave_cluster_ranks(cluster_probe_kernel, kHeadDim, heads, kThreads, shared_bytes,
                                                      "cluster_probe_kernel");
      EXPECT_GE(ranks, 1);
      EXPECT_LE(ranks, widest);
      EXPECT_EQ((kHeadDim / 4) % ranks, 0);
      const int at_once = cuda::max_active_clusters(cluster_probe_kernel, kThreads, ranks, shared_bytes(ranks),
                                                    "cluster_probe_kernel");
      if (ranks > 1) EXPECT_GE(at_once, heads) << "ranks " << ranks;
      // The widest split is kept whenever it already runs in one wave.
      if (cuda::max_active_clusters(cluster_probe_kernel, kThreads, widest, shared_bytes(widest),
                                    "cluster_probe_kernel") >= heads)
        EXPECT_EQ(ranks, widest);
    }
  }
}

}  // namespace
}  // namespace bifocal
