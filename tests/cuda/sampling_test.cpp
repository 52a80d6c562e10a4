// Device token sampling (src/backend/cuda/sampling.cuh) against the CPU Sampler's semantics
// (src/runtime/sampler.cpp), on fresh random logits each run (the seed is printed with any
// failure). argmax and the greedy paths must equal bifocal::argmax exactly, ties included. Draws
// use another RNG than the CPU Sampler, so they are checked as a distribution: every draw lies in
// the CPU's filtered set (temperature, top-k, top-p), and Pearson's chi-square of 20,000 draws
// against the exact filtered probabilities stays under its 1e-6 quantile (a false alarm in one
// of 10⁶ checks; a wrong temperature, cut or tie rule moves the statistic by thousands).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/sampling.cuh"
#include "bifocal/error.h"
#include "bifocal/sampler.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::SeededCudaTest;

constexpr int kQwen3Vocab = 151936;
constexpr int kDraws = 20000;


class DeviceSampling : public SeededCudaTest {};

std::string describe(const SamplingParams& p) {
  return "temperature " + std::to_string(p.temperature) + ", top_k " + std::to_string(p.top_k) + ", top_p " +
         std::to_string(p.top_p);
}

// Logits, workspace, step counter and an output slot per draw on the device.
class DeviceSampler {
 public:
  // An output slot no kernel wrote reads as token 0x7F7F7F7F: outside every vocabulary, and not
  // cuda::kNonFiniteLogitsToken, so a test expecting that answer cannot pass on an unwritten slot.
  static constexpr int kUnwritten = 0x7F;

  DeviceSampler(const std::vector<float>& logits, int max_draws)
      : vocab_(int(logits.size())),
        logits_(std::span<const float>(logits)),
        workspace_(std::max(cuda::sampling_workspace_bytes(vocab_), cuda::argmax_workspace_bytes(vocab_))),
        step_(1),
        tokens_(max_draws) {
    tokens_.fill_bytes(kUnwritten);
    set_step(0);
  }

  // Uploads and fills run on the legacy default stream, and a pageable upload may return before
  // its copy lands: synchronise the device so work on any other stream sees them.
  void set_step(std::uint64_t step) {
    step_.upload(std::span<const std::uint64_t>(&step, 1));
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::uint64_t step() const { return step_.download()[0]; }

  std::int32_t argmax() {
    tokens_.fill_bytes(kUnwritten);
    cuda::argmax_logits(logits_.data(), vocab_, workspace_.data(), tokens_.data(), nullptr);
    return tokens_.download()[0];
  }

  // `draws` consecutive calls (the step advancing on the device), one output slot each.
  std::vector<std::int32_t> sample(const SamplingParams& params, int draws, cudaStream_t stream = nullptr) {
    tokens_.fill_bytes(kUnwritten);
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (int i = 0; i < draws; ++i)
      cuda::sample_logits(logits_.data(), vocab_, params, step_.data(), workspace_.data(), tokens_.data() + i, stream);
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    auto tokens = tokens_.download();
    tokens.resize(draws);
    return tokens;
  }

  const float* logits() const { return logits_.data(); }
  int vocab() const { return vocab_; }
  std::uint64_t* step_pointer() { return step_.data(); }
  void* workspace() { return workspace_.data(); }
  std::int32_t* first_token() { return tokens_.data(); }
  std::int32_t first_token_value() const { return tokens_.download()[0]; }

 private:
  int vocab_;
  DeviceBuffer<float> logits_;
  DeviceBuffer<unsigned char> workspace_;
  DeviceBuffer<std::uint64_t> step_;
  DeviceBuffer<std::int32_t> tokens_;
};

// The probability the CPU Sampler gives each token: its own steps (temperature, top-k by
// (logit desc, index asc), float exp(s − s₀), top-p on the double running sum), normalised.
std::vector<double> filtered_distribution(const std::vector<float>& logits, const SamplingParams& params,
                                          int* nucleus_size = nullptr) {
  const std::size_t vocab = logits.size();
  std::vector<std::pair<float, std::int32_t>> order(vocab);
  for (std::size_t i = 0; i < vocab; ++i) order[i] = {logits[i] / params.temperature, std::int32_t(i)};
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  const std::size_t kept = params.top_k > 0 ? std::min<std::size_t>(params.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), by_logit);
  std::vector<double> weight(kept);
  double total = 0;
  for (std::size_t i = 0; i < kept; ++i) total += weight[i] = std::exp(order[i].first - order[0].first);
  std::size_t nucleus = kept;
  double cumulative = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    cumulative += weight[i] / total;
    if (cumulative >= params.top_p) {
      nucleus = i + 1;
      break;
    }
  }
  double nucleus_total = 0;
  for (std::size_t i = 0; i < nucleus; ++i) nucleus_total += weight[i];
  std::vector<double> probability(vocab, 0.0);
  for (std::size_t i = 0; i < nucleus; ++i) probability[order[i].second] = weight[i] / nucleus_total;
  if (nucleus_size != nullptr) *nucleus_size = int(nucleus);
  return probability;
}

