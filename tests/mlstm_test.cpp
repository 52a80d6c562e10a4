// The mLSTM kernels (backend/cpu/mlstm.h) against the quadratic double reference and against each
// other, on fresh random inputs every run; a failure prints the seed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics.h"
#include "backend/cpu/mlstm.h"
#include "backend/cpu/mlstm_reference.h"
#include "allocation_counter.h"

namespace bifocal {
namespace {

using testing::relative_error;

using cpu::MlstmShape;

bool all_finite(const std::vector<float>& x) {
  for (float value : x)
    if (!std::isfinite(value)) return false;
  return true;
}

std::string describe(const MlstmShape& shape) {
  return "Hq=" + std::to_string(shape.query_heads) + " Hkv=" + std::to_string(shape.kv_heads) +
         " S=" + std::to_string(shape.states) + " d=" + std::to_string(shape.head_dim);
}

// A token sequence for one layer: q [n, Hq, d], k and v [n, Hkv, d], raw gates [n, S].
struct Sequence {
  MlstmShape shape;
  int n;
  std::vector<float> q, k, v, input_gate, forget_gate;

  const float* q_at(int t) const { return q.data() + std::size_t(t) * shape.query_heads * shape.head_dim; }
  const float* kv_at(const std::vector<float>& x, int t) const {
    return x.data() + std::size_t(t) * shape.kv_heads * shape.head_dim;
  }
  const float* gate_at(const std::vector<float>& x, int t) const { return x.data() + std::size_t(t) * shape.states; }
};

std::vector<float> normal_vector(std::size_t size, std::mt19937& rng, float mean, float deviation) {
  std::normal_distribution<float> normal(mean, deviation);
  std::vector<float> x(size);
  for (float& value : x) value = normal(rng);
  return x;
}

// How far input gates spread. Wide gates drive m up to ≈ 15, where the floor exp(−m) of the
// denominator no longer stops a nearly cancelling q̂ᵀn from magnifying small differences in n;
// moderate gates keep m small. Tests that round the state to fp32 between calls and compare with
// a run that does not use moderate gates: there a rounding of n by 6e-8, magnified a thousandfold
// at a rare token, would be measured rather than the kernels.
enum class GateSpread { Wide, Moderate };

// Unit-variance q, k, v; input gates around 0 and forget gates leaning towards remembering, both
// spread enough that the stabilizer switches between its two arms.
Sequence random_sequence(const MlstmShape& shape, int n, std::mt19937& rng, GateSpread spread = GateSpread::Wide) {
  const std::size_t d = shape.head_dim;
  return {shape,
          n,
          normal_vector(std::size_t(n) * shape.query_heads * d, rng, 0, 1),
          normal_vector(std::size_t(n) * shape.kv_heads * d, rng, 0, 1),
          normal_vector(std::size_t(n) * shape.kv_heads * d, rng, 0, 1),
          normal_vector(std::size_t(n) * shape.states, rng, 0, spread == GateSpread::Wide ? 3 : 1),
          normal_vector(std::size_t(n) * shape.states, rng, 2, 3)};
}

struct StateBuffers {
  std::vector<float> matrix, normalizer, stabilizer;
  explicit StateBuffers(const MlstmShape& shape)
      : matrix(cpu::mlstm_matrix_floats(shape), NAN),
        normalizer(cpu::mlstm_normalizer_floats(shape), NAN),
        stabilizer(cpu::mlstm_stabilizer_floats(shape), NAN) {
    cpu::mlstm_reset(shape, view());
  }
  cpu::MlstmState view() { return {matrix.data(), normalizer.data(), stabilizer.data()}; }
};

// Tokens [begin, begin + count) of the sequence, continuing `state`; returns their outputs.
std::vector<float> run_recurrent(const Sequence& x, int begin, int count, StateBuffers& state) {
  std::vector<float> out(std::size_t(count) * x.shape.query_heads * x.shape.head_dim, NAN);
  cpu::mlstm_recurrent(x.shape, x.q_at(begin), x.kv_at(x.k, begin), x.kv_at(x.v, begin), x.gate_at(x.input_gate, begin),
                       x.gate_at(x.forget_gate, begin), count, state.view(), out.data());
  return out;
}

std::vector<float> run_chunkwise(const Sequence& x, int begin, int count, int chunk_size, StateBuffers& state) {
  std::vector<float> out(std::size_t(count) * x.shape.query_heads * x.shape.head_dim, NAN);
  cpu::mlstm_chunkwise(x.shape, x.q_at(begin), x.kv_at(x.k, begin), x.kv_at(x.v, begin), x.gate_at(x.input_gate, begin),
                       x.gate_at(x.forget_gate, begin), count, chunk_size, state.view(), out.data());
  return out;
}

std::vector<float> tail(const std::vector<float>& x, std::size_t from) { return {x.begin() + from, x.end()}; }

unsigned fresh_seed() { return std::random_device{}(); }

// Both kernels' outputs and states agree within `tolerance`, and their stabilizers bit for bit
// (both step m_t with the same fp32 recurrence).
void expect_same_run(const std::vector<float>& out, const StateBuffers& state, const std::vector<float>& want_out,
                     const StateBuffers& want_state, double tolerance) {
  EXPECT_LE(relative_error(out, want_out), tolerance);
  EXPECT_LE(relative_error(state.matrix, want_state.matrix), tolerance);
  EXPECT_LE(relative_error(state.normalizer, want_state.normalizer), tolerance);
  EXPECT_EQ(state.stabilizer, want_state.stabilizer);
}

const MlstmShape kStatePerKvHead{4, 2, 2, 16};    // state=kv: G = 2 query heads read each state
const MlstmShape kStatePerQueryHead{4, 2, 4, 16};  // state=q: k, v repeated over the group
const MlstmShape kNoGroups{3, 3, 3, 32};          // Hq = Hkv

TEST(MlstmRecurrent, MatchesQuadraticReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const MlstmShape& shape : {kStatePerKvHead, kStatePerQueryHead, kNoGroups, MlstmShape{8, 2, 4, 64}}) {
    for (int n : {1, 6, 45}) {
      SCOPED_TRACE(describe(shape) + " n=" + std::to_string(n));
      const Sequence x = random_sequence(shape, n, rng);
      const auto want = reference::mlstm(shape, x.q, x.k, x.v, x.input_gate, x.forget_gate, n);
      StateBuffers state(shape);
      const auto out = run_recurrent(x, 0, n, state);
      EXPECT_LE(relative_error(out, want.out), 1e-5);
      EXPECT_LE(relative_error(state.matrix, want.matrix), 1e-5);
      EXPECT_LE(relative_error(state.normalizer, want.normalizer), 1e-5);
      EXPECT_LE(relative_error(state.stabilizer, want.stabilizer), 1e-5);
    }
  }
}

TEST(MlstmRecurrent, ContinuesFromAPrefixState) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const MlstmShape& shape : {kStatePerKvHead, kStatePerQueryHead}) {
    SCOPED_TRACE(describe(shape));
    const int prefix = 23, n = 60;
    const Sequence x = random_sequence(shape, n, rng, GateSpread::Moderate);
    const auto want = reference::mlstm(shape, x.q, x.k, x.v, x.input_gate, x.forget_gate, n);
    StateBuffers state(shape);
    run_recurrent(x, 0, prefix, state);
    const auto out = run_recurrent(x, prefix, n - prefix, state);
    EXPECT_LE(relative_error(out, tail(want.out, std::size_t(prefix) * shape.query_heads * shape.head_dim)), 1e-5);
  }
}

