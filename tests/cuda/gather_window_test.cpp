// gather_window (src/backend/cuda/gather_window.cuh) against the copies it replaces, on fresh random
// inputs: the ring's keys, values and positions bit for bit, then the new tokens' keys and values
// rounded to the storage type once (as the CPU's cache stores them) and their positions; outputs
// poisoned first, so an element it forgets fails. With store_new_tokens, the ring it leaves is
// store_kv_slots' (run on a copy of the same ring) bit for bit, and what it gathered is still the
// ring as it was. Each in both modes: waiting for the kernel before it at its start, and at its end
// (wait_at_end, beside the mLSTM contributions kernel: a smaller grid, more rows a thread).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/attention_decode.cuh"
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
Gathered gather_on_device(std::int64_t slots, std::int64_t n, std::int64_t row, bool wait_at_end, std::mt19937& rng,
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

  auto d_ring_keys = upload(to_storage<T>(ring_keys)), d_ring_values = upload(to_storage<T>(ring_values));
  auto d_ring_positions = upload(ring_positions);
  const auto d_new_positions = upload(new_positions);
  const auto d_new_keys = upload(new_keys), d_new_values = upload(new_values);
  DeviceBuffer<T> keys((slots + n) * row), values((slots + n) * row);
  DeviceBuffer<std::int64_t> positions(slots + n);
  keys.fill_bytes(0xFF);  // NaN keys and values, and positions no ring or token holds (0x7F…7F, not
  values.fill_bytes(0xFF);  // the −1 of an empty slot): whatever the kernel misses shows
  positions.fill_bytes(0x7F);
  cuda::gather_window<T>({.ring_keys = d_ring_keys.data(), .ring_values = d_ring_values.data(),
                          .ring_positions = d_ring_positions.data(), .slots = slots, .new_keys = d_new_keys.data(),
                          .new_values = d_new_values.data(), .new_positions = d_new_positions.data(), .n = n,
                          .row = row, .keys = keys.data(), .values = values.data(), .positions = positions.data(),
                          .wait_at_end = wait_at_end},
                         nullptr);
  cuda::check(cudaDeviceSynchronize(), "gather_window test");
  return {download_floats(keys), download_floats(values), positions.download()};
}

TYPED_TEST(GatherWindow, CopiesTheRingThenTheNewTokensRounded) {
  // (slots, n, row): Qwen3-4B swa's 576-slot ring and a 1K chunk (8 KV heads × 128), a ring of 5
  // and a ragged chunk, no new tokens, a row of one 4-wide quad.
  for (const auto [slots, n, row] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{576, 1024, 1024},
                                     {5, 7, 8}, {17, 0, 96}, {3, 11, 4}}) {
    for (const bool wait_at_end : {false, true}) {
      Gathered want;
      const Gathered got = gather_on_device<TypeParam>(slots, n, row, wait_at_end, this->rng_, want);
      const std::string what = "slots " + std::to_string(slots) + ", n " + std::to_string(n) + ", row " +
                               std::to_string(row) + (wait_at_end ? ", waiting at its end" : "");
      EXPECT_EQ(got.keys, want.keys) << what;
      EXPECT_EQ(got.values, want.values) << what;
      EXPECT_EQ(got.positions, want.positions) << what;
    }
  }
}

