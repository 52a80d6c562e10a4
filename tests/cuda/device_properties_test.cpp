// device_properties.h's spread_shared_bytes: the shared memory that keeps a grid of at most one
// block an SM at one block an SM, so that launched beside the previous kernel its blocks do not
// pile up on the few SMs that kernel frees first.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_properties.h"
#include "cuda/cuda_test_support.h"

namespace bifocal {
namespace {

TEST(DeviceProperties, SpreadSharedBytesKeepsAtMostOneBlockAnSmForAGridThatFitsOne) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::int64_t sms = cuda::multiprocessor_count();
  const std::size_t per_sm = std::size_t(cuda::device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  const std::size_t per_block = std::size_t(cuda::device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  for (const std::size_t needed : {std::size_t(0), std::size_t(54 * 1024)}) {
    for (const std::int64_t blocks : {std::int64_t(1), std::int64_t(128), sms}) {
      const std::size_t asked = cuda::spread_shared_bytes(needed, blocks);
      EXPECT_GT(2 * asked, per_sm) << needed << " bytes, " << blocks << " blocks: two would fit an SM";
      EXPECT_LE(asked, per_block) << needed << " bytes, " << blocks << " blocks: more than a block may have";
    }
    EXPECT_EQ(cuda::spread_shared_bytes(needed, sms + 1), needed) << "more blocks than SMs: as needed";
  }
  EXPECT_EQ(cuda::spread_shared_bytes(per_sm / 2 + 4096, 8), per_sm / 2 + 4096) << "already over half";
}

}  // namespace
}  // namespace bifocal