// The decode path (one token per call, the state rounded to fp32 after every token) against one call.
TEST(MlstmRecurrent, TokenByTokenEqualsOneCall) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape{8, 2, 2, 64};
  const int n = 300;
  const Sequence x = random_sequence(shape, n, rng, GateSpread::Moderate);
  StateBuffers whole(shape), stepped(shape);
  const auto want = run_recurrent(x, 0, n, whole);
  std::vector<float> out;
  for (int t = 0; t < n; ++t) {
    const auto token = run_recurrent(x, t, 1, stepped);
    out.insert(out.end(), token.begin(), token.end());
  }
  expect_same_run(out, stepped, want, whole, 1e-5);
}

// DESIGN.md: decode allocates nothing.
TEST(MlstmRecurrent, DecodeStepAllocatesNothing) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const MlstmShape& shape : {kStatePerKvHead, kStatePerQueryHead, MlstmShape{64, 1, 1, 128}}) {
    const Sequence x = random_sequence(shape, 2, rng);
    StateBuffers state(shape);
    run_recurrent(x, 0, 1, state);  // the first call may start the thread pool
    std::vector<float> out(std::size_t(shape.query_heads) * shape.head_dim);
    const auto before = testing::allocations_so_far();
    cpu::mlstm_recurrent(shape, x.q_at(1), x.kv_at(x.k, 1), x.kv_at(x.v, 1), x.gate_at(x.input_gate, 1),
                         x.gate_at(x.forget_gate, 1), 1, state.view(), out.data());
    EXPECT_EQ(testing::allocations_so_far() - before, 0) << describe(shape);
    EXPECT_TRUE(all_finite(out));
  }
}

