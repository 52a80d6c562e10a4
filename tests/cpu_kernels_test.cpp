// The CPU backend's kernels against the naive references, on fresh random inputs each run.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <random>

#include "numerics.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/reference_kernels.h"
#include "model/rope.h"

namespace bifocal {
namespace {

using testing::relative_error;
using testing::random_vector;

std::mt19937 fresh_rng() { return std::mt19937(std::random_device{}()); }

TEST(CpuKernels, MatmulMatchesReference) {
  auto rng = fresh_rng();
  CpuBackend backend;
  for (const auto [n, k, m] : {std::tuple{1, 64, 96}, {5, 33, 17}, {70, 128, 200}}) {
    const auto x = random_vector(std::size_t(n) * k, rng), w = random_vector(std::size_t(m) * k, rng), bias = random_vector(m, rng);
    std::vector<float> out(std::size_t(n) * m, NAN);
    backend.matmul(x.data(), w.data(), bias.data(), n, k, m, out.data());
    EXPECT_LT(relative_error(out, reference::matmul(x, w, bias, n, k, m)), 1e-5) << n << "x" << k << "x" << m;
    backend.matmul(x.data(), w.data(), nullptr, n, k, m, out.data());
    EXPECT_LT(relative_error(out, reference::matmul(x, w, {}, n, k, m)), 1e-5);
  }
}

TEST(CpuKernels, RmsnormMatchesReference) {
  auto rng = fresh_rng();
  CpuBackend backend;
  const auto x = random_vector(7 * 96, rng, 3.0f), weight = random_vector(96, rng);
  std::vector<float> out(x.size(), NAN);
  backend.rmsnorm(x.data(), weight.data(), 7, 96, 1e-6f, out.data());
  EXPECT_LT(relative_error(out, reference::rmsnorm(x, weight, 7, 96, 1e-6f)), 1e-6);
}

TEST(CpuKernels, RopeMatchesRotationReference) {
  auto rng = fresh_rng();
  CpuBackend backend;
  const int n = 9, heads = 3, d = 32;
  RopeConfig config;
  config.theta = 10000;
  const auto inv_freq = rope_inverse_frequencies(config, d);
  std::vector<std::int64_t> positions(n);
  for (int i = 0; i < n; ++i) positions[i] = 3 + 40 * i;
  auto x = random_vector(std::size_t(n) * heads * d, rng);
  const auto want = reference::rope(x, n, heads, d, positions, inv_freq);
  backend.rope(x.data(), n, heads, d, positions.data(), inv_freq.data());
  EXPECT_LT(relative_error(x, want), 1e-5);
}

TEST(CpuKernels, RopeLlama3ScalingKeepsShortAndStretchesLongWavelengths) {
  RopeConfig config;
  config.type = RopeConfig::Type::Llama3;
  config.theta = 500000;
  config.factor = 8;
  config.low_freq_factor = 1;
  config.high_freq_factor = 4;
  config.original_max_position = 8192;
  RopeConfig plain = config;
  plain.type = RopeConfig::Type::Default;
  const auto scaled = rope_inverse_frequencies(config, 128), base = rope_inverse_frequencies(plain, 128);
  EXPECT_EQ(scaled.front(), base.front());                      // wavelength 2π: untouched
  EXPECT_FLOAT_EQ(scaled.back(), base.back() / 8.0f);           // longest wavelength: ÷ factor
  for (std::size_t i = 0; i < base.size(); ++i) {               // blend stays between the two
    EXPECT_LE(scaled[i], base[i] * (1 + 1e-6f));
    EXPECT_GE(scaled[i], base[i] / 8.0f * (1 - 1e-6f));
  }
}

struct AttentionCase {
  int query_heads, kv_heads, window, sink_tokens, length;
  bool learned_sink, shuffled_positions;
};

// Fresh random queries (the last n positions), keys, values and sinks for one AttentionCase.
struct RandomAttention {
  static constexpr int d = 16, n = 5;
  std::vector<float> keys, values, queries, sinks;
  std::vector<std::int64_t> positions, key_positions;
  RandomAttention(const AttentionCase& c, std::mt19937& rng)
      : keys(random_vector(std::size_t(c.length) * c.kv_heads * d, rng, 2.0f)),
        values(random_vector(keys.size(), rng)),
        queries(random_vector(std::size_t(n) * c.query_heads * d, rng, 2.0f)),
        sinks(random_vector(c.query_heads, rng, 2.0f)),
        positions(n),
        key_positions(c.length) {
    for (int i = 0; i < n; ++i) positions[i] = c.length - n + i;
    for (int j = 0; j < c.length; ++j) key_positions[j] = j;
    if (c.shuffled_positions) std::shuffle(key_positions.begin(), key_positions.end(), rng);
  }
};

class CpuAttention : public ::testing::TestWithParam<AttentionCase> {};

// Fresh random keys, queries and sinks; positions either 0 … length−1 or a shuffled list (as a
// ring buffer holds them); the backend's online softmax against the explicit masked reference.
TEST_P(CpuAttention, MatchesMaskedReference) {
  const AttentionCase c = GetParam();
  auto rng = fresh_rng();
  CpuBackend backend;
  RandomAttention input(c, rng);
  const int d = RandomAttention::d, n = RandomAttention::n;
  const auto& [keys, values, queries, sinks, positions, key_positions] = input;
  std::vector<float> out(queries.size(), NAN);
  const AttentionArgs args{.queries = queries.data(), .positions = positions.data(), .n = n, .keys = keys.data(),
                           .values = values.data(), .key_positions = c.shuffled_positions ? key_positions.data() : nullptr,
                           .num_keys = c.length, .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d,
                           .window = c.window, .sink_tokens = c.sink_tokens,
                           .learned_sinks = c.learned_sink ? sinks.data() : nullptr, .out = out.data()};
  backend.attention(args);
  EXPECT_LT(relative_error(out, reference::attention(args)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuAttention,
                         ::testing::Values(AttentionCase{4, 2, 0, 0, 40, false, false}, AttentionCase{4, 4, 0, 0, 5, false, false},
                                           AttentionCase{8, 2, 8, 0, 40, false, false}, AttentionCase{6, 3, 1, 0, 12, false, false},
                                           AttentionCase{4, 1, 64, 0, 30, false, true}, AttentionCase{4, 2, 8, 4, 40, false, true},
                                           AttentionCase{4, 2, 16, 1, 50, false, false}, AttentionCase{4, 2, 8, 0, 40, true, true},
                                           AttentionCase{4, 4, 0, 0, 20, true, false}));

// The attention probe (backend.h): the mass on keys at positions < probe_first_keys, learned sink
// in the denominator. Backend against reference on fresh random inputs, for the same shapes as
// above; the output itself must not change when the probe is on.
TEST_P(CpuAttention, ProbeMatchesReference) {
  const AttentionCase c = GetParam();
  auto rng = fresh_rng();
  CpuBackend backend;
  RandomAttention input(c, rng);
  const int d = RandomAttention::d, n = RandomAttention::n;
  const auto& [keys, values, queries, sinks, positions, key_positions] = input;
  for (const int first_keys : {1, 3, c.length}) {
    std::vector<float> plain(queries.size(), NAN), probed(queries.size(), NAN);
    std::vector<float> mass(std::size_t(n) * c.query_heads, NAN), want_mass(mass.size(), NAN);
    AttentionArgs args{.queries = queries.data(), .positions = positions.data(), .n = n, .keys = keys.data(),
                       .values = values.data(), .key_positions = c.shuffled_positions ? key_positions.data() : nullptr,
                       .num_keys = c.length, .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d,
                       .window = c.window, .sink_tokens = c.sink_tokens,
                       .learned_sinks = c.learned_sink ? sinks.data() : nullptr, .out = plain.data()};
    backend.attention(args);
    args.out = probed.data();
    args.probe_first_keys = first_keys;
    args.probe_mass = mass.data();
    backend.attention(args);
    EXPECT_EQ(plain, probed);
    args.probe_mass = want_mass.data();
    reference::attention(args);
    for (std::size_t i = 0; i < mass.size(); ++i) {
      EXPECT_NEAR(mass[i], want_mass[i], 1e-5) << "first_keys " << first_keys << " at " << i;
      EXPECT_GE(mass[i], 0.0f);
      EXPECT_LE(mass[i], 1.0f + 1e-6f);
      // With every key counted and no learned sink the mass is 1. (With a sink it is 1 less the
      // sink's share, checked against the reference above: that share can be below fp32's
      // resolution, so "< 1" is not a property of the fp32 result.)
      if (first_keys == c.length && !c.learned_sink) EXPECT_NEAR(mass[i], 1.0f, 1e-5);
    }
  }
}

TEST(CpuAttentionMask, SinkTokensAreCountedInsideTheWindow) {
  // DESIGN.md swa(w, s): at t, keys {0 … s−1} ∪ {max(s, t − (w − s) + 1) … t}: at most w keys.
  AttentionArgs a{};
  a.window = 8;
  a.sink_tokens = 3;
  int visible = 0;
  for (std::int64_t kp = 0; kp <= 100; ++kp) visible += key_visible(a, 100, kp);
  EXPECT_EQ(visible, 8);
  EXPECT_TRUE(key_visible(a, 100, 2));
  EXPECT_FALSE(key_visible(a, 100, 3));
  EXPECT_TRUE(key_visible(a, 100, 96));
  EXPECT_FALSE(key_visible(a, 100, 95));
}

}  // namespace
}  // namespace bifocal
