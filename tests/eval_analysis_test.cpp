// The report's analysis (src/eval/eval_analysis.h) on small hand-made outcomes: recovery rates,
// answer-length strata, the paired comparison per stratum, and counts of long correct answers.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "eval/eval_analysis.h"
#include "eval/long_generation.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

ProblemOutcome outcome(const std::string& task, const std::string& id, double score, std::optional<double> length) {
  ProblemOutcome result;
  result.task = task;
  result.id = id;
  result.score = score;
  result.answer_length = length;
  return result;
}

TEST(EvalAnalysis, ReadsALongGenerationResult) {
  const ItemResult result = score_samples({{"\\boxed{7}", 5000, "eos"}, {"8", 3000, "eos"}, {"7", 1000, "max tokens"}}, "7");
  const ProblemOutcome read = problem_outcome("aime24", "aime_2024_I_1", result, "pass@1");
  EXPECT_DOUBLE_EQ(read.score, 2.0 / 3.0);
  EXPECT_EQ(read.answer_length, 3000);
  ASSERT_EQ(read.samples.size(), 3u);
  EXPECT_EQ(read.samples[0].length, 5000);
  EXPECT_TRUE(read.samples[0].correct);
  EXPECT_FALSE(read.samples[1].correct);
  testing::expect_error([&] { problem_outcome("aime24", "aime_2024_I_1", result, "acc"); },
                        {"aime24 item aime_2024_I_1", "no 'acc' metric"});
  // A likelihood task's result: no length, no samples.
  ItemResult choice;
  choice.metrics = {{"acc", 1.0}, {"acc_norm", 0.0}};
  const ProblemOutcome mc = problem_outcome("piqa", "7", choice, "acc_norm");
  EXPECT_EQ(mc.score, 0);
  EXPECT_FALSE(mc.answer_length.has_value());
  EXPECT_TRUE(mc.samples.empty());
}

TEST(EvalAnalysis, RecoveryPerTaskAndItsMean) {
  const std::vector<ProblemOutcome> teacher{outcome("arc", "1", 1, {}), outcome("arc", "2", 0.6, {}),
                                            outcome("gsm8k", "1", 0.5, {}), outcome("niah", "1", 0, {})};
  const std::vector<ProblemOutcome> student{outcome("arc", "1", 0.6, {}), outcome("arc", "2", 0.6, {}),
                                            outcome("gsm8k", "1", 0.5, {}), outcome("niah", "1", 0.25, {})};
  const auto teacher_means = mean_score_by_task(teacher);
  EXPECT_DOUBLE_EQ(teacher_means.at("arc"), 0.8);
  const RecoverySummary summary = recovery_rates(teacher_means, mean_score_by_task(student));
  ASSERT_EQ(summary.tasks.size(), 3u);
  EXPECT_EQ(summary.tasks[0].task, "arc");
  EXPECT_DOUBLE_EQ(summary.tasks[0].recovery, 0.75);  // 0.6 / 0.8
  EXPECT_DOUBLE_EQ(summary.tasks[1].recovery, 1.0);
  EXPECT_TRUE(std::isnan(summary.tasks[2].recovery));  // the teacher scored 0 on niah
  EXPECT_EQ(summary.tasks_averaged, 2u);
  EXPECT_DOUBLE_EQ(summary.mean_recovery, 0.875);
  testing::expect_error([&] { recovery_rates({{"arc", 0.5}, {"piqa", 0.7}}, {{"arc", 0.5}}); },
                        {"recovery rate", "piqa", "no student results"});
}

TEST(EvalAnalysis, LengthStrata) {
  const auto defaults = length_strata();
  ASSERT_EQ(defaults.size(), 2u);
  EXPECT_EQ(defaults[0].label, "short (< 4000)");
  EXPECT_EQ(defaults[1].label, "long (>= 4000)");
  EXPECT_TRUE(defaults[0].contains(3999.5));
  EXPECT_FALSE(defaults[0].contains(4000));
  EXPECT_TRUE(defaults[1].contains(4000));
  const auto three = length_strata({1000, 4000});
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].label, "< 1000");
  EXPECT_EQ(three[1].label, "1000-4000");
  EXPECT_EQ(three[2].label, ">= 4000");
  EXPECT_TRUE(three[1].contains(1000));
  testing::expect_error([] { length_strata({4000, 1000}); }, {"answer length buckets", "1000 follows 4000"});
  testing::expect_error([] { length_strata({}); }, {"at least one edge"});
  testing::expect_error([] { length_strata({0}); }, {"positive"});
}

TEST(EvalAnalysis, ScoreByOwnAnswerLength) {
  const std::vector<ProblemOutcome> outcomes{outcome("t", "1", 1, 100), outcome("t", "2", 0, 3999),
                                             outcome("t", "3", 1, 4000), outcome("t", "4", 0.5, 9000)};
  const auto strata = score_by_answer_length(outcomes);
  ASSERT_EQ(strata.size(), 2u);
  EXPECT_EQ(strata[0].problems, 2u);
  EXPECT_DOUBLE_EQ(strata[0].score, 0.5);
  EXPECT_EQ(strata[1].problems, 2u);
  EXPECT_DOUBLE_EQ(strata[1].score, 0.75);
  testing::expect_error([] { score_by_answer_length(std::vector<ProblemOutcome>{outcome("t", "9", 1, {})}); },
                        {"t item 9", "no answer length"});
}