TEST(MlstmChunkwise, MatchesRecurrentFromANonZeroState) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int prefix = 50;
  for (const MlstmShape& shape : {MlstmShape{4, 2, 2, 32}, MlstmShape{4, 2, 4, 16}}) {
    for (int n : {1, 7, 64, 200, 4100}) {
      const Sequence x = random_sequence(shape, prefix + n, rng);
      StateBuffers start(shape);
      run_recurrent(x, 0, prefix, start);
      StateBuffers recurrent_state = start;
      const auto want = run_recurrent(x, prefix, n, recurrent_state);
      for (int chunk_size : {16, 64, 128}) {
        SCOPED_TRACE(describe(shape) + " n=" + std::to_string(n) + " chunk=" + std::to_string(chunk_size));
        StateBuffers state = start;
        const auto out = run_chunkwise(x, prefix, n, chunk_size, state);
        expect_same_run(out, state, want, recurrent_state, 1e-5);
      }
    }
  }
}

TEST(MlstmChunkwise, MatchesReferenceAtARealHeadSize) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape{8, 2, 2, 128};
  const int n = 150;
  const Sequence x = random_sequence(shape, n, rng);
  const auto want = reference::mlstm(shape, x.q, x.k, x.v, x.input_gate, x.forget_gate, n);
  StateBuffers state(shape);
  const auto out = run_chunkwise(x, 0, n, 64, state);
  EXPECT_LE(relative_error(out, want.out), 1e-5);
  EXPECT_LE(relative_error(state.matrix, want.matrix), 1e-5);
  EXPECT_LE(relative_error(state.normalizer, want.normalizer), 1e-5);
}

TEST(MlstmChunkwise, TwoCallsEqualOneCall) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape = kStatePerKvHead;
  const int n = 300, split = 77;  // neither part a multiple of the chunk size
  const Sequence x = random_sequence(shape, n, rng, GateSpread::Moderate);
  StateBuffers one(shape), two(shape);
  const auto want = run_chunkwise(x, 0, n, 64, one);
  auto out = run_chunkwise(x, 0, split, 64, two);
  const auto second = run_chunkwise(x, split, n - split, 64, two);
  out.insert(out.end(), second.begin(), second.end());
  expect_same_run(out, two, want, one, 1e-5);
}

