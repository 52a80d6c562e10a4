// The report's statistics beyond means (issue 6 "Analysis"): for every task, each mixer against
// the teacher by a paired bootstrap over the task's items; for generation tasks, the same split
// by answer length (strata from the teacher's per-problem median length, so both mixers are
// compared on the same problems) and the count of correct answers longer than a threshold.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_results.h"

namespace bifocal::eval {

struct ComparisonOptions {
  std::vector<double> length_edges = {4000};  // answer-length strata: short/long at 4,000 tokens
  double long_answer_threshold = 4000;        // "correct answers longer than" this many tokens
};

// Markdown sections (one per task) and the same numbers as JSON, from the results file's records.
struct Comparisons {
  std::string markdown;
  nlohmann::json json = nlohmann::json::object();
};

Comparisons compare_to_teacher(const std::vector<ResultRecord>& records, const std::vector<std::string>& mixers,
                               const std::map<std::string, std::string>& primary_metric,
                               const ComparisonOptions& options = {});

}  // namespace bifocal::eval