// Every draw has a positive probability, and Pearson's chi-square over the tokens expected ≥ 5
// times (the rest pooled into one bin) stays under the 1e-6 quantile of its chi-square law
// (Wilson–Hilferty: df·(1 − 2/(9df) + z·√(2/(9df)))³ with z = 4.75).
void expect_draws_follow(const std::vector<std::int32_t>& draws, const std::vector<double>& probability) {
  const int vocab = int(probability.size());
  std::vector<int> count(vocab, 0);
  int outside = 0;
  std::int32_t first_outside = 0;
  for (const std::int32_t token : draws) {
    if (token < 0 || token >= vocab || probability[token] <= 0.0) {
      if (outside++ == 0) first_outside = token;
      continue;
    }
    ++count[token];
  }
  ASSERT_EQ(outside, 0) << "draws outside the filtered set, the first: token " << first_outside;

  const double n = double(draws.size());
  double chi_square = 0, pooled_expected = 0, pooled_observed = 0, worst = 0;
  int bins = 0, worst_token = -1;
  for (int token = 0; token < vocab; ++token) {
    const double expected = n * probability[token];
    if (expected <= 0) continue;
    if (expected < 5) {
      pooled_expected += expected, pooled_observed += count[token];
      continue;
    }
    const double term = (count[token] - expected) * (count[token] - expected) / expected;
    if (term > worst) worst = term, worst_token = token;
    chi_square += term, ++bins;
  }
  if (pooled_expected >= 1) {
    chi_square += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++bins;
  }
  const int df = bins - 1;
  if (df < 1) return;  // one bin: the support check above is the whole test
  const double a = 2.0 / (9.0 * df);
  const double critical = df * std::pow(1.0 - a + 4.75 * std::sqrt(a), 3.0);
  EXPECT_LE(chi_square, critical) << bins << " bins; the worst, token " << worst_token << ": expected "
                                  << n * probability[worst_token] << ", drawn " << count[worst_token];
}

std::vector<float> random_logits(int vocab, std::mt19937& rng, float scale) {
  return testing::random_vector(std::size_t(vocab), rng, scale);
}

// A few tokens far above the rest (at random places, so in different slices): most of the mass,
// as in a trained model's logits, with a long tail of small probabilities behind it. The peaks are
// then lifted together so that the tail holds exactly `tail_share` of the mass at temperature 1:
// with random heights alone the tail's share varied from seed to seed (a top-p 0.85 nucleus once
// reached 13,910 tokens, past the 4,096-candidate cap the test relies on).
std::vector<float> peaked_logits(int vocab, int peaks, std::mt19937& rng, double tail_share = 0.08) {
  auto logits = random_logits(vocab, rng, 1.0f);
  std::uniform_int_distribution<int> place(0, vocab - 1);
  std::uniform_real_distribution<float> height(8.0f, 12.0f);
  std::vector<bool> is_peak(std::size_t(vocab), false);
  for (int i = 0; i < peaks; ++i) {
    const int token = place(rng);
    logits[token] += height(rng);
    is_peak[token] = true;
  }
  double peak_mass = 0.0, tail_mass = 0.0;
  for (int token = 0; token < vocab; ++token) (is_peak[token] ? peak_mass : tail_mass) += std::exp(double(logits[token]));
  // tail / (tail + lift·peaks) = tail_share
  const float lift = float(std::log(tail_mass * (1.0 - tail_share) / (tail_share * peak_mass)));
  for (int token = 0; token < vocab; ++token)
    if (is_peak[token]) logits[token] += lift;
  return logits;
}

