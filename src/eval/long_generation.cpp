#include "eval/long_generation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "bifocal/error.h"
#include "bifocal/generate.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "core/whole_number.h"
#include "eval/answer_extraction.h"
#include "eval/jsonl_records.h"
#include "eval/seeded_random.h"
#include "eval/testbed_arithmetic.h"

namespace bifocal::eval {

namespace {

std::string string_field(const nlohmann::json& record, const char* key, const std::string& where) {
  const auto it = record.find(key);
  if (it == record.end()) fail(where, std::string("no \"") + key + "\" field");
  if (!it->is_string()) fail(where, std::string("\"") + key + "\" is not a string");
  return it->get<std::string>();
}

int positive_option(TaskSpec& spec, const std::string& key, int fallback) {
  const auto value = spec.take(key);
  if (!value) return fallback;
  const auto parsed = parse_whole_int(*value);
  if (!parsed || *parsed < 1) fail("--task " + spec.name, key + "=" + *value + " is not a whole number >= 1");
  return *parsed;
}

// One long-generation task: its problems, stop strings and sampling set up by the factory.
class LongGenerationTask final : public Task {
 public:
  struct Setup {
    std::string name;  // canonical, with options
    std::vector<GenerationProblem> problems;
    std::vector<std::string> stop_strings;
    int samples = 1;
    int max_tokens = 1024;
    SamplingParams sampling;
    std::uint64_t seed = 0;
  };
  explicit LongGenerationTask(Setup setup) : setup_(std::move(setup)) {}

  std::string name() const override { return setup_.name; }
  std::string primary_metric() const override { return "pass@1"; }

  std::vector<EvalItem> items(const Tokenizer&) const override {
    std::vector<EvalItem> items;
    for (const auto& problem : setup_.problems)
      items.push_back({.id = problem.id, .input = {{"prompt", problem.prompt}, {"answer", problem.answer}}});
    return items;
  }

  ItemResult score(const Model& model, const Tokenizer& tokenizer, const EvalItem& item) const override {
    const auto prompt = tokenizer.encode(item.input.at("prompt").get<std::string>(), /*add_special_tokens=*/true);
    if (prompt.empty()) fail(item.id, "empty prompt");
    // The prompt is prefilled once; each sample continues a copy of that session (the samples
    // differ only in their seeds, so this equals k separate generate() calls).
    Session prefilled = model.new_session(generation_capacity(prompt.size(), setup_.max_tokens));
    const std::span<const float> last = model.prefill(prefilled, prompt);
    const std::vector<float> prompt_logits(last.begin(), last.end());  // the session's buffer is reused
    std::vector<GeneratedSample> samples;
    for (int sample = 0; sample < setup_.samples; ++sample) {
      GenerationOptions options{.max_tokens = setup_.max_tokens, .sampling = setup_.sampling,
                                .stop_strings = setup_.stop_strings, .stop_at_eos = true};
      options.sampling.seed = sample_seed(setup_.seed, item.id, sample);
      Session session = model.copy_session(prefilled);
      const GenerationResult result = generate_from(model, tokenizer, session, prompt_logits, options);
      samples.push_back({.text = result.text, .length = std::int64_t(result.tokens.size()), .stop_reason = result.stop_reason});
    }
    return score_samples(samples, item.input.at("answer").get<std::string>());
  }

