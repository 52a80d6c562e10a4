// The report of an evaluation: from the results file, one table per task (teacher row first,
// one row per mixer, the mean of every metric over the items, and the recovery rate = mixer /
// teacher on the task's primary metric), a table by stratum for tasks whose items carry a group
// (context length, answer length), the mean recovery over tasks, and SVG plots of the primary
// metric against each numeric group.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_results.h"

namespace bifocal::eval {

struct MixerScores {
  std::string mixer;
  std::size_t items = 0;
  std::map<std::string, double> mean;  // metric → mean over items
  // group key → group value (as text) → (sum of the primary metric, items)
  std::map<std::string, std::map<std::string, std::pair<double, std::size_t>>> by_group;
};

struct TaskScores {
  std::string task;
  std::string primary_metric;
  std::vector<MixerScores> mixers;  // in the order given; the first is the teacher
  // Recovery of mixers[i] on the primary metric (teacher = 1); NaN when the teacher scored 0.
  double recovery(std::size_t i) const;
};

struct EvalReport {
  std::string command_line;
  std::string model;
  std::vector<std::string> mixers;
  std::vector<TaskScores> tasks;
  // Mean over tasks of each mixer's recovery (NaN tasks skipped).
  std::vector<double> mean_recovery() const;
};

// Aggregates `records` for the given mixers (in order, teacher first) and tasks. A numeric
// "answer_length" group is binned into the strata cut at `answer_length_edges` (eval_analysis.h
// length_strata) — every problem has its own length, so unbinned it would make one column per
// problem; the bin's group value is its lower bound in tokens ("0", "256", …), which keeps the
// columns and the plot's x axis numeric.
EvalReport aggregate(const std::vector<ResultRecord>& records, const std::vector<std::string>& mixers,
                     const std::map<std::string, std::string>& primary_metric,
                     const std::vector<double>& answer_length_edges = {4000});

std::string report_markdown(const EvalReport& report);
nlohmann::json report_json(const EvalReport& report);
// One SVG per (task, numeric group key): file name → SVG text (e.g. "niah_single_1_context.svg").
std::vector<std::pair<std::string, std::string>> report_plots(const EvalReport& report);

}  // namespace bifocal::eval