// Gates that push the stabilizer to both ends: ±1e3 and ±50 (beyond the soft cap), forget gates
// saturated at 1 (logf ≈ −3e-7, which fp32 cannot add to |m| ≈ 15) and at 0, an input gate that
// is large for one token and then tiny for hundreds. Each state runs the phases shifted, so the
// states differ.
Sequence extreme_sequence(const MlstmShape& shape, int n, std::mt19937& rng) {
  Sequence x = random_sequence(shape, n, rng);
  std::bernoulli_distribution coin(0.5);
  std::normal_distribution<float> wide(0, 30);
  const int phase_length = 256, phases = 6;
  for (int t = 0; t < n; ++t)
    for (int s = 0; s < shape.states; ++s) {
      const int phase = (t / phase_length + s) % phases;
      const bool phase_start = t % phase_length == 0;
      const float sign = coin(rng) ? 1.0f : -1.0f;
      float& input = x.input_gate[std::size_t(t) * shape.states + s];
      float& forget = x.forget_gate[std::size_t(t) * shape.states + s];
      switch (phase) {
        case 0: input = phase_start ? 1e3f : -1e3f, forget = 50; break;       // remember one token
        case 1: input = 50 * sign, forget = -50; break;                       // forget every step
        case 2: input = -1e3f, forget = 1e3f; break;                          // nothing new, m decays
        case 3: input = 1e3f * sign, forget = 1e3f * (coin(rng) ? 1 : -1); break;
        case 4: input = wide(rng), forget = wide(rng); break;
        default: input = phase_start ? 50.0f : -1e3f, forget = -1e3f; break;  // forget-all, tiny input
      }
    }
  return x;
}

TEST(MlstmStabilizer, ExtremeGatesStayFiniteAndFormsAgree) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape{4, 2, 4, 32};
  const int n = 4608;
  const Sequence x = extreme_sequence(shape, n, rng);
  StateBuffers recurrent_state(shape);
  const auto want = run_recurrent(x, 0, n, recurrent_state);
  ASSERT_TRUE(all_finite(want));
  ASSERT_TRUE(all_finite(recurrent_state.matrix) && all_finite(recurrent_state.normalizer) &&
              all_finite(recurrent_state.stabilizer));
  for (int chunk_size : {16, 64, 128}) {
    SCOPED_TRACE("chunk=" + std::to_string(chunk_size));
    StateBuffers state(shape);
    const auto out = run_chunkwise(x, 0, n, chunk_size, state);
    ASSERT_TRUE(all_finite(out));
    expect_same_run(out, state, want, recurrent_state, 1e-5);
  }
}

TEST(MlstmStabilizer, ExtremeGatesMatchReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape{4, 2, 4, 16};
  const int n = 1100;  // every phase, some of them twice
  const Sequence x = extreme_sequence(shape, n, rng);
  const auto want = reference::mlstm(shape, x.q, x.k, x.v, x.input_gate, x.forget_gate, n);
  StateBuffers recurrent_state(shape), chunkwise_state(shape);
  EXPECT_LE(relative_error(run_recurrent(x, 0, n, recurrent_state), want.out), 1e-5);
  EXPECT_LE(relative_error(run_chunkwise(x, 0, n, 64, chunkwise_state), want.out), 1e-5);
}

// 15·tanh(x/15) rounds to exactly 15 for x = 1e3 and 1e4. Without the cap the capped token would
// set m ≈ 1e3 and wipe out every later token with a moderate input gate, which the last check sees.
TEST(MlstmSoftCap, InputGatesBeyondTheCapAreEquivalent) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape{2, 1, 1, 16};
  const int n = 12, spike = 3, follower = 4;
  Sequence x = random_sequence(shape, n, rng);
  std::fill(x.forget_gate.begin(), x.forget_gate.end(), 5.0f);  // keep the spike in memory
  x.input_gate[follower] = 14;
  Sequence big = x, bigger = x, without_follower = x;
  big.input_gate[spike] = 1e3f;
  bigger.input_gate[spike] = 1e4f;
  without_follower.input_gate[spike] = 1e3f;
  without_follower.input_gate[follower] = -1e3f;

  for (bool chunkwise : {false, true}) {
    SCOPED_TRACE(chunkwise ? "chunkwise" : "recurrent");
    auto run = [&](const Sequence& sequence, StateBuffers& state) {
      return chunkwise ? run_chunkwise(sequence, 0, n, 5, state) : run_recurrent(sequence, 0, n, state);
    };
    StateBuffers big_state(shape), bigger_state(shape), without_state(shape);
    const auto big_out = run(big, big_state), bigger_out = run(bigger, bigger_state);
    ASSERT_TRUE(all_finite(big_out));
    EXPECT_EQ(big_out, bigger_out);
    EXPECT_EQ(big_state.matrix, bigger_state.matrix);
    EXPECT_EQ(big_state.stabilizer, bigger_state.stabilizer);
    EXPECT_GT(big_state.stabilizer[0], 14.0f);  // m ≈ ĩ = 15 less a few small log forget gates
    EXPECT_LE(big_state.stabilizer[0], 15.0f);
    // The token after the spike (ĩ = 14 against the spike's 15) still counts.
    const std::size_t from_follower = std::size_t(follower) * shape.query_heads * shape.head_dim;
    const auto without_out = run(without_follower, without_state);
    EXPECT_GT(relative_error(tail(without_out, from_follower), tail(big_out, from_follower)), 1e-2);
    const auto want = reference::mlstm(shape, big.q, big.k, big.v, big.input_gate, big.forget_gate, n);
    EXPECT_LE(relative_error(big_out, want.out), 1e-5);
  }
}

