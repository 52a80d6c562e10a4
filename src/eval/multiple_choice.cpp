#include "eval/multiple_choice.h"

#include <algorithm>

#include "bifocal/error.h"
#include "bifocal/model.h"
#include "core/whole_number.h"
#include "eval/jsonl_records.h"
#include "eval/mc_datasets.h"
#include "io/json_file.h"

namespace bifocal::eval {

const std::string& MultipleChoiceQuestion::context(std::size_t choice) const {
  return contexts.size() == 1 ? contexts.front() : contexts.at(choice);
}

const std::string& MultipleChoiceQuestion::continuation(std::size_t choice) const {
  return continuations.size() == 1 ? continuations.front() : continuations.at(choice);
}

void MultipleChoiceQuestion::validate(const std::string& where) const {
  const std::size_t n = choices();
  if (n < 2) fail(where, "a question needs at least 2 choices, got " + std::to_string(n));
  if (contexts.size() != 1 && contexts.size() != n)
    fail(where, std::to_string(contexts.size()) + " contexts for " + std::to_string(n) + " choices");
  if (continuations.size() != 1 && continuations.size() != n)
    fail(where, std::to_string(continuations.size()) + " continuations for " + std::to_string(n) + " choices");
  if (gold < 0 || std::size_t(gold) >= n)
    fail(where, "gold " + std::to_string(gold) + " is not a choice index (0 to " + std::to_string(n - 1) + ")");
}

nlohmann::json MultipleChoiceQuestion::to_json() const {
  nlohmann::json input;
  if (contexts.size() == 1) input["context"] = contexts.front();
  else input["contexts"] = contexts;
  if (continuations.size() == 1) input["continuation"] = continuations.front();
  else input["continuations"] = continuations;
  input["choice_texts"] = choice_texts;
  input["gold"] = gold;
  return input;
}

MultipleChoiceQuestion MultipleChoiceQuestion::from_json(const nlohmann::json& input, const std::string& where) {
  auto strings = [&](const char* list_key, const char* single_key) {
    if (input.contains(single_key)) return std::vector<std::string>{json_get<std::string>(input, single_key, where)};
    return json_get<nlohmann::json>(input, list_key, where).get<std::vector<std::string>>();
  };
  MultipleChoiceQuestion question;
  try {
    question.contexts = strings("contexts", "context");
    question.continuations = strings("continuations", "continuation");
    question.choice_texts = json_get<nlohmann::json>(input, "choice_texts", where).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    fail(where, std::string("malformed multiple-choice item (") + e.what() + ")");
  }
  question.gold = json_get<int>(input, "gold", where);
  question.validate(where);
  return question;
}

MultipleChoiceQuestion shared_context_question(std::string context, const std::vector<std::string>& choices, int gold,
                                               std::string_view delimiter) {
  MultipleChoiceQuestion question;
  question.contexts = {std::move(context)};
  for (const auto& choice : choices) question.continuations.push_back(std::string(delimiter) + choice);
  question.choice_texts = choices;
  question.gold = gold;
  return question;
}

std::size_t character_length(std::string_view utf8) {
  std::size_t count = 0;
  // Every code point has exactly one byte that is not a continuation byte (10xxxxxx).
  for (const char c : utf8)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  return count;
}

ChoiceDecision decide_choice(std::span<const double> logprobs, std::span<const std::size_t> character_lengths,
                             int gold) {
  if (logprobs.empty() || logprobs.size() != character_lengths.size())
    fail("multiple choice", "need one log-probability and one length per choice");
  ChoiceDecision decision;
  double best = logprobs[0];
  double best_norm = logprobs[0] / double(std::max<std::size_t>(character_lengths[0], 1));
  for (std::size_t i = 1; i < logprobs.size(); ++i) {
    const double norm = logprobs[i] / double(std::max<std::size_t>(character_lengths[i], 1));
    if (logprobs[i] > best) {
      best = logprobs[i];
      decision.prediction = i;
    }
    if (norm > best_norm) {
      best_norm = norm;
      decision.prediction_norm = i;
    }
  }
  decision.acc = decision.prediction == std::size_t(gold) ? 1.0 : 0.0;
  decision.acc_norm = decision.prediction_norm == std::size_t(gold) ? 1.0 : 0.0;
  return decision;
}

namespace {

// Every choice's score. A shared context (ARC, MMLU, HellaSwag; not Winogrande, whose contexts
// differ) whose tokens are the same for every choice — lm-evaluation-harness's split keeps the
// context's own encoding — runs once (score_continuations); otherwise each choice from its own
// fresh session.
std::vector<ContinuationScore> choice_scores(const Model& model, const Tokenizer& tokenizer,
                                             const MultipleChoiceQuestion& question,
                                             const LoglikelihoodOptions& options) {
  const int max_length = options.max_length.value_or(model.config().max_position_embeddings);
  std::vector<ContextContinuationTokens> requests;
  for (std::size_t i = 0; i < question.choices(); ++i)
    requests.push_back(split_context_continuation(tokenizer, question.context(i), question.continuation(i),
                                                  options.add_special_tokens));
  const bool shared = std::all_of(requests.begin(), requests.end(),
                                  [&](const auto& r) { return r.context == requests.front().context; });
  if (shared) {
    std::vector<std::vector<std::int32_t>> continuations;
    for (auto& r : requests) continuations.push_back(std::move(r.continuation));
    return score_continuations(model, requests.front().context, continuations, max_length);
  }
  std::vector<ContinuationScore> scores;
  for (const auto& r : requests) scores.push_back(score_continuation(model, r.context, r.continuation, max_length));
  return scores;
}

}  // namespace

ItemResult score_question(const Model& model, const Tokenizer& tokenizer, const MultipleChoiceQuestion& question,
                          const LoglikelihoodOptions& options) {
  question.validate("multiple choice");
  const std::vector<ContinuationScore> scores = choice_scores(model, tokenizer, question, options);
  std::vector<double> logprobs;
  std::vector<std::size_t> lengths;
  nlohmann::json tokens = nlohmann::json::array(), greedy = nlohmann::json::array();
  bool truncated = false;
  for (std::size_t i = 0; i < question.choices(); ++i) {
    const ContinuationScore& score = scores[i];
    logprobs.push_back(score.logprob);
    lengths.push_back(character_length(question.choice_texts[i]));
    tokens.push_back(score.continuation_tokens);
    greedy.push_back(score.is_greedy);
    truncated = truncated || score.truncated;
  }
  const ChoiceDecision decision = decide_choice(logprobs, lengths, question.gold);
  ItemResult result;
  result.metrics = {{"acc", decision.acc}, {"acc_norm", decision.acc_norm}};
  result.details = {{"logprobs", logprobs},
                    {"continuation_tokens", tokens},
                    {"is_greedy", greedy},
                    {"prediction", decision.prediction},
                    {"prediction_norm", decision.prediction_norm},
                    {"gold", question.gold}};
  if (truncated) result.details["truncated"] = true;
  return result;
}

MultipleChoiceTask::MultipleChoiceTask(std::string name, std::string primary_metric, std::vector<ChoiceItem> items)
    : name_(std::move(name)), primary_metric_(std::move(primary_metric)), items_(std::move(items)) {}

std::vector<EvalItem> MultipleChoiceTask::items(const Tokenizer&) const {
  std::vector<EvalItem> items;
  items.reserve(items_.size());
  for (const auto& item : items_) {
    nlohmann::json input = item.question.to_json();
    if (!item.group.empty()) input["group"] = item.group;
    items.push_back({.id = item.id, .input = std::move(input)});
  }
  return items;
}

ItemResult MultipleChoiceTask::score(const Model& model, const Tokenizer& tokenizer, const EvalItem& item) const {
  const std::string where = name_ + " item " + item.id;
  ItemResult result = score_question(model, tokenizer, MultipleChoiceQuestion::from_json(item.input, where));
  if (item.input.contains("group")) result.group = item.input.at("group");
  return result;
}

std::vector<ChoiceItem> read_choice_jsonl(const std::filesystem::path& file, std::string_view delimiter) {
  std::vector<ChoiceItem> items;
  for (const JsonlRecord& record : read_jsonl_records(file)) {
    const auto context = json_get<std::string>(record.value, "context", record.where);
    const auto choices = json_get<nlohmann::json>(record.value, "choices", record.where);
    const auto is_string = [](const nlohmann::json& choice) { return choice.is_string(); };
    if (!choices.is_array() || !std::ranges::all_of(choices, is_string))
      fail(record.where, "'choices' must be an array of strings");
    const auto texts = choices.get<std::vector<std::string>>();
    const int gold = json_get<int>(record.value, "gold", record.where);
    ChoiceItem item{.id = std::to_string(record.line),
                    .question = shared_context_question(context, texts, gold, delimiter)};
    item.question.validate(record.where);
    items.push_back(std::move(item));
  }
  if (items.empty()) fail(file.string(), "no questions (expected one JSON object per line)");
  return items;
}

namespace {

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    if (end > begin) parts.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

int parse_shots(const std::string& value) {
  const auto shots = parse_whole_int(value);
  if (shots && *shots <= 5) return *shots;
  fail("--task mmlu", "shots must be an integer from 0 to 5 (MMLU's dev split has five examples), got '" + value + "'");
}

}  // namespace

std::unique_ptr<Task> make_multiple_choice_task(TaskSpec spec, const TaskContext& context) {
  const std::string& task = spec.name;
  std::unique_ptr<Task> made;
  if (task == "mmlu") {
    std::string name = "mmlu";
    std::vector<std::string> subjects;
    int shots = 5;
    if (const auto list = spec.take("subjects")) {
      subjects = split_list(*list);
      if (subjects.empty()) fail("--task mmlu", "subjects= needs at least one subject");
      name += ":subjects=" + *list;
    }
    if (const auto value = spec.take("shots")) {
      shots = parse_shots(*value);
      name += std::string(name == "mmlu" ? ":" : ",") + "shots=" + *value;
    }
    spec.expect_no_more_options();
    made = std::make_unique<MultipleChoiceTask>(name, "acc", load_mmlu(context.data_dir, subjects, shots));
  } else if (task == "hellaswag") {
    spec.expect_no_more_options();
    made = std::make_unique<MultipleChoiceTask>(task, "acc_norm", load_hellaswag(context.data_dir));
  } else if (task == "piqa") {
    spec.expect_no_more_options();
    made = std::make_unique<MultipleChoiceTask>(task, "acc_norm", load_piqa(context.data_dir));
  } else if (task == "arc_easy" || task == "arc_challenge") {
    spec.expect_no_more_options();
    made = std::make_unique<MultipleChoiceTask>(task, "acc_norm", load_arc(context.data_dir, task == "arc_challenge"));
  } else if (task == "winogrande") {
    spec.expect_no_more_options();
    made = std::make_unique<MultipleChoiceTask>(task, "acc", load_winogrande(context.data_dir));
  } else if (task == "mc") {
    const auto file = spec.take("file");
    if (!file) fail("--task mc", "needs a file: mc:FILE.jsonl");
    std::string name = "mc:" + *file;
    std::string delimiter = " ";
    if (const auto value = spec.take("delimiter")) {
      if (*value == "none") delimiter.clear();
      else if (*value != "space") fail("--task mc", "delimiter must be 'space' or 'none', got '" + *value + "'");
      name += ",delimiter=" + *value;
    }
    spec.expect_no_more_options();
    made = std::make_unique<MultipleChoiceTask>(name, "acc", read_choice_jsonl(*file, delimiter));
  } else {
    fail("--task " + task, "not a multiple-choice task (mmlu, hellaswag, piqa, arc_easy, arc_challenge, winogrande, mc)");
  }
  return made;
}

}  // namespace bifocal::eval
