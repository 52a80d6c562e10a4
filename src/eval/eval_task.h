// The evaluation harness's one abstraction (issue 6, DESIGN.md "eval"): a task turns its data
// into items — identical for every mixer, so mixers are compared on the same prompts and the
// same sampling seeds — and scores one item on one model. `bifocal eval` (src/eval/eval_runner)
// runs every (mixer, task, item), writes each result as one JSONL line (resumable), and
// aggregates them into the report (recovery rates, tables by context or answer length, paired
// bootstrap).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bifocal/sampler.h"

namespace bifocal {

class Model;
class Tokenizer;

namespace eval {

// Everything a task may need besides its own options, fixed for a whole run.
struct TaskContext {
  std::filesystem::path data_dir;  // --data-dir: the public datasets (../shared/data layout)
  std::uint64_t seed = 1234;       // item construction (haystacks, depths, shuffles) and sampling
  int samples = 1;                 // k samples per generation problem (pass@1 = mean over them)
  SamplingParams sampling{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .seed = 0};
  int max_new_tokens = 1024;       // generation budget of one answer
};

// One item: its id is stable across runs (the resume key); `input` holds what scoring needs
// (prompt text or token ids, choices, gold answer, context length, needle depth …). Items are
// built once per run, from the data and the seed only, never from a model's output.
struct EvalItem {
  std::string id;
  nlohmann::json input;
};

// The score of one item on one model:
//   metrics  name → value in [0, 1] (acc, acc_norm, score, pass@1 …), averaged over items;
//   group    the stratum the report tabulates by, e.g. {"context": 4096} or {"answer_length": 812};
//   details  anything worth keeping per sample (generated text, extracted answer, log-likelihoods).
struct ItemResult {
  std::map<std::string, double> metrics;
  nlohmann::json group = nlohmann::json::object();
  nlohmann::json details = nlohmann::json::object();
};

class Task {
 public:
  virtual ~Task() = default;
  // The canonical name with its options, e.g. "niah_single_2:lengths=512,1024"; results files
  // and report tables are keyed by it.
  virtual std::string name() const = 0;
  // The metric the recovery rate is computed on (the first column of the report).
  virtual std::string primary_metric() const = 0;
  // All items, deterministic given the task's options, the context and the tokenizer (which the
  // long-context tasks use to fill prompts to an exact token length).
  virtual std::vector<EvalItem> items(const Tokenizer& tokenizer) const = 0;
  virtual ItemResult score(const Model& model, const Tokenizer& tokenizer, const EvalItem& item) const = 0;
};

// "name" or "name:key=value,key=value" → the task; unknown names, unknown options, bad values
// and missing data files are errors that say which.
std::unique_ptr<Task> make_task(const std::string& spec, const TaskContext& context);

// The task names make_task knows, as one line for help texts and error messages.
inline constexpr const char* kKnownTaskNames =
    "mmlu, hellaswag, piqa, arc_easy, arc_challenge, winogrande, mc:FILE.jsonl, niah_single_1..3, testbed_needle, "
    "babilong_qa1..5, gsm8k, aime24, aime25, hmmt_feb25, testbed_arithmetic, perplexity:FILE";

// The parsed "name:key=value,..." form shared by every task's option parsing.
struct TaskSpec {
  std::string name;
  std::map<std::string, std::string> options;
  static TaskSpec parse(const std::string& spec);
  // Takes an option out (so that leftovers can be reported as unknown).
  std::optional<std::string> take(const std::string& key);
  // Throws naming the task and the first option nobody took.
  void expect_no_more_options() const;
};

}  // namespace eval
}  // namespace bifocal