TEST_F(DeviceSampling, ArgmaxIsTheFirstIndexOfTheLargestLogit) {
  for (const int vocab : {1, 2, 3, 7, 2047, 2048, 2049, 4099, 50257, kQwen3Vocab, 262144}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    std::uniform_int_distribution<int> place(0, vocab - 1);
    std::vector<std::vector<float>> cases;
    cases.push_back(random_logits(vocab, rng_, 3.0f));
    auto tied = random_logits(vocab, rng_, 3.0f);  // the maximum at several places, the last one too
    const float top = *std::max_element(tied.begin(), tied.end()) + 1.0f;
    for (int i = 0; i < 3; ++i) tied[place(rng_)] = top;
    tied[vocab - 1] = top;
    cases.push_back(tied);
    cases.push_back(std::vector<float>(vocab, 0.5f));        // all tied: token 0
    cases.push_back(std::vector<float>(vocab, -INFINITY));  // all masked: token 0
    auto masked = std::vector<float>(vocab, -INFINITY);
    masked[place(rng_)] = -1e30f;
    cases.push_back(masked);
    for (std::size_t c = 0; c < cases.size(); ++c) {
      SCOPED_TRACE("case " + std::to_string(c));
      DeviceSampler device(cases[c], 1);
      EXPECT_EQ(device.argmax(), argmax(cases[c]));
    }
  }
}

TEST_F(DeviceSampling, GreedyParamsGiveTheArgmaxAndAdvanceTheStep) {
  for (const int vocab : {5, 50257, kQwen3Vocab}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    auto logits = random_logits(vocab, rng_, 2.0f);
    const float top = *std::max_element(logits.begin(), logits.end()) + 0.5f;
    std::uniform_int_distribution<int> place(0, vocab - 1);
    logits[place(rng_)] = top, logits[place(rng_)] = top;  // a tie: the first one wins
    DeviceSampler device(logits, 4);
    for (const SamplingParams& params : {SamplingParams{0.0f, 40, 0.95f, 1}, SamplingParams{-1.0f, 0, 1.0f, 2},
                                         SamplingParams{0.7f, 1, 0.9f, 3}, SamplingParams{1.5f, 1, 1.0f, 4}}) {
      SCOPED_TRACE(describe(params));
      device.set_step(10);
      const auto tokens = device.sample(params, 4);
      for (const std::int32_t token : tokens) EXPECT_EQ(token, argmax(logits));
      EXPECT_EQ(device.step(), 14u);
    }
  }
}

// The sampling paths: top-k with top-p, top-p alone (candidates capped at 4096), and the whole
// vocabulary (Gumbel-max).
const SamplingParams kPathParams[] = {{0.8f, 40, 0.95f, 0}, {1.0f, 0, 0.9f, 0}, {1.0f, 0, 1.0f, 0}};

TEST_F(DeviceSampling, DrawsAreReproducibleFromSeedAndStep) {
  for (const int vocab : {1000, kQwen3Vocab}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    DeviceSampler device(random_logits(vocab, rng_, 0.5f), 200);
    for (SamplingParams params : kPathParams) {
      params.seed = rng_();
      SCOPED_TRACE(describe(params) + ", seed " + std::to_string(params.seed));
      device.set_step(0);
      const auto first_run = device.sample(params, 200);
      EXPECT_EQ(device.step(), 200u);
      device.set_step(0);
      EXPECT_EQ(device.sample(params, 200), first_run) << "same seed and steps, other tokens";
      // Different steps draw different numbers: 200 draws from ≥ 40 near-equal tokens cover many.
      const std::set<std::int32_t> distinct(first_run.begin(), first_run.end());
      EXPECT_GE(distinct.size(), 20u);
      // The same step draws the same token every time.
      for (int i = 0; i < 5; ++i) {
        device.set_step(77);
        EXPECT_EQ(device.sample(params, 1)[0], first_run[77]);
      }
      params.seed += 1;
      device.set_step(0);
      EXPECT_NE(device.sample(params, 200), first_run) << "another seed, the same tokens";
    }
  }
}

