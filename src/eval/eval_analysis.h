// The analysis behind the report's claims (issue 6, DESIGN.md): how much of the teacher a
// student recovers per task, and — for generation tasks, where a fixed memory budget matters
// most on long answers — scores by answer length, with a paired bootstrap of the difference
// between two mixers overall and per length stratum, and counts of correct long answers (the
// Bifocal paper's "66 against 26 correct answers longer than 4,000 tokens").
//
// Inputs are plain per-problem records, one list per mixer, that the runner fills from the
// results file (problem_outcome() reads one ItemResult); nothing here runs a model.
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "eval/bootstrap.h"
#include "eval/eval_task.h"

namespace bifocal::eval {

// One sample of a generation problem: its length in tokens and whether its answer was right.
struct SampleOutcome {
  double length = 0;
  bool correct = false;
};

// One mixer's result on one problem; (task, id) identifies the problem across mixers.
struct ProblemOutcome {
  std::string task;
  std::string id;
  double score = 0;                     // the task's primary metric on this problem
  std::optional<double> answer_length;  // group "answer_length": median tokens over the samples
  std::vector<SampleOutcome> samples;   // details "samples" (length, correct); empty for other tasks
};

// Reads the primary metric, group "answer_length" (when present) and details "samples"
// (long_generation.h's format, when present). Throws naming the task and item when the
// primary metric is missing.
ProblemOutcome problem_outcome(const std::string& task, const std::string& id, const ItemResult& result,
                               const std::string& primary_metric);

// ---- Recovery rate --------------------------------------------------------------------------

// The mean score of each task over its problems.
std::map<std::string, double> mean_score_by_task(std::span<const ProblemOutcome> outcomes);

struct TaskRecovery {
  std::string task;
  double teacher = 0;
  double student = 0;
  double recovery = std::numeric_limits<double>::quiet_NaN();  // student / teacher; NaN if teacher = 0
};

struct RecoverySummary {
  std::vector<TaskRecovery> tasks;  // in task-name order
  double mean_recovery = std::numeric_limits<double>::quiet_NaN();  // over the tasks with a recovery
  std::size_t tasks_averaged = 0;
};

// Recovery = student / teacher per task (both task → mean score), and its unweighted mean over
// tasks; a task the teacher scores 0 on has no recovery and is left out of the mean. Every task
// of the teacher must have a student score (an error names the first that has none).
RecoverySummary recovery_rates(const std::map<std::string, double>& teacher, const std::map<std::string, double>& student);

// ---- Answer-length strata -------------------------------------------------------------------

// Problems with lower <= answer length < upper.
struct LengthStratum {
  std::string label;
  double lower = 0;
  double upper = std::numeric_limits<double>::infinity();
  bool contains(double length) const { return length >= lower && length < upper; }
};

// The strata cut at `edges` (increasing, > 0): one edge E gives "short (< E)" and
// "long (>= E)"; more give "< e1", "e1-e2", …, ">= ek". The default is the short/long split
// at 4,000 tokens.
std::vector<LengthStratum> length_strata(const std::vector<double>& edges = {4000});

struct StratumScore {
  LengthStratum stratum;
  std::size_t problems = 0;
  double score = std::numeric_limits<double>::quiet_NaN();  // mean over the stratum's problems
};

// One mixer's mean score per stratum of its own per-problem answer lengths. Every problem must
// have an answer length.
std::vector<StratumScore> score_by_answer_length(std::span<const ProblemOutcome> outcomes,
                                                 const std::vector<double>& edges = {4000});

struct StratumComparison {
  LengthStratum stratum;
  std::size_t problems = 0;
  double score_a = std::numeric_limits<double>::quiet_NaN();
  double score_b = std::numeric_limits<double>::quiet_NaN();
  PairedBootstrapResult difference;  // a − b over the stratum's problems; all NaN when it has none
};

struct LengthStratifiedComparison {
  StratumComparison overall;  // every problem (pooled over tasks), label "all"
  std::vector<StratumComparison> strata;
};

// Mixers a and b on the same problems (pooled over tasks), split into strata by the answer
// length that `reference` gives each problem — pass the teacher's outcomes so both mixers are
// compared on the same problems of a stratum (a mixer's own lengths would put a problem into
// different strata for a and b). Errors name the first problem that a, b or reference lacks,
// or that appears twice, or has no answer length in reference.
LengthStratifiedComparison compare_by_answer_length(std::span<const ProblemOutcome> a,
                                                    std::span<const ProblemOutcome> b,
                                                    std::span<const ProblemOutcome> reference,
                                                    const std::vector<double>& edges = {4000},
                                                    const PairedBootstrapOptions& bootstrap = {});

// ---- Long correct answers -------------------------------------------------------------------

struct LongAnswerCount {
  double threshold = 0;
  std::size_t samples = 0;         // every sample
  std::size_t correct = 0;         // correct samples
  std::size_t longer = 0;          // samples longer than the threshold
  std::size_t correct_longer = 0;  // correct samples longer than the threshold
};

// Counts samples (each sample its own answer) strictly longer than `threshold` tokens.
LongAnswerCount count_long_answers(std::span<const ProblemOutcome> outcomes, double threshold = 4000);

}  // namespace bifocal::eval
