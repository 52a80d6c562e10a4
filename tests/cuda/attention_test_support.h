// What the CUDA attention tests share (attention_test.cpp: decode; attention_prefill_test.cpp):
// tolerances, a seeded generator, the device cache as the tests build it and the reference's view
// of it.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda/cuda_test_support.h"

namespace bifocal::testing::attention {

// Where a cache's keys sit: a linear cache (slot = position), a ring (swa's slots), or shuffled.
enum class Layout { Linear, Ring, Shuffled };

inline constexpr double kFp32Tolerance = 1e-5;
inline constexpr double kBf16Tolerance = 5e-3;
inline constexpr double kFp16Tolerance = 1e-3;
inline constexpr double kTensorCorePrefillTolerance = 1e-2;

template <typename OutT>
double tolerance_for() {
  return std::is_same_v<OutT, float> ? kFp32Tolerance : std::is_same_v<OutT, __half> ? kFp16Tolerance : kBf16Tolerance;
}

struct Seeded {
  unsigned seed = std::random_device{}();
  std::mt19937 rng{seed};
};

// The slot of position p in swa(w, s)'s cache: sliding_window_mixer.cpp's slot_of.
inline std::int64_t ring_slot(std::int64_t p, int window, int sink_tokens) {
  return p < sink_tokens ? p : sink_tokens + (p - sink_tokens) % (window - sink_tokens);
}

// A KV cache as the device holds it: [slots, kv_heads, d] rows, NaN in every row no token wrote.
struct Cache {
  std::vector<float> keys, values;
  std::vector<std::int64_t> slot_positions;  // −1: empty
};

// The reference's view of a cache: its non-empty rows as stored in T, with their positions.
struct ReferenceKeys {
  std::vector<float> keys, values;
  std::vector<std::int64_t> positions;
};

template <typename T>
ReferenceKeys reference_keys(const Cache& cache, std::size_t row) {
  ReferenceKeys out;
  for (std::size_t slot = 0; slot < cache.slot_positions.size(); ++slot) {
    if (cache.slot_positions[slot] < 0) continue;
    out.keys.insert(out.keys.end(), cache.keys.begin() + slot * row, cache.keys.begin() + (slot + 1) * row);
    out.values.insert(out.values.end(), cache.values.begin() + slot * row, cache.values.begin() + (slot + 1) * row);
    out.positions.push_back(cache.slot_positions[slot]);
  }
  out.keys = as_stored<T>(out.keys);
  out.values = as_stored<T>(out.values);
  return out;
}

}  // namespace bifocal::testing::attention
