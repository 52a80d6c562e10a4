// The linear-attention kernels (src/backend/cpu/linear_attention.h) against the naive double
// reference and against each other, on fresh random inputs each run (the seed is printed on failure).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>

#include "numerics.h"
#include "allocation_counter.h"
#include "backend/cpu/linear_attention.h"
#include "backend/cpu/linear_reference.h"
#include "linear_test_inputs.h"

namespace bifocal {
namespace {

using testing::relative_error;
using testing::random_vector;
using testing::ErrorLog;
using testing::concatenate;
using testing::describe;
using Inputs = testing::LinearInputs;

using cpu::FeatureMap;
using cpu::LinearShape;

struct OwnedLinearState {
  std::vector<float> matrix, normalizer;
  explicit OwnedLinearState(const LinearShape& shape)
      : matrix(cpu::linear_matrix_floats(shape), NAN), normalizer(cpu::linear_normalizer_floats(shape), NAN) {
    cpu::linear_reset(shape, view());  // NaN first, so a reset that misses an entry shows
  }
  cpu::LinearState view() { return {matrix.data(), normalizer.data()}; }
};

std::vector<float> run_recurrent(const LinearShape& shape, const Inputs& in, int first, int n, OwnedLinearState& state) {
  std::vector<float> out(std::size_t(n) * shape.query_heads * shape.head_dim, NAN);
  const std::size_t q_offset = std::size_t(first) * shape.query_heads * shape.head_dim;
  const std::size_t kv_offset = std::size_t(first) * shape.kv_heads * shape.head_dim;
  cpu::linear_attention_recurrent(shape, in.w(), in.q.data() + q_offset, in.k.data() + kv_offset,
                                  in.v.data() + kv_offset, n, state.view(), out.data());
  return out;
}

std::vector<float> run_chunkwise(const LinearShape& shape, const Inputs& in, int first, int n, int chunk,
                                 OwnedLinearState& state) {
  std::vector<float> out(std::size_t(n) * shape.query_heads * shape.head_dim, NAN);
  const std::size_t q_offset = std::size_t(first) * shape.query_heads * shape.head_dim;
  const std::size_t kv_offset = std::size_t(first) * shape.kv_heads * shape.head_dim;
  cpu::linear_attention_chunkwise(shape, in.w(), in.q.data() + q_offset, in.k.data() + kv_offset,
                                  in.v.data() + kv_offset, n, chunk, state.view(), out.data());
  return out;
}

// GQA (Hq = 4, Hkv = 2) and MHA, both feature maps.
const LinearShape kShapes[] = {{4, 2, 16, FeatureMap::Elu1},
                               {4, 2, 16, FeatureMap::Hedgehog},
                               {3, 3, 16, FeatureMap::Elu1},
                               {2, 2, 32, FeatureMap::Hedgehog}};

TEST(LinearAttention, FeatureMapsMatchHandWorkedValues) {
  const LinearShape elu{1, 1, 4, FeatureMap::Elu1};
  const float x[4] = {0.5f, 0.0f, -1.0f, 3.0f};
  float phi[4];
  cpu::linear_feature_map(elu, nullptr, x, phi);
  EXPECT_FLOAT_EQ(phi[0], 1.5f);
  EXPECT_FLOAT_EQ(phi[1], 1.0f);
  EXPECT_FLOAT_EQ(phi[2], std::exp(-1.0f));
  EXPECT_FLOAT_EQ(phi[3], 4.0f);

  // d = 2, x = (1, 0), W row 0 = (ln 3, 0, …): logits (ln 3, 0 × 63).
  const LinearShape hedgehog{1, 1, 2, FeatureMap::Hedgehog};
  std::vector<float> weight(2 * cpu::kHedgehogWidth, 0.0f);
  weight[0] = std::log(3.0f);
  weight[cpu::kHedgehogWidth + 5] = 100.0f;  // row 1, multiplied by x_1 = 0
  const float y[2] = {1.0f, 0.0f};
  float features[2 * cpu::kHedgehogWidth];
  cpu::linear_feature_map(hedgehog, weight.data(), y, features);
  EXPECT_FLOAT_EQ(features[0], 3.0f / 66.0f);                           // softmax(xW)
  EXPECT_FLOAT_EQ(features[1], 1.0f / 66.0f);
  EXPECT_FLOAT_EQ(features[cpu::kHedgehogWidth], (1.0f / 3) / (1.0f / 3 + 63));  // softmax(−xW)
  EXPECT_FLOAT_EQ(features[cpu::kHedgehogWidth + 5], 1.0f / (1.0f / 3 + 63));
}

TEST(LinearAttention, RecurrentMatchesNaiveReference) {
  const std::uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  ErrorLog log{"recurrent vs naive reference"};
  for (const LinearShape& shape : kShapes)
    for (const int n : {1, 5, 40}) {
      const Inputs in(shape, n, rng);
      OwnedLinearState state(shape);
      const auto got = run_recurrent(shape, in, 0, n, state);
      const auto want = reference::linear_attention(shape, in.weight, in.q, in.k, in.v, n);
      EXPECT_LE(log.add(relative_error(got, want)), 1e-5) << describe(shape) << " n=" << n;
    }
}

TEST(LinearAttention, ChunkwiseMatchesRecurrent) {
  const std::uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  ErrorLog log{"chunkwise vs recurrent (outputs and states)"};
  for (const LinearShape& shape : {kShapes[0], kShapes[1], kShapes[2]})
    for (const int prefix : {0, 37})  // from the empty state and from a state that already holds 37 tokens
      for (const int n : {1, 7, 100, 4100})
        for (const int chunk : {16, 64}) {
          if (n == 4100 && prefix == 0 && chunk == 16) continue;  // keeps the test fast; the other 4100 runs cover it
          const Inputs in(shape, prefix + n, rng);
          OwnedLinearState recurrent_state(shape);
          run_recurrent(shape, in, 0, prefix, recurrent_state);
          OwnedLinearState chunkwise_state = recurrent_state;
          const auto want = run_recurrent(shape, in, prefix, n, recurrent_state);
          const auto got = run_chunkwise(shape, in, prefix, n, chunk, chunkwise_state);
          const auto where = ::testing::Message() << describe(shape) << " prefix=" << prefix << " n=" << n
                                                  << " chunk=" << chunk;
          EXPECT_LE(log.add(relative_error(got, want)), 1e-5) << where;
          EXPECT_LE(log.add(relative_error(chunkwise_state.matrix, recurrent_state.matrix)), 1e-5) << where;
          EXPECT_LE(log.add(relative_error(chunkwise_state.normalizer, recurrent_state.normalizer)), 1e-5) << where;
        }
}

TEST(LinearAttention, SplitRunEqualsOneRun) {
  const std::uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  ErrorLog log{"split runs vs one run"};
  const int n = 150;
  for (const LinearShape& shape : kShapes) {
    const Inputs in(shape, n, rng);
    OwnedLinearState whole(shape);
    const auto recurrent_whole = run_recurrent(shape, in, 0, n, whole);
    for (const int split : {1, 48, 99}) {
      const auto where = ::testing::Message() << describe(shape) << " split=" << split;
      // The same recurrence in two calls is the same arithmetic: equal to the bit.
      OwnedLinearState parts(shape);
      auto recurrent_parts = run_recurrent(shape, in, 0, split, parts);
      recurrent_parts = concatenate(recurrent_parts, run_recurrent(shape, in, split, n - split, parts));
      EXPECT_EQ(recurrent_parts, recurrent_whole) << where;
      EXPECT_EQ(parts.matrix, whole.matrix) << where;

      // Chunkwise in two calls (chunk sizes differing between them), and chunkwise prefill then
      // recurrent decode, against the single recurrent run.
      OwnedLinearState chunked(shape);
      auto chunked_parts = run_chunkwise(shape, in, 0, split, 16, chunked);
      chunked_parts = concatenate(chunked_parts, run_chunkwise(shape, in, split, n - split, 64, chunked));
      EXPECT_LE(log.add(relative_error(chunked_parts, recurrent_whole)), 1e-5) << where;
      EXPECT_LE(log.add(relative_error(chunked.matrix, whole.matrix)), 1e-5) << where;

      OwnedLinearState mixed(shape);
      auto mixed_parts = run_chunkwise(shape, in, 0, split, 64, mixed);
      mixed_parts = concatenate(mixed_parts, run_recurrent(shape, in, split, n - split, mixed));
      EXPECT_LE(log.add(relative_error(mixed_parts, recurrent_whole)), 1e-5) << where;
      EXPECT_LE(log.add(relative_error(mixed.normalizer, whole.normalizer)), 1e-5) << where;
    }
  }
}

// Query head h must read KV head h / G (weights, keys and values): changing KV head 1 leaves the
// query heads of group 0 untouched to the bit and changes those of group 1. A mapping h % Hkv,
// or a query using another head's W than its keys, fails this.
TEST(LinearAttention, QueryHeadsReadTheirGroupsKvHead) {
  const std::uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const LinearShape shape{4, 2, 16, FeatureMap::Hedgehog};
  const int n = 30, d = shape.head_dim;
  const Inputs base(shape, n, rng);
  for (const bool chunkwise : {false, true}) {
    auto run = [&](const Inputs& in) {
      OwnedLinearState state(shape);
      return chunkwise ? run_chunkwise(shape, in, 0, n, 16, state) : run_recurrent(shape, in, 0, n, state);
    };
    const auto before = run(base);
    for (const char* change : {"weight", "keys", "values"}) {
      Inputs changed = base;
      if (std::string(change) == "weight") {
        for (std::size_t i = std::size_t(d) * cpu::kHedgehogWidth; i < changed.weight.size(); ++i) changed.weight[i] *= -1.5f;
      } else {
        auto& tensor = std::string(change) == "keys" ? changed.k : changed.v;
        for (int t = 0; t < n; ++t)
          for (int c = 0; c < d; ++c) tensor[(std::size_t(t) * shape.kv_heads + 1) * d + c] += 1.0f;
      }
      const auto after = run(changed);
      for (int h = 0; h < shape.query_heads; ++h) {
        std::vector<float> head_before, head_after;
        for (int t = 0; t < n; ++t)
          for (int c = 0; c < d; ++c) {
            head_before.push_back(before[(std::size_t(t) * shape.query_heads + h) * d + c]);
            head_after.push_back(after[(std::size_t(t) * shape.query_heads + h) * d + c]);
          }
        const auto where = ::testing::Message() << change << " of KV head 1, query head " << h
                                                << (chunkwise ? " chunkwise" : " recurrent");
        if (h / shape.group() == 0) {
          EXPECT_EQ(head_after, head_before) << where;
        } else {
          EXPECT_GT(relative_error(head_after, head_before), 1e-3) << where;
        }
      }
    }
  }
}

// Logits xW in the thousands: each softmax must subtract its own maximum. The output is a convex
// combination of values scaled by den / (den + ε) ≤ 1, so it stays within the values' range.
TEST(LinearAttention, HedgehogWithLargeInputsStaysFiniteAndBounded) {
  const std::uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const LinearShape shape{4, 2, 16, FeatureMap::Hedgehog};
  const int n = 70, d = shape.head_dim;
  Inputs in(shape, n, rng, 1000.0f);
  for (float& w : in.weight) w *= 10.0f;
  for (const bool chunkwise : {false, true}) {
    OwnedLinearState state(shape);
    const auto out = chunkwise ? run_chunkwise(shape, in, 0, n, 16, state) : run_recurrent(shape, in, 0, n, state);
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < shape.query_heads; ++h)
        for (int c = 0; c < d; ++c) {
          float largest = 0;  // max_j≤t |v_j,c| of this head's KV head
          for (int j = 0; j <= t; ++j)
            largest = std::max(largest, std::abs(in.v[(std::size_t(j) * shape.kv_heads + h / shape.group()) * d + c]));
          const float o = out[(std::size_t(t) * shape.query_heads + h) * d + c];
          ASSERT_TRUE(std::isfinite(o)) << "t=" << t << " h=" << h << (chunkwise ? " chunkwise" : " recurrent");
          ASSERT_LE(std::abs(o), largest * (1 + 1e-5f)) << "t=" << t << " h=" << h;
        }
    for (float x : state.matrix) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(LinearAttention, RecurrentDecodeAllocatesNothing) {
  std::mt19937 rng(std::random_device{}());
  for (const LinearShape& shape : kShapes) {
    const Inputs in(shape, 1, rng);
    OwnedLinearState state(shape);
    std::vector<float> out(std::size_t(shape.query_heads) * shape.head_dim);
    cpu::linear_attention_recurrent(shape, in.w(), in.q.data(), in.k.data(), in.v.data(), 1, state.view(), out.data());
    const auto before = testing::allocations_so_far();
    cpu::linear_attention_recurrent(shape, in.w(), in.q.data(), in.k.data(), in.v.data(), 1, state.view(), out.data());
    EXPECT_EQ(testing::allocations_so_far() - before, 0) << describe(shape);
  }
}

TEST(LinearAttention, RejectsShapesItCannotRun) {
  std::vector<float> buffer(4096);
  const cpu::LinearState state{buffer.data(), buffer.data()};
  auto run = [&](const LinearShape& shape, const float* weight) {
    cpu::linear_attention_recurrent(shape, weight, buffer.data(), buffer.data(), buffer.data(), 0, state, buffer.data());
  };
  EXPECT_THROW(run({3, 2, 16, FeatureMap::Elu1}, nullptr), std::invalid_argument);      // Hq not a multiple of Hkv
  EXPECT_THROW(run({2, 2, 16, FeatureMap::Hedgehog}, nullptr), std::invalid_argument);  // hedgehog without W
  EXPECT_THROW(run({2, 2, kMaxHeadDim + 1, FeatureMap::Elu1}, nullptr), std::invalid_argument);
  EXPECT_NO_THROW(run({2, 2, 16, FeatureMap::Elu1}, nullptr));
}

}  // namespace
}  // namespace bifocal