 private:
  Setup setup_;
};

// The competition files of DATA/math_competitions and whether their answers are AIME integers.
struct CompetitionFile {
  const char* task;
  const char* file;
  bool integer_answer;
};
constexpr CompetitionFile kCompetitions[] = {
    {"aime24", "aime_2024.jsonl", true},
    {"aime25", "aime_2025.jsonl", true},
    {"hmmt_feb25", "hmmt_feb_2025.jsonl", false},
};

}  // namespace

std::string gsm8k_prompt(std::string_view question) { return "Question: " + std::string(question) + "\nAnswer:"; }

std::string math_competition_prompt(std::string_view problem, bool integer_answer) {
  while (!problem.empty() && std::isspace(static_cast<unsigned char>(problem.back()))) problem.remove_suffix(1);
  // The instruction matharena gives every model for these competitions (its config.yaml files).
  std::string prompt = std::string(problem) + "\n\nPlease reason step by step, and put your final answer within \\boxed{}.";
  if (integer_answer) prompt += "\nThe answer is an integer between 0 and 999 inclusive.";
  return prompt;
}

std::string gsm8k_reference_answer(std::string_view solution, const std::string& where) {
  const auto number = number_after_marker(solution, "####");
  if (!number) fail(where, "the answer has no \"#### N\" final line");
  std::string answer;
  for (const char c : *number)
    if (c != ',') answer += c;
  return answer;
}

std::vector<GenerationProblem> read_gsm8k(const std::filesystem::path& file) {
  std::vector<GenerationProblem> problems;
  for (const auto& record : read_jsonl_records(file)) {
    const std::string question = string_field(record.value, "question", record.where);
    const std::string answer = gsm8k_reference_answer(string_field(record.value, "answer", record.where), record.where);
    problems.push_back({"gsm8k-" + std::to_string(problems.size()), gsm8k_prompt(question), answer});
  }
  if (problems.empty()) fail(file.string(), "no problems in the file");
  return problems;
}

std::vector<GenerationProblem> read_math_competition(const std::filesystem::path& file, bool integer_answer) {
  std::vector<GenerationProblem> problems;
  for (const auto& record : read_jsonl_records(file))
    problems.push_back({string_field(record.value, "id", record.where),
                        math_competition_prompt(string_field(record.value, "problem", record.where), integer_answer),
                        string_field(record.value, "answer", record.where)});
  if (problems.empty()) fail(file.string(), "no problems in the file");
  return problems;
}

std::uint64_t sample_seed(std::uint64_t run_seed, std::string_view item_id, int sample) {
  return splitmix64(splitmix64(run_seed ^ stable_hash(item_id)) + std::uint64_t(sample));
}

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

ItemResult score_samples(const std::vector<GeneratedSample>& samples, std::string_view reference) {
  if (samples.empty()) fail("score_samples", "no samples to score");
  ItemResult result;
  result.details["reference"] = reference;
  result.details["samples"] = nlohmann::json::array();
  std::vector<double> lengths;
  int correct = 0, truncated = 0;
  for (const auto& sample : samples) {
    const ExtractedAnswer extracted = extract_final_answer(sample.text);
    const bool is_correct = extracted.source != AnswerSource::none && answers_match(extracted.text, reference);
    correct += is_correct;
    truncated += sample.stop_reason == "max tokens";
    lengths.push_back(double(sample.length));
    result.details["samples"].push_back({{"text", sample.text},
                                         {"extracted", extracted.text},
                                         {"source", answer_source_name(extracted.source)},
                                         {"correct", is_correct},
                                         {"length", sample.length},
                                         {"stop_reason", sample.stop_reason}});
  }
  result.metrics["pass@1"] = double(correct) / double(samples.size());
  result.metrics["truncated"] = double(truncated) / double(samples.size());
  result.group["answer_length"] = median(lengths);
  return result;
}

std::unique_ptr<Task> make_long_generation_task(TaskSpec spec, const TaskContext& context) {
  LongGenerationTask::Setup setup;
  setup.sampling = context.sampling;
  setup.seed = context.seed;
  setup.samples = positive_option(spec, "samples", context.samples);
  setup.max_tokens = positive_option(spec, "max_tokens", context.max_new_tokens);
  if (setup.sampling.temperature <= 0) setup.samples = 1;  // greedy: every sample would be the same
  std::string options = "samples=" + std::to_string(setup.samples) + ",max_tokens=" + std::to_string(setup.max_tokens);

  if (spec.name == "gsm8k") {
    setup.problems = read_gsm8k(context.data_dir / "gsm8k" / "test.jsonl");
    setup.stop_strings = {"Question:"};
  } else if (spec.name == "testbed_arithmetic") {
    const int problems = positive_option(spec, "problems", 100);
    const int chars = positive_option(spec, "chars", 2000);
    for (const auto& problem : make_arithmetic_problems(context.seed, problems, chars))
      setup.problems.push_back({"arithmetic-" + std::to_string(setup.problems.size()), problem.prompt, problem.answer});
    // Training documents end after "The answer is N."; a new document could start a new problem.
    setup.stop_strings = {"\nQuestion:", "\nProblem:"};
    options += ",problems=" + std::to_string(problems) + ",chars=" + std::to_string(chars);
  } else {
    const auto* competition = std::find_if(std::begin(kCompetitions), std::end(kCompetitions),
                                           [&](const CompetitionFile& c) { return spec.name == c.task; });
    if (competition == std::end(kCompetitions))
      fail("--task " + spec.name, "not a long-generation task (known: gsm8k, aime24, aime25, hmmt_feb25, testbed_arithmetic)");
    setup.problems = read_math_competition(context.data_dir / "math_competitions" / competition->file,
                                           competition->integer_answer);
  }
  spec.expect_no_more_options();
  setup.name = spec.name + ":" + options;
  return std::make_unique<LongGenerationTask>(std::move(setup));
}

}  // namespace bifocal::eval
