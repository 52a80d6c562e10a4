// gather_window (src/backend/cuda/gather_window.cuh) against the copies it replaces, on fresh random
// inputs: the ring's keys, values and positions bit for bit, then the new tokens' keys and values
// rounded to the storage type once (as the CPU's cache stores them) and their positions; outputs
// poisoned first, so an element it forgets fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gather_window.cuh"
#include "bifocal/error.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"
#include "test_files.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::SeededCudaTest;
using testing::StorageTypeNames;
using testing::StorageTypes;
using testing::as_stored;
using testing::download_floats;
using testing::to_storage;
using testing::upload;

template <typename T>
class GatherWindow : public SeededCudaTest {};
TYPED_TEST_SUITE(GatherWindow, StorageTypes, StorageTypeNames);

struct Gathered {
  std::vector<float> keys, values;
  std::vector<std::int64_t> positions;
};

// A ring of `slots` rows (some empty: position −1) and n new rows, gathered on the device; `want`
// gets the host's copies.
template <typename T>
Gathered gather_on_device(std::int64_t slots, std::int64_t n, std::int64_t row, std::mt19937& rng,
                          Gathered& want) {
  const auto ring_keys = as_stored<T>(testing::random_vector(slots * row, rng));
  const auto ring_values = as_stored<T>(testing::random_vector(slots * row, rng));
  const auto new_keys = testing::random_vector(n * row, rng), new_values = testing::random_vector(n * row, rng);
  std::vector<std::int64_t> ring_positions(slots), new_positions(n);
  for (std::int64_t i = 0; i < slots; ++i) ring_positions[i] = i % 3 == 2 ? -1 : 1000 + 7 * i;
  for (std::int64_t i = 0; i < n; ++i) new_positions[i] = 5000 + i;

  want.keys = ring_keys, want.values = ring_values, want.positions = ring_positions;
  const auto rounded_keys = as_stored<T>(new_keys), rounded_values = as_stored<T>(new_values);
  want.keys.insert(want.keys.end(), rounded_keys.begin(), rounded_keys.end());
  want.values.insert(want.values.end(), rounded_values.begin(), rounded_values.end());
  want.positions.insert(want.positions.end(), new_positions.begin(), new_positions.end());

  const auto d_ring_keys = upload(to_storage<T>(ring_keys)), d_ring_values = upload(to_storage<T>(ring_values));
  const auto d_ring_positions = upload(ring_positions), d_new_positions = upload(new_positions);
  const auto d_new_keys = upload(new_keys), d_new_values = upload(new_values);
  DeviceBuffer<T> keys((slots + n) * row), values((slots + n) * row);
  DeviceBuffer<std::int64_t> positions(slots + n);
  keys.fill_bytes(0xFF);  // NaN keys and values, and positions no ring or token holds (0x7F…7F, not
  values.fill_bytes(0xFF);  // the −1 of an empty slot): whatever the kernel misses shows
  positions.fill_bytes(0x7F);
  cuda::gather_window<T>({.ring_keys = d_ring_keys.data(), .ring_values = d_ring_values.data(),
                          .ring_positions = d_ring_positions.data(), .slots = slots, .new_keys = d_new_keys.data(),
                          .new_values = d_new_values.data(), .new_positions = d_new_positions.data(), .n = n,
                          .row = row, .keys = keys.data(), .values = values.data(), .positions = positions.data()},
                         nullptr);
  cuda::check(cudaDeviceSynchronize(), "gather_window test");
  return {download_floats(keys), download_floats(values), positions.download()};
}

TYPED_TEST(GatherWindow, CopiesTheRingThenTheNewTokensRounded) {
  // (slots, n, row): Qwen3-4B swa's 576-slot ring and a 1K chunk (8 KV heads × 128), a ring of 5
  // and a ragged chunk, no new tokens, a row of one 4-wide quad.
  for (const auto [slots, n, row] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{576, 1024, 1024},
                                     {5, 7, 8}, {17, 0, 96}, {3, 11, 4}}) {
    Gathered want;
    const Gathered got = gather_on_device<TypeParam>(slots, n, row, this->rng_, want);
    const std::string what =
        "slots " + std::to_string(slots) + ", n " + std::to_string(n) + ", row " + std::to_string(row);
    EXPECT_EQ(got.keys, want.keys) << what;
    EXPECT_EQ(got.values, want.values) << what;
    EXPECT_EQ(got.positions, want.positions) << what;
  }
}

TYPED_TEST(GatherWindow, RefusesABadRowOrMissingPointersByName) {
  DeviceBuffer<TypeParam> buffer(64);
  DeviceBuffer<std::int64_t> positions(8);
  DeviceBuffer<float> fresh(64);
  const cuda::GatherWindowArgs<TypeParam> good{
      .ring_keys = buffer.data(), .ring_values = buffer.data(), .ring_positions = positions.data(), .slots = 2,
      .new_keys = fresh.data(), .new_values = fresh.data(), .new_positions = positions.data(), .n = 2, .row = 8,
      .keys = buffer.data(), .values = buffer.data(), .positions = positions.data()};
  auto bad_row = good, missing = good;
  bad_row.row = 6;
  missing.new_keys = nullptr;
  testing::expect_error([&] { cuda::gather_window(bad_row, nullptr); }, {"gather_window", "row of 6 elements"});
  testing::expect_error([&] { cuda::gather_window(missing, nullptr); }, {"gather_window", "missing"});
}

}  // namespace
}  // namespace bifocal