// One token from the zero state, written out by hand per query head h: state s = h / (Hq / S),
// KV head s / (S / Hkv); m = max(logf, ĩ), i′ = exp(ĩ − m),
// h = i′(q̂·k)v / (max(|i′ q̂·k|, exp(−m)) + 1e-6).
std::vector<float> one_token_by_hand(const Sequence& x) {
  const MlstmShape& shape = x.shape;
  const int d = shape.head_dim;
  std::vector<float> out(std::size_t(shape.query_heads) * d);
  for (int h = 0; h < shape.query_heads; ++h) {
    const int s = h / (shape.query_heads / shape.states), kv = s / (shape.states / shape.kv_heads);
    const double input = 15 * std::tanh(x.input_gate[s] / 15.0);
    const double log_forget = -std::log1p(std::exp(-15 * std::tanh(x.forget_gate[s] / 15.0)));
    const double m = std::max(log_forget, input), input_weight = std::exp(input - m);
    double dot = 0;
    for (int a = 0; a < d; ++a) dot += double(x.q[std::size_t(h) * d + a]) * x.k[std::size_t(kv) * d + a] / std::sqrt(d);
    const double denominator = std::max(std::abs(input_weight * dot), std::exp(-m)) + 1e-6;
    for (int b = 0; b < d; ++b)
      out[std::size_t(h) * d + b] = float(input_weight * dot * x.v[std::size_t(kv) * d + b] / denominator);
  }
  return out;
}

std::vector<float> head_output(const std::vector<float>& out, int head, int d) {
  return {out.begin() + std::size_t(head) * d, out.begin() + std::size_t(head + 1) * d};
}

// Every query head gets the same q, so a head's output depends only on the state it reads; the
// input gates (−3 … −8, where exp(−m) dominates the denominator) differ per state, so each state
// shows. Heads reading one state must agree, heads reading different states must not.
TEST(MlstmGroups, EachQueryHeadReadsItsOwnState) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const MlstmShape& shape : {kStatePerKvHead, kStatePerQueryHead, MlstmShape{8, 2, 4, 8}}) {
    SCOPED_TRACE(describe(shape));
    const int d = shape.head_dim;
    Sequence x = random_sequence(shape, 1, rng);
    for (int h = 1; h < shape.query_heads; ++h) std::copy_n(x.q.begin(), d, x.q.begin() + std::size_t(h) * d);
    for (int s = 0; s < shape.states; ++s) x.input_gate[s] = -3.0f - 5.0f * float(s) / float(shape.states);
    const auto by_hand = one_token_by_hand(x);
    for (bool chunkwise : {false, true}) {
      StateBuffers state(shape);
      const auto out = chunkwise ? run_chunkwise(x, 0, 1, 16, state) : run_recurrent(x, 0, 1, state);
      EXPECT_LE(relative_error(out, by_hand), 1e-5);
      const int readers = shape.query_heads / shape.states;
      for (int h = 1; h < shape.query_heads; ++h) {
        const bool same_state = h / readers == (h - 1) / readers;
        const double difference = relative_error(head_output(out, h, d), head_output(out, h - 1, d));
        if (same_state) EXPECT_EQ(difference, 0) << "heads " << h - 1 << ", " << h;
        else EXPECT_GT(difference, 1e-3) << "heads " << h - 1 << ", " << h;
      }
    }
  }
}