TEST(EvalAnalysis, PairedComparisonPerStratumOfTheReferenceLengths) {
  // The teacher's lengths put p1 and p4 in the short stratum, p2 and p3 in the long one.
  const std::vector<ProblemOutcome> teacher{outcome("aime24", "p1", 1, 500), outcome("aime24", "p2", 1, 5000),
                                            outcome("hmmt", "p3", 1, 6000), outcome("hmmt", "p4", 0, 100)};
  // Mixer A's own lengths would stratify differently; they must not be used.
  const std::vector<ProblemOutcome> a{outcome("aime24", "p1", 1, 9000), outcome("aime24", "p2", 1, 10),
                                      outcome("hmmt", "p3", 1, 10), outcome("hmmt", "p4", 0, 9000)};
  // B lists the same problems in another order.
  const std::vector<ProblemOutcome> b{outcome("hmmt", "p4", 0, 1), outcome("hmmt", "p3", 0, 1),
                                      outcome("aime24", "p2", 0, 1), outcome("aime24", "p1", 1, 1)};
  const auto comparison = compare_by_answer_length(a, b, teacher, {4000, 10000});
  EXPECT_EQ(comparison.overall.stratum.label, "all");
  EXPECT_EQ(comparison.overall.problems, 4u);
  EXPECT_DOUBLE_EQ(comparison.overall.score_a, 0.75);
  EXPECT_DOUBLE_EQ(comparison.overall.score_b, 0.25);
  EXPECT_DOUBLE_EQ(comparison.overall.difference.mean_difference, 0.5);
  ASSERT_EQ(comparison.strata.size(), 3u);
  const auto& short_answers = comparison.strata[0];  // p1 (1 vs 1) and p4 (0 vs 0): no difference
  EXPECT_EQ(short_answers.problems, 2u);
  EXPECT_EQ(short_answers.difference.mean_difference, 0);
  EXPECT_EQ(short_answers.difference.lower, 0);
  EXPECT_EQ(short_answers.difference.upper, 0);
  const auto& long_answers = comparison.strata[1];  // p2 and p3: A right, B wrong on both
  EXPECT_EQ(long_answers.problems, 2u);
  EXPECT_DOUBLE_EQ(long_answers.score_a, 1);
  EXPECT_DOUBLE_EQ(long_answers.score_b, 0);
  EXPECT_EQ(long_answers.difference.lower, 1);
  EXPECT_EQ(long_answers.difference.upper, 1);
  EXPECT_EQ(long_answers.difference.fraction_at_most_zero, 0);
  const auto& longest = comparison.strata[2];  // nothing at or above 10,000 tokens
  EXPECT_EQ(longest.stratum.label, ">= 10000");
  EXPECT_EQ(longest.problems, 0u);
  EXPECT_TRUE(std::isnan(longest.score_a));
  EXPECT_TRUE(std::isnan(longest.difference.mean_difference));
}

TEST(EvalAnalysis, PairedComparisonNamesMissingProblems) {
  const std::vector<ProblemOutcome> a{outcome("t", "1", 1, 10), outcome("t", "2", 1, 10)};
  const std::vector<ProblemOutcome> b_other{outcome("t", "1", 1, 10), outcome("t", "3", 1, 10)};
  const std::vector<ProblemOutcome> b_short{outcome("t", "1", 1, 10)};
  const std::vector<ProblemOutcome> twice{outcome("t", "1", 1, 10), outcome("t", "1", 0, 10)};
  const std::vector<ProblemOutcome> no_length{outcome("t", "1", 1, 10), outcome("t", "2", 1, {})};
  testing::expect_error([&] { compare_by_answer_length(a, b_other, a); }, {"t item 2", "no result for mixer B"});
  testing::expect_error([&] { compare_by_answer_length(a, b_short, a); }, {"mixer A has 2 problems, mixer B 1"});
  testing::expect_error([&] { compare_by_answer_length(twice, a, a); }, {"mixer A", "t item 1 appears twice"});
  testing::expect_error([&] { compare_by_answer_length(a, a, no_length); }, {"t item 2", "no answer length"});
}

TEST(EvalAnalysis, CountsCorrectAnswersLongerThanTheThreshold) {
  std::vector<ProblemOutcome> outcomes{outcome("aime24", "1", 0, {}), outcome("aime24", "2", 0, {})};
  outcomes[0].samples = {{3000, true}, {4000, true}, {4001, true}};
  outcomes[1].samples = {{5000, false}, {8000, true}};
  const LongAnswerCount count = count_long_answers(outcomes);
  EXPECT_EQ(count.threshold, 4000);
  EXPECT_EQ(count.samples, 5u);
  EXPECT_EQ(count.correct, 4u);
  EXPECT_EQ(count.longer, 3u);          // 4001, 5000, 8000: exactly 4,000 is not longer
  EXPECT_EQ(count.correct_longer, 2u);  // 4001 and 8000
  EXPECT_EQ(count_long_answers(outcomes, 100).correct_longer, 4u);
}

}  // namespace
}  // namespace bifocal::eval
