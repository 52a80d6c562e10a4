#include "eval/eval_analysis.h"

#include <cmath>
#include <utility>

#include "bifocal/error.h"

namespace bifocal::eval {

namespace {

using ProblemKey = std::pair<std::string, std::string>;  // (task, id)

std::string describe(const ProblemKey& key) { return key.first + " item " + key.second; }

std::map<ProblemKey, const ProblemOutcome*> index_by_problem(std::span<const ProblemOutcome> outcomes, const std::string& which) {
  std::map<ProblemKey, const ProblemOutcome*> index;
  for (const auto& outcome : outcomes)
    if (!index.emplace(ProblemKey{outcome.task, outcome.id}, &outcome).second)
      fail(which, describe({outcome.task, outcome.id}) + " appears twice");
  return index;
}

std::string format_edge(double edge) {
  // Edges are token counts: show them as whole numbers when they are.
  if (edge == std::floor(edge) && std::abs(edge) < 1e15) return std::to_string(static_cast<long long>(edge));
  return std::to_string(edge);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (const double v : values) sum += v;
  return sum / double(values.size());
}

StratumComparison compare_on(const LengthStratum& stratum, const std::vector<double>& a, const std::vector<double>& b,
                             const PairedBootstrapOptions& bootstrap) {
  StratumComparison comparison;
  comparison.stratum = stratum;
  comparison.problems = a.size();
  comparison.score_a = mean(a);
  comparison.score_b = mean(b);
  if (!a.empty()) comparison.difference = paired_bootstrap(a, b, bootstrap);
  return comparison;
}

}  // namespace

ProblemOutcome problem_outcome(const std::string& task, const std::string& id, const ItemResult& result,
                               const std::string& primary_metric) {
  ProblemOutcome outcome;
  outcome.task = task;
  outcome.id = id;
  const auto metric = result.metrics.find(primary_metric);
  if (metric == result.metrics.end()) fail(describe({task, id}), "no '" + primary_metric + "' metric");
  outcome.score = metric->second;
  if (const auto length = result.group.find("answer_length"); length != result.group.end() && length->is_number())
    outcome.answer_length = length->get<double>();
  if (const auto samples = result.details.find("samples"); samples != result.details.end() && samples->is_array())
    for (const auto& sample : *samples)
      if (sample.contains("length") && sample.contains("correct"))
        outcome.samples.push_back({sample.at("length").get<double>(), sample.at("correct").get<bool>()});
  return outcome;
}

std::map<std::string, double> mean_score_by_task(std::span<const ProblemOutcome> outcomes) {
  std::map<std::string, std::pair<double, std::size_t>> sums;
  for (const auto& outcome : outcomes) {
    auto& [sum, count] = sums[outcome.task];
    sum += outcome.score;
    ++count;
  }
  std::map<std::string, double> means;
  for (const auto& [task, sum_count] : sums) means[task] = sum_count.first / double(sum_count.second);
  return means;
}

RecoverySummary recovery_rates(const std::map<std::string, double>& teacher, const std::map<std::string, double>& student) {
  RecoverySummary summary;
  double total = 0;
  for (const auto& [task, teacher_score] : teacher) {
    const auto found = student.find(task);
    if (found == student.end()) fail("recovery rate", "task " + task + " has no student results");
    TaskRecovery recovery;
    recovery.task = task;
    recovery.teacher = teacher_score;
    recovery.student = found->second;
    if (teacher_score != 0) {
      recovery.recovery = found->second / teacher_score;
      total += recovery.recovery;
      ++summary.tasks_averaged;
    }
    summary.tasks.push_back(recovery);
  }
  if (summary.tasks_averaged > 0) summary.mean_recovery = total / double(summary.tasks_averaged);
  return summary;
}

std::vector<LengthStratum> length_strata(const std::vector<double>& edges) {
  if (edges.empty()) fail("answer length buckets", "give at least one edge (e.g. 4000)");
  for (std::size_t i = 0; i < edges.size(); ++i) {
    if (!(edges[i] > 0)) fail("answer length buckets", "edges must be positive token counts");
    if (i > 0 && !(edges[i] > edges[i - 1]))
      fail("answer length buckets", "edges must increase, but " + format_edge(edges[i]) + " follows " + format_edge(edges[i - 1]));
  }
  const double infinity = std::numeric_limits<double>::infinity();
  if (edges.size() == 1) {
    const std::string edge = format_edge(edges[0]);
    return {{"short (< " + edge + ")", 0, edges[0]}, {"long (>= " + edge + ")", edges[0], infinity}};
  }
  std::vector<LengthStratum> strata{{"< " + format_edge(edges[0]), 0, edges[0]}};
  for (std::size_t i = 1; i < edges.size(); ++i)
    strata.push_back({format_edge(edges[i - 1]) + "-" + format_edge(edges[i]), edges[i - 1], edges[i]});
  strata.push_back({">= " + format_edge(edges.back()), edges.back(), infinity});
  return strata;
}

std::vector<StratumScore> score_by_answer_length(std::span<const ProblemOutcome> outcomes, const std::vector<double>& edges) {
  const auto strata = length_strata(edges);
  std::vector<std::vector<double>> scores(strata.size());
  for (const auto& outcome : outcomes) {
    if (!outcome.answer_length) fail("answer length strata", describe({outcome.task, outcome.id}) + " has no answer length");
    for (std::size_t s = 0; s < strata.size(); ++s)
      if (strata[s].contains(*outcome.answer_length)) scores[s].push_back(outcome.score);
  }
  std::vector<StratumScore> result;
  for (std::size_t s = 0; s < strata.size(); ++s) result.push_back({strata[s], scores[s].size(), mean(scores[s])});
  return result;
}

LengthStratifiedComparison compare_by_answer_length(std::span<const ProblemOutcome> a, std::span<const ProblemOutcome> b,
                                                    std::span<const ProblemOutcome> reference,
                                                    const std::vector<double>& edges,
                                                    const PairedBootstrapOptions& bootstrap) {
  const auto strata = length_strata(edges);
  index_by_problem(a, "mixer A");
  const auto b_index = index_by_problem(b, "mixer B");
  const auto reference_index = index_by_problem(reference, "the length reference");
  if (b.size() != a.size())
    fail("paired comparison", "mixer A has " + std::to_string(a.size()) + " problems, mixer B " + std::to_string(b.size()));

  std::vector<double> all_a, all_b;
  std::vector<std::vector<double>> stratum_a(strata.size()), stratum_b(strata.size());
  for (const auto& outcome : a) {
    const ProblemKey key{outcome.task, outcome.id};
    const auto in_b = b_index.find(key);
    if (in_b == b_index.end()) fail("paired comparison", describe(key) + " has no result for mixer B");
    const auto in_reference = reference_index.find(key);
    if (in_reference == reference_index.end() || !in_reference->second->answer_length)
      fail("paired comparison", describe(key) + " has no answer length in the length reference");
    const double length = *in_reference->second->answer_length;
    all_a.push_back(outcome.score);
    all_b.push_back(in_b->second->score);
    for (std::size_t s = 0; s < strata.size(); ++s)
      if (strata[s].contains(length)) {
        stratum_a[s].push_back(outcome.score);
        stratum_b[s].push_back(in_b->second->score);
      }
  }
  LengthStratifiedComparison comparison;
  LengthStratum everything;
  everything.label = "all";
  comparison.overall = compare_on(everything, all_a, all_b, bootstrap);
  for (std::size_t s = 0; s < strata.size(); ++s)
    comparison.strata.push_back(compare_on(strata[s], stratum_a[s], stratum_b[s], bootstrap));
  return comparison;
}

LongAnswerCount count_long_answers(std::span<const ProblemOutcome> outcomes, double threshold) {
  LongAnswerCount count;
  count.threshold = threshold;
  for (const auto& outcome : outcomes)
    for (const auto& sample : outcome.samples) {
      ++count.samples;
      count.correct += sample.correct;
      count.longer += sample.length > threshold;
      count.correct_longer += sample.correct && sample.length > threshold;
    }
  return count;
}

}  // namespace bifocal::eval
