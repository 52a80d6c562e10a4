// The paired bootstrap (src/eval/bootstrap.h) on cases whose answer is known: identical scores,
// a constant shift, a three-problem case checked against the exact distribution of all 27
// resamples, and a larger case against the normal approximation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "eval/bootstrap.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

TEST(Bootstrap, InterpolatedQuantileByHand) {
  const std::vector<double> sorted{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(interpolated_quantile(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(interpolated_quantile(sorted, 1), 4);
  EXPECT_DOUBLE_EQ(interpolated_quantile(sorted, 0.5), 2.5);   // rank 1.5: halfway from 2 to 3
  EXPECT_DOUBLE_EQ(interpolated_quantile(sorted, 0.25), 1.75);  // rank 0.75
  EXPECT_DOUBLE_EQ(interpolated_quantile(std::vector<double>{7}, 0.975), 7);
}

TEST(Bootstrap, IdenticalScoresGiveZeroAndAPointInterval) {
  const std::vector<double> scores{1, 0, 0.5, 1, 0.25, 0};
  const auto result = paired_bootstrap(scores, scores);
  EXPECT_EQ(result.problems, 6u);
  EXPECT_EQ(result.resamples, 20000);
  EXPECT_EQ(result.mean_difference, 0);
  EXPECT_EQ(result.lower, 0);
  EXPECT_EQ(result.upper, 0);
  EXPECT_EQ(result.fraction_at_most_zero, 1);
}

TEST(Bootstrap, AConstantShiftIsExactlyThatShift) {
  // Multiples of 1/4 add exactly in binary floating point, so every resampled mean is 0.25.
  const std::vector<double> b{0, 0.5, 0.75, 0.25, 0.5};
  std::vector<double> a;
  for (const double score : b) a.push_back(score + 0.25);
  const auto result = paired_bootstrap(a, b);
  EXPECT_EQ(result.mean_difference, 0.25);
  EXPECT_EQ(result.lower, 0.25);
  EXPECT_EQ(result.upper, 0.25);
  EXPECT_EQ(result.fraction_at_most_zero, 0);
  const auto reversed = paired_bootstrap(b, a);
  EXPECT_EQ(reversed.mean_difference, -0.25);
  EXPECT_EQ(reversed.fraction_at_most_zero, 1);
}

TEST(Bootstrap, ThreeProblemsAgainstEveryResample) {
  // Differences {0, 0, 1}: A solved problem 3 and B did not; both tied on problems 1 and 2.
  const std::vector<double> a{1, 0, 1}, b{1, 0, 0};
  // The 27 equally likely resamples (index triples) by their mean: 0 (8 of them), 1/3 (12),
  // 2/3 (6), 1 (1). So P(mean <= 0) = 8/27; the 2.5% quantile is 0 (8/27 > 2.5%) and the 97.5%
  // quantile is 1 (1/27 > 2.5%).
  int at_most_zero = 0, all_ones = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) {
        const double sum = (a[i] - b[i]) + (a[j] - b[j]) + (a[k] - b[k]);
        at_most_zero += sum <= 0;
        all_ones += sum == 3;
      }
  ASSERT_EQ(at_most_zero, 8);
  ASSERT_EQ(all_ones, 1);

  const auto result = paired_bootstrap(a, b);
  EXPECT_DOUBLE_EQ(result.mean_difference, 1.0 / 3.0);
  EXPECT_EQ(result.lower, 0);
  EXPECT_EQ(result.upper, 1);
  // 20,000 draws: the standard error of the share is sqrt(8/27 · 19/27 / 20000) = 0.0032.
  EXPECT_NEAR(result.fraction_at_most_zero, 8.0 / 27.0, 0.012);
}

TEST(Bootstrap, HundredCoinFlipsMatchTheNormalApproximation) {
  // 50 problems only A solves and 50 both solve: differences half 1, half 0; the mean is 0.5 with
  // standard error sqrt(0.25 / 100) = 0.05, so the 95% interval is about 0.5 ± 0.098.
  std::vector<double> a(100, 1.0), b(100, 1.0);
  for (int i = 0; i < 100; i += 2) b[i] = 0;
  const auto result = paired_bootstrap(a, b);
  EXPECT_DOUBLE_EQ(result.mean_difference, 0.5);
  EXPECT_NEAR(result.lower, 0.5 - 1.96 * 0.05, 0.02);
  EXPECT_NEAR(result.upper, 0.5 + 1.96 * 0.05, 0.02);
  EXPECT_EQ(result.fraction_at_most_zero, 0);  // no resample of 100 draws is all zeros in practice
}

TEST(Bootstrap, FixedSeedReproducesAndSwappingMixersMirrors) {
  const std::vector<double> a{1, 0, 1, 1, 0, 0.5, 1, 0}, b{0, 0, 1, 0, 1, 0.5, 1, 0};
  const auto first = paired_bootstrap(a, b), second = paired_bootstrap(a, b);
  EXPECT_EQ(first.lower, second.lower);
  EXPECT_EQ(first.upper, second.upper);
  EXPECT_EQ(first.fraction_at_most_zero, second.fraction_at_most_zero);
  // Same seed, same resampled indices: every mean is negated, so the interval mirrors.
  const auto swapped = paired_bootstrap(b, a);
  EXPECT_DOUBLE_EQ(swapped.mean_difference, -first.mean_difference);
  EXPECT_NEAR(swapped.lower, -first.upper, 1e-12);
  EXPECT_NEAR(swapped.upper, -first.lower, 1e-12);
  const auto other_seed = paired_bootstrap(a, b, {.resamples = 20000, .seed = 7, .confidence = 0.95});
  EXPECT_NEAR(other_seed.fraction_at_most_zero, first.fraction_at_most_zero, 0.02);
  const auto narrow = paired_bootstrap(a, b, {.resamples = 20000, .seed = 20261129, .confidence = 0.5});
  EXPECT_GE(narrow.lower, first.lower);
  EXPECT_LE(narrow.upper, first.upper);
}

TEST(Bootstrap, BadInputsAreNamed) {
  const std::vector<double> two{1, 0}, three{1, 0, 1}, none;
  testing::expect_error([&] { paired_bootstrap(two, three); }, {"paired bootstrap", "2 and 3 problems"});
  testing::expect_error([&] { paired_bootstrap(none, none); }, {"paired bootstrap", "no problems"});
  testing::expect_error([&] { paired_bootstrap(two, two, {.resamples = 0}); }, {"resamples"});
  testing::expect_error([&] { paired_bootstrap(two, two, {.confidence = 1}); }, {"confidence"});
}

}  // namespace
}  // namespace bifocal::eval
