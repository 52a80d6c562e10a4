// device_properties.h's spread_shared_bytes: the shared memory that keeps a grid of at most one
// (or two) blocks an SM at that many blocks an SM, so that launched beside the previous kernel its
// blocks do not pile up on the few SMs that kernel frees first.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/device_properties.h"
#include "cuda/cuda_test_support.h"

namespace bifocal {
namespace {

TEST(DeviceProperties, SpreadSharedBytesKeepsAtMostPerSmBlocksAnSmForAGridThatFitsThem) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::int64_t sms = cuda::multiprocessor_count();
  const std::size_t sm_bytes = std::size_t(cuda::device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  const std::size_t per_block = std::size_t(cuda::device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  const std::size_t reserved = std::size_t(cuda::device_attribute(cudaDevAttrReservedSharedMemoryPerBlock));
  for (const int per_sm : {1, 2}) {
    for (const std::size_t needed : {std::size_t(0), std::size_t(54 * 1024)}) {
      for (const std::int64_t blocks : {std::int64_t(1), std::int64_t(128), per_sm * sms}) {
        const std::size_t asked = cuda::spread_shared_bytes(needed, blocks, per_sm);
        const std::string what = std::to_string(needed) + " bytes, " + std::to_string(blocks) + " blocks, " +
                                 std::to_string(per_sm) + " an SM";
        EXPECT_GT((per_sm + 1) * asked, sm_bytes) << what << ": one more would fit an SM";
        EXPECT_LE(per_sm * (asked + reserved), sm_bytes) << what << ": " << per_sm << " no longer fit an SM";
        EXPECT_LE(asked, per_block) << what << ": more than a block may have";
      }
      EXPECT_EQ(cuda::spread_shared_bytes(needed, per_sm * sms + 1, per_sm), needed)
          << "more blocks than " << per_sm << " an SM: as needed";
    }
    const std::size_t over = sm_bytes / (per_sm + 1) + 4096;
    EXPECT_EQ(cuda::spread_shared_bytes(over, 8, per_sm), over) << "already over the share";
  }
}

}  // namespace
}  // namespace bifocal