// (slots, sink tokens, first position, n, row): the store's cases — Qwen3-4B swa's 576-slot ring
// and a 1K chunk that laps it; sinks and a first chunk from position 0 that fills them; a chunk
// that wraps the ring part way; a chunk inside the sinks only; no new tokens.
TYPED_TEST(GatherWindow, StoresTheNewTokensAsStoreKvSlotsDoes) {
  using T = TypeParam;
  struct Case {
    std::int64_t slots;
    int sinks;
    std::int64_t first, n, row;
  };
  for (const Case c : {Case{576, 0, 1024, 1024, 1024}, Case{12, 4, 0, 9, 8}, Case{12, 4, 18, 5, 8},
                       Case{12, 4, 27, 30, 4}, Case{9, 3, 1, 1, 16}, Case{7, 2, 40, 0, 8}}) {
    for (const bool wait_at_end : {false, true}) {
      const std::string what = "slots " + std::to_string(c.slots) + ", sinks " + std::to_string(c.sinks) + ", first " +
                               std::to_string(c.first) + ", n " + std::to_string(c.n) +
                               (wait_at_end ? ", waiting at its end" : "");
      const auto ring_keys = to_storage<T>(testing::random_vector(c.slots * c.row, this->rng_));
      const auto ring_values = to_storage<T>(testing::random_vector(c.slots * c.row, this->rng_));
      const auto new_keys = testing::random_vector(c.n * c.row, this->rng_);
      const auto new_values = testing::random_vector(c.n * c.row, this->rng_);
      std::vector<std::int64_t> ring_positions(c.slots), new_positions(c.n);
      for (std::int64_t i = 0; i < c.slots; ++i) ring_positions[i] = i % 4 == 3 ? -1 : 100 + i;
      for (std::int64_t i = 0; i < c.n; ++i) new_positions[i] = c.first + i;
      const auto d_new_keys = upload(new_keys), d_new_values = upload(new_values);
      const auto d_new_positions = upload(new_positions);

      // Expected: store_kv_slots on one copy of the ring.
      auto want_keys = upload(ring_keys), want_values = upload(ring_values);
      auto want_positions = upload(ring_positions);
      cuda::store_kv_slots<T>(d_new_keys.data(), d_new_values.data(), int(c.n), d_new_positions.data(),
                              want_keys.data(), want_values.data(), want_positions.data(), 1, int(c.row),
                              int(c.slots), c.sinks, nullptr);
      // The gather with the store folded in, on another.
      auto keys_ring = upload(ring_keys), values_ring = upload(ring_values);
      auto positions_ring = upload(ring_positions);
      DeviceBuffer<T> keys((c.slots + c.n) * c.row), values((c.slots + c.n) * c.row);
      DeviceBuffer<std::int64_t> positions(c.slots + c.n);
      cuda::gather_window<T>({.ring_keys = keys_ring.data(), .ring_values = values_ring.data(),
                              .ring_positions = positions_ring.data(), .slots = c.slots, .new_keys = d_new_keys.data(),
                              .new_values = d_new_values.data(), .new_positions = d_new_positions.data(), .n = c.n,
                              .row = c.row, .keys = keys.data(), .values = values.data(), .positions = positions.data(),
                              .store_new_tokens = true, .sink_tokens = c.sinks, .first_position = c.first,
                              .wait_at_end = wait_at_end},
                             nullptr);
      cuda::check(cudaDeviceSynchronize(), "gather_window test");
      EXPECT_EQ(download_floats(keys_ring), download_floats(want_keys)) << what;
      EXPECT_EQ(download_floats(values_ring), download_floats(want_values)) << what;
      EXPECT_EQ(positions_ring.download(), want_positions.download()) << what;
      // The gathered window is the ring before the store.
      auto gathered_keys = download_floats(keys), gathered_positions = positions.download();
      gathered_keys.resize(c.slots * c.row);
      gathered_positions.resize(c.slots);
      EXPECT_EQ(gathered_keys, download_floats(upload(ring_keys))) << what;
      EXPECT_EQ(gathered_positions, ring_positions) << what;
      // The store changed the ring wherever the chunk reaches it (a check that the case stores).
      if (c.n > 0) EXPECT_NE(positions_ring.download(), ring_positions) << what;
    }
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
  auto all_sinks = good;
  all_sinks.store_new_tokens = true, all_sinks.sink_tokens = 2;
  testing::expect_error([&] { cuda::gather_window(all_sinks, nullptr); },
                        {"gather_window", "window of 2 slots is not larger than its 2 sink tokens"});
}

}  // namespace
}  // namespace bifocal
