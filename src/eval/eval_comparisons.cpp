#include "eval/eval_comparisons.h"

#include <cmath>

#include <fmt/format.h>

#include "eval/bootstrap.h"
#include "eval/eval_analysis.h"

namespace bifocal::eval {

namespace {

std::string cell(double value) { return std::isfinite(value) ? fmt::format("{:+.3f}", value) : "—"; }

std::string interval(const PairedBootstrapResult& r) {
  return std::isfinite(r.lower) ? fmt::format("[{:+.3f}, {:+.3f}]", r.lower, r.upper) : "—";
}

nlohmann::json bootstrap_json(const PairedBootstrapResult& r) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"problems", r.problems}, {"mean_difference", number(r.mean_difference)}, {"lower", number(r.lower)},
          {"upper", number(r.upper)}, {"fraction_at_most_zero", number(r.fraction_at_most_zero)}};
}

}  // namespace

Comparisons compare_to_teacher(const std::vector<ResultRecord>& records, const std::vector<std::string>& mixers,
                               const std::map<std::string, std::string>& primary_metric,
                               const ComparisonOptions& options) {
  Comparisons out;
  if (mixers.size() < 2) return out;
  for (const auto& [task, primary] : primary_metric) {
    // Outcomes per mixer, restricted to the items every mixer has (a partial run compares fairly).
    std::map<std::string, std::map<std::string, ProblemOutcome>> by_mixer;  // mixer → id → outcome
    for (const auto& r : records)
      if (r.task == task) by_mixer[r.mixer][r.id] = problem_outcome(task, r.id, r.result, primary);
    std::vector<std::string> common;
    for (const auto& [id, outcome] : by_mixer[mixers[0]]) {
      bool everywhere = true;
      for (const auto& mixer : mixers) everywhere = everywhere && by_mixer[mixer].contains(id);
      if (everywhere) common.push_back(id);
    }
    if (common.empty()) continue;
    auto outcomes = [&](const std::string& mixer) {
      std::vector<ProblemOutcome> v;
      for (const auto& id : common) v.push_back(by_mixer[mixer][id]);
      return v;
    };
    const auto teacher = outcomes(mixers[0]);
    bool with_lengths = true;
    for (const auto& o : teacher) with_lengths = with_lengths && o.answer_length.has_value();

    out.markdown += fmt::format("\n### {}: each mixer − teacher `{}` ({}, paired bootstrap over {} items, "
                                "20,000 resamples, 95% interval)\n\n",
                                task, mixers[0], primary, common.size());
    out.markdown += with_lengths ? "| mixer | stratum | items | mixer | teacher | difference | interval | P(≤ 0) |\n"
                                   "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |\n"
                                 : "| mixer | items | difference | interval | P(≤ 0) |\n| --- | ---: | ---: | --- | ---: |\n";
    nlohmann::json task_json = nlohmann::json::object();
    for (std::size_t m = 1; m < mixers.size(); ++m) {
      const auto student = outcomes(mixers[m]);
      if (!with_lengths) {
        std::vector<double> a, b;
        for (std::size_t i = 0; i < common.size(); ++i) a.push_back(student[i].score), b.push_back(teacher[i].score);
        const auto r = paired_bootstrap(a, b);
        out.markdown += fmt::format("| `{}` | {} | {} | {} | {:.3f} |\n", mixers[m], r.problems, cell(r.mean_difference),
                                    interval(r), r.fraction_at_most_zero);
        task_json[mixers[m]] = {{"overall", bootstrap_json(r)}};
        continue;
      }
      const auto comparison = compare_by_answer_length(student, teacher, teacher, options.length_edges);
      nlohmann::json strata = nlohmann::json::array();
      std::vector<const StratumComparison*> rows = {&comparison.overall};
      for (const auto& s : comparison.strata) rows.push_back(&s);
      for (const StratumComparison* s : rows) {
        out.markdown += fmt::format("| `{}` | {} | {} | {:.3f} | {:.3f} | {} | {} | {:.3f} |\n", mixers[m], s->stratum.label,
                                    s->problems, s->score_a, s->score_b, cell(s->difference.mean_difference),
                                    interval(s->difference), s->difference.fraction_at_most_zero);
        strata.push_back({{"stratum", s->stratum.label}, {"problems", s->problems}, {"mixer", s->score_a},
                          {"teacher", s->score_b}, {"difference", bootstrap_json(s->difference)}});
      }
      task_json[mixers[m]] = {{"strata", strata}};
    }
    if (with_lengths) {
      out.markdown += fmt::format("\nCorrect answers longer than {:.0f} tokens (each sample counted):\n\n"
                                  "| mixer | samples | correct | longer | correct and longer |\n"
                                  "| --- | ---: | ---: | ---: | ---: |\n",
                                  options.long_answer_threshold);
      for (const auto& mixer : mixers) {
        const auto count = count_long_answers(outcomes(mixer), options.long_answer_threshold);
        out.markdown += fmt::format("| `{}` | {} | {} | {} | {} |\n", mixer, count.samples, count.correct, count.longer,
                                    count.correct_longer);
        task_json["long_answers"][mixer] = {{"threshold", count.threshold}, {"samples", count.samples},
                                            {"correct", count.correct}, {"longer", count.longer},
                                            {"correct_longer", count.correct_longer}};
      }
    }
    out.json[task] = task_json;
  }
  return out;
}

}  // namespace bifocal::eval