// state=q with equal gates in every state: the states of one KV group absorb the same k, v, so
// their heads agree; the two groups differ.
TEST(MlstmGroups, StatesOfOneKvHeadShareItsKeys) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const MlstmShape shape = kStatePerQueryHead;
  const int d = shape.head_dim, n = 20;
  Sequence x = random_sequence(shape, n, rng);
  for (int t = 0; t < n; ++t)
    for (int h = 1; h < shape.query_heads; ++h) {
      std::copy_n(x.q.begin() + std::size_t(t) * shape.query_heads * d, d,
                  x.q.begin() + (std::size_t(t) * shape.query_heads + h) * d);
      x.input_gate[std::size_t(t) * shape.states + h] = x.input_gate[std::size_t(t) * shape.states];
      x.forget_gate[std::size_t(t) * shape.states + h] = x.forget_gate[std::size_t(t) * shape.states];
    }
  StateBuffers state(shape);
  const auto out = run_chunkwise(x, 0, n, 8, state);
  const std::vector<float> last = tail(out, std::size_t(n - 1) * shape.query_heads * d);
  EXPECT_EQ(head_output(last, 0, d), head_output(last, 1, d));
  EXPECT_EQ(head_output(last, 2, d), head_output(last, 3, d));
  EXPECT_GT(relative_error(head_output(last, 0, d), head_output(last, 2, d)), 1e-3);
  const auto want = reference::mlstm(shape, x.q, x.k, x.v, x.input_gate, x.forget_gate, n);
  EXPECT_LE(relative_error(out, want.out), 1e-5);
}

// The denominator's constants, on one token with hand-picked numbers: k = e_0, v = (1, 2, 3, 4),
// q = (2c, 0, 0, 0), so q̂·k = c (d = 4). An input gate of 1e3 caps to ĩ = 15, so m = 15 and i′ = 1:
// h = c·v / (max(|c|, e^{−15}) + 1e-6). c = 1e-6 makes the ε half the denominator (h = v/2 nearly);
// c = 1e-7 falls under the floor e^{−15} ≈ 3.06e-7.
TEST(MlstmDenominator, FloorExpMinusMAndEpsilon) {
  const MlstmShape shape{1, 1, 1, 4};
  for (double c : {1.0, 1e-6, 1e-7, -1e-7}) {
    SCOPED_TRACE("q̂·k = " + std::to_string(c));
    Sequence x{shape, 1, {float(2 * c), 0, 0, 0}, {1, 0, 0, 0}, {1, 2, 3, 4}, {1e3f}, {0.0f}};
    const double scale = c / (std::max(std::abs(c), std::exp(-15.0)) + 1e-6);
    const std::vector<float> want{float(scale), float(2 * scale), float(3 * scale), float(4 * scale)};
    for (bool chunkwise : {false, true}) {
      StateBuffers state(shape);
      const auto out = chunkwise ? run_chunkwise(x, 0, 1, 16, state) : run_recurrent(x, 0, 1, state);
      EXPECT_LE(relative_error(out, want), 1e-6) << (chunkwise ? "chunkwise" : "recurrent");
      EXPECT_EQ(state.stabilizer[0], 15.0f);
    }
  }
}

TEST(MlstmShapes, RejectsShapesTheKernelsCannotRun) {
  EXPECT_THROW(cpu::mlstm_check_shape({4, 2, 3, 16}), std::invalid_argument);  // S not a multiple of Hkv
  EXPECT_THROW(cpu::mlstm_check_shape({4, 2, 8, 16}), std::invalid_argument);  // S does not divide Hq
  EXPECT_THROW(cpu::mlstm_check_shape({4, 2, 2, 0}), std::invalid_argument);
  EXPECT_NO_THROW(cpu::mlstm_check_shape(kStatePerQueryHead));
  StateBuffers state(kStatePerKvHead);
  const std::vector<float> x(64, 0.0f);
  std::vector<float> out(64);
  EXPECT_THROW(cpu::mlstm_chunkwise(kStatePerKvHead, x.data(), x.data(), x.data(), x.data(), x.data(), 1, 0,
                                    state.view(), out.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace bifocal