TEST_F(DeviceSampling, ReplayedGraphDrawsFreshTokens) {
  DeviceSampler device(random_logits(kQwen3Vocab, rng_, 0.5f), 100);
  cudaStream_t stream;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (SamplingParams params : kPathParams) {
    params.seed = rng_();
    SCOPED_TRACE(describe(params));
    device.set_step(5);
    const auto direct = device.sample(params, 100, stream);

    cudaGraph_t graph;
    cudaGraphExec_t replay;
    cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    cuda::sample_logits(device.logits(), device.vocab(), params, device.step_pointer(), device.workspace(),
                        device.first_token(), stream);
    cuda::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cuda::check(cudaGraphInstantiate(&replay, graph, 0), "cudaGraphInstantiate");
    device.set_step(5);
    std::vector<std::int32_t> replayed;
    for (int i = 0; i < 100; ++i) {
      cuda::check(cudaGraphLaunch(replay, stream), "cudaGraphLaunch");
      cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      replayed.push_back(device.first_token_value());
    }
    EXPECT_EQ(replayed, direct) << "a replayed graph must draw what direct calls draw from the same step";
    EXPECT_EQ(device.step(), 105u);
    cuda::check(cudaGraphExecDestroy(replay), "cudaGraphExecDestroy");
    cuda::check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  }
  cuda::check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

TEST_F(DeviceSampling, SmallVocabularyDrawsFollowTheFilteredDistribution) {
  const auto logits = random_logits(50, rng_, 2.0f);
  DeviceSampler device(logits, kDraws);
  const SamplingParams cases[] = {
      {0.7f, 10, 0.9f, 0}, {1.0f, 0, 1.0f, 0}, {1.3f, 0, 0.8f, 0}, {0.5f, 50, 1.0f, 0},
      {1.0f, 7, 1.0f, 0},  {2.0f, 60, 0.5f, 0}, {1.0f, 2, 1.0f, 0},  {0.9f, 0, 0.3f, 0},
  };
  for (SamplingParams params : cases) {
    params.seed = rng_();
    SCOPED_TRACE(describe(params));
    expect_draws_follow(device.sample(params, kDraws), filtered_distribution(logits, params));
  }
}

TEST_F(DeviceSampling, LargeVocabularyDrawsFollowTheFilteredDistribution) {
  struct Case {
    int vocab;
    SamplingParams params;
  };
  const Case cases[] = {
      {kQwen3Vocab, {1.0f, 40, 0.95f, 0}},   // 10 slices, sort of ≤ 1024
      {kQwen3Vocab, {0.6f, 20, 0.95f, 0}},   // Qwen3's generation config
      {kQwen3Vocab, {0.8f, 0, 1.0f, 0}},     // Gumbel-max: the tail (a few % of the mass) is one bin
      {kQwen3Vocab, {0.5f, 0, 0.9f, 0}},     // top-p alone: the nucleus lies within the 4096 cap
      {kQwen3Vocab, {1.0f, 0, 0.85f, 0}},    // ... and the tail, 8 % of the mass, lies mostly beyond the cap
      {kQwen3Vocab, {1.0f, 2000, 1.0f, 0}},  // sort of 4096
      {kQwen3Vocab, {1.0f, 4096, 0.99f, 0}},
      {262144, {1.0f, 50, 0.9f, 0}},
      {50257, {0.7f, 1000, 0.95f, 0}},
  };
  for (Case c : cases) {
    c.params.seed = rng_();
    SCOPED_TRACE("vocab " + std::to_string(c.vocab) + ", " + describe(c.params));
    const auto logits = peaked_logits(c.vocab, 30, rng_);
    int nucleus = 0;
    const auto probability = filtered_distribution(logits, c.params, &nucleus);
    if (c.params.top_p < 1.0f) ASSERT_LE(nucleus, cuda::kMaxSamplingCandidates) << "the test needs a nucleus under the cap";
    DeviceSampler device(logits, kDraws);
    expect_draws_follow(device.sample(c.params, kDraws), probability);
  }
}

// Tied logits at the top-k boundary: the CPU keeps the lowest indices, across slices too.
TEST_F(DeviceSampling, TopKTiesKeepTheLowestIndices) {
  struct Case {
    int vocab, levels, top_k;
  };
  // 5000 tokens over 10 levels: ≈ 500 share the top one, the first 100 are kept. 40000 tokens
  // over 100 levels: ≈ 400 top ones spread over 3 slices, the first 300 kept. 40000 over 10
  // levels with k = 1500: slice 0 alone holds the kept ones.
  for (const Case c : {Case{5000, 10, 100}, Case{40000, 100, 300}, Case{40000, 10, 1500}}) {
    SCOPED_TRACE("vocab " + std::to_string(c.vocab) + ", top_k " + std::to_string(c.top_k));
    std::uniform_int_distribution<int> level(0, c.levels - 1);
    std::vector<float> logits(c.vocab);
    for (float& x : logits) x = float(level(rng_));
    const SamplingParams params{1.0f, c.top_k, 1.0f, rng_()};
    DeviceSampler device(logits, kDraws);
    expect_draws_follow(device.sample(params, kDraws), filtered_distribution(logits, params));
  }
}

// A NaN or +inf logit anywhere (an overflow): every path answers kNonFiniteLogitsToken, which
// the decode step turns into the CPU Sampler's error, and still advances the step. -inf stays a
// masked token (the tests above).
TEST_F(DeviceSampling, NonFiniteLogitsGiveTheMarkerOnEveryPath) {
  const SamplingParams greedy{0.0f, 0, 1.0f, 0};
  for (const int vocab : {100, kQwen3Vocab}) {
    std::uniform_int_distribution<int> place(0, vocab - 1);
    for (const float bad : {NAN, INFINITY}) {
      for (const int at : {place(rng_), vocab - 1}) {
        SCOPED_TRACE("vocab " + std::to_string(vocab) + ", " + std::to_string(bad) + " at " + std::to_string(at));
        auto logits = random_logits(vocab, rng_, 2.0f);
        logits[at] = bad;
        DeviceSampler device(logits, 2);
        EXPECT_EQ(device.argmax(), cuda::kNonFiniteLogitsToken);
        for (const SamplingParams& params : {greedy, kPathParams[0], kPathParams[1], kPathParams[2]}) {
          SCOPED_TRACE(describe(params));
          device.set_step(3);
          EXPECT_EQ(device.sample(params, 2), std::vector<std::int32_t>(2, cuda::kNonFiniteLogitsToken));
          EXPECT_EQ(device.step(), 5u);
        }
      }
    }
  }
}

// The draw kernel reads its shared candidates only once every thread has written its share. A
// draw right after one whose candidates were all +inf (left behind in shared memory) must not see
// them: the non-finite check once read them before the barrier, and a finite draw answered the
// marker (DrawsAreReproducibleFromSeedAndStep caught it on the H200, 2026-12-02).
TEST_F(DeviceSampling, FiniteLogitsAfterNonFiniteOnesGiveNoMarker) {
  DeviceSampler poisoned(std::vector<float>(kQwen3Vocab, INFINITY), 1);
  DeviceSampler finite(random_logits(kQwen3Vocab, rng_, 0.5f), 1);
  for (SamplingParams params : {kPathParams[0], kPathParams[1]}) {  // the paths through the draw kernel
    params.seed = rng_();
    SCOPED_TRACE(describe(params));
    int markers = 0;
    for (int i = 0; i < 300; ++i) {
      ASSERT_EQ(poisoned.sample(params, 1)[0], cuda::kNonFiniteLogitsToken);
      markers += finite.sample(params, 1)[0] == cuda::kNonFiniteLogitsToken;
    }
    EXPECT_EQ(markers, 0) << "finite logits answered the non-finite marker";
  }
}

TEST_F(DeviceSampling, InvalidParamsAndLogitsAreRejected) {
  DeviceSampler device(random_logits(100, rng_, 1.0f), 1);
  auto sample = [&](const SamplingParams& params, const float* logits) {
    cuda::sample_logits(logits, 100, params, device.step_pointer(), device.workspace(), device.first_token(), nullptr);
  };
  EXPECT_THROW(sample({NAN, 40, 0.9f, 0}, device.logits()), Error);
  EXPECT_THROW(sample({1.0f, -1, 0.9f, 0}, device.logits()), Error);
  EXPECT_THROW(sample({1.0f, 40, 0.0f, 0}, device.logits()), Error);
  EXPECT_THROW(sample({1.0f, 40, 1.5f, 0}, device.logits()), Error);
  EXPECT_THROW(sample({1.0f, 40, 0.9f, 0}, device.logits() + 1), Error);  // not 16-byte aligned
  EXPECT_NO_THROW(sample({1.0f, 40, 0.9f, 0}, device.logits()));
}

// Time per call at Qwen3's vocabulary (printed for the record; the tokens are checked).
TEST_F(DeviceSampling, ReportsTimePerCallAtQwen3Vocabulary) {
  const auto logits = peaked_logits(kQwen3Vocab, 30, rng_);
  DeviceSampler device(logits, 1000);
  for (const SamplingParams& params :
       {SamplingParams{0.0f, 0, 1.0f, 1}, SamplingParams{0.6f, 20, 0.95f, 1}, SamplingParams{1.0f, 0, 1.0f, 1},
        SamplingParams{1.0f, 0, 0.9f, 1}, SamplingParams{1.0f, 4096, 1.0f, 1}}) {
    device.sample(params, 10);  // warm up
    const auto start = std::chrono::steady_clock::now();
    const auto tokens = device.sample(params, 1000);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto probability = filtered_distribution(logits, params.temperature > 0 ? params : SamplingParams{1.0f, 1, 1.0f, 1});
    for (const std::int32_t token : tokens) ASSERT_TRUE(token >= 0 && token < kQwen3Vocab && probability[token] > 0);
    std::printf("[ sampling time ] %s: %.1f us per call (launches included)\n", describe(params).c_str(),
                seconds / 1000 * 1e6);
  }
}

}  // namespace
}  // namespace bifocal
