// Likelihood multiple choice (issue 6), with lm-evaluation-harness's metrics: every choice is
// scored by the summed log-probability of its continuation (eval/loglikelihood.h);
//   acc       1 when the choice with the highest log-probability is the gold one,
//   acc_norm  the same after dividing each log-probability by the character length (Unicode
//             code points) of the choice's text — the answer as written, without the space
//             that joins it to the context.
// Ties go to the first choice (numpy's argmax). Also the generic user task `mc:FILE.jsonl`
// (one {"context", "choices", "gold"} object per line) and the factory of every multiple-choice
// task; the public datasets' loaders and prompt formats are in eval/mc_datasets.h.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_task.h"
#include "eval/loglikelihood.h"

namespace bifocal::eval {

// One question as scoring requests. Usually every choice shares one context and has its own
// continuation; WinoGrande's partial scoring is the reverse (one context per choice, one shared
// continuation). A list of one entry is shared by every choice.
struct MultipleChoiceQuestion {
  std::vector<std::string> contexts;
  std::vector<std::string> continuations;
  std::vector<std::string> choice_texts;  // one per choice: the text acc_norm divides by the length of
  int gold = 0;

  std::size_t choices() const { return choice_texts.size(); }
  const std::string& context(std::size_t choice) const;
  const std::string& continuation(std::size_t choice) const;
  // Throws Error naming `where` unless there are ≥ 2 choices, the lists fit them and gold is one.
  void validate(const std::string& where) const;

  // The EvalItem input form: {"context": s} or {"contexts": [...]}, {"continuation": s} or
  // {"continuations": [...]}, "choice_texts", "gold".
  nlohmann::json to_json() const;
  static MultipleChoiceQuestion from_json(const nlohmann::json& input, const std::string& where);
};

// The shape of most tasks: one shared context, each choice scored as `delimiter` + choice
// (lm-evaluation-harness's target delimiter, a space by default).
MultipleChoiceQuestion shared_context_question(std::string context, const std::vector<std::string>& choices, int gold,
                                               std::string_view delimiter = " ");

// Unicode code points of UTF-8 text (Python's len(), which acc_norm uses).
std::size_t character_length(std::string_view utf8);

struct ChoiceDecision {
  std::size_t prediction = 0;       // argmax of the log-probabilities
  std::size_t prediction_norm = 0;  // argmax of log-probability / character length
  double acc = 0;
  double acc_norm = 0;
};
// `logprobs` and `character_lengths` have one entry per choice; a zero length counts as 1.
ChoiceDecision decide_choice(std::span<const double> logprobs, std::span<const std::size_t> character_lengths,
                             int gold);

// Scores every choice on `model`: metrics acc and acc_norm; details hold the per-choice
// log-probabilities, token counts, is_greedy flags, both predictions and the gold index. A context
// shared by every choice runs once (score_continuations).
ItemResult score_question(const Model& model, const Tokenizer& tokenizer, const MultipleChoiceQuestion& question,
                          const LoglikelihoodOptions& options = {});

// One question of a task, with its stable id and report stratum (e.g. {"subject": "anatomy"}).
struct ChoiceItem {
  std::string id;
  MultipleChoiceQuestion question;
  nlohmann::json group = nlohmann::json::object();
};

// A task over questions loaded up front (so that missing or malformed data fails at make_task).
class MultipleChoiceTask : public Task {
 public:
  MultipleChoiceTask(std::string name, std::string primary_metric, std::vector<ChoiceItem> items);
  std::string name() const override { return name_; }
  std::string primary_metric() const override { return primary_metric_; }
  std::vector<EvalItem> items(const Tokenizer& tokenizer) const override;
  ItemResult score(const Model& model, const Tokenizer& tokenizer, const EvalItem& item) const override;

 private:
  std::string name_;
  std::string primary_metric_;
  std::vector<ChoiceItem> items_;
};

// The generic user format: one JSON object per line, {"context": str, "choices": [str, ...],
// "gold": int}; blank lines are skipped. Each choice is scored as `delimiter` + choice. Errors
// name the file and the line. Item ids are the 1-based line numbers.
std::vector<ChoiceItem> read_choice_jsonl(const std::filesystem::path& file, std::string_view delimiter = " ");

// The factory for `mmlu[:subjects=a,b][:shots=N]`, `hellaswag`, `piqa`, `arc_easy`,
// `arc_challenge`, `winogrande` (data under context.data_dir, eval/mc_datasets.h) and
// `mc:FILE.jsonl[,delimiter=space|none]`. Primary metric: acc_norm for hellaswag, piqa and arc,
// acc for mmlu, winogrande and mc.
std::unique_ptr<Task> make_multiple_choice_task(TaskSpec spec, const TaskContext& context);

}  // namespace bifocal::eval
