#include "eval/babilong.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "bifocal/error.h"
#include "bifocal/generate.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/haystack.h"
#include "eval/seeded_random.h"

namespace bifocal::eval {

namespace {

// BABILong lets the model write about 20 new tokens: enough for the one-sentence answer formats.
constexpr int kMaxNewTokens = 20;

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\r')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

std::string lowercase_ascii(std::string_view text) {
  std::string lower(text);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return lower;
}

// What a task's prompt says: its instruction, one worked example (the story, the question and
// the answer in the requested format) and the answer format.
struct BabilongInstructions {
  std::string_view instruction;
  std::string_view example;
  std::string_view answer_format;
};

const BabilongInstructions& instructions(int task) {
  static const std::array<BabilongInstructions, 5> all = {{
      {"Below is a text in which facts about where people are have been hidden among unrelated sentences, "
       "followed by a question. Answer the question from those facts only. When a person has been in several "
       "places, the answer is the last place that person went to.",
       "Daniel went to the office. Mary travelled to the garden. Daniel journeyed to the kitchen.\n"
       "Question: Where is Daniel?\nAnswer: The most recent location of Daniel is kitchen.",
       "Answer in the form: The most recent location of PERSON is LOCATION. Write nothing after it."},
      {"Below is a text in which facts about people moving between places and picking up or putting down "
       "objects have been hidden among unrelated sentences, followed by a question. Answer the question from "
       "those facts only. An object that a person carries is wherever that person is; when an object has been "
       "in several places, the answer is the last of them.",
       "John picked up the apple there. John went to the bedroom. Sandra journeyed to the hallway.\n"
       "Question: Where is the apple?\nAnswer: The apple is in the bedroom.",
       "Answer in the form: The OBJECT is in the LOCATION. Write nothing after it."},
      {"Below is a text in which facts about people moving between places and picking up or putting down "
       "objects have been hidden among unrelated sentences, followed by a question about where an object was "
       "before a given place. Answer from those facts only, with the place the object was in just before it "
       "came to the place the question names.",
       "Mary grabbed the football. Mary went to the office. Mary travelled to the garden. Mary dropped the "
       "football.\nQuestion: Where was the football before the garden?\n"
       "Answer: Before the garden the football was in the office.",
       "Answer in the form: Before the LOCATION the OBJECT was in the LOCATION. Write nothing after it."},
      {"Below is a text in which facts about how places lie relative to one another have been hidden among "
       "unrelated sentences, followed by a question. Answer the question from those facts only.",
       "The kitchen is south of the hallway. The office is east of the kitchen.\n"
       "Question: What is south of the hallway?\nAnswer: kitchen",
       "Answer with one word, the location. Write nothing after it."},
      {"Below is a text in which facts about people moving, picking up objects and handing them to one another "
       "have been hidden among unrelated sentences, followed by a question. Answer the question from those facts "
       "only.",
       "Bill took the milk there. Bill handed the milk to Fred. Fred gave the milk to Jeff.\n"
       "Question: Who gave the milk to Jeff?\nAnswer: Fred",
       "Answer with one word, a person or an object. Write nothing after it."},
  }};
  return all.at(std::size_t(task - 1));
}

std::string_view file_stem(int task) {
  static constexpr std::array<std::string_view, 5> stems = {
      "qa1_single-supporting-fact", "qa2_two-supporting-facts", "qa3_three-supporting-facts",
      "qa4_two-arg-relations", "qa5_three-arg-relations"};
  return stems.at(std::size_t(task - 1));
}

class BabilongTask final : public Task {
 public:
  BabilongTask(int task, std::vector<std::int64_t> lengths, int samples, std::vector<BabiSample> questions,
               std::vector<std::string> background, std::uint64_t seed)
      : task_(task),
        lengths_(std::move(lengths)),
        samples_(samples),
        questions_(std::move(questions)),
        background_(std::move(background)),
        seed_(seed) {}

  std::string task_name() const { return "babilong_qa" + std::to_string(task_); }
  std::string name() const override {
    return task_name() + ":lengths=" + format_context_lengths(lengths_) + ",samples=" + std::to_string(samples_);
  }
  std::string primary_metric() const override { return "acc"; }

  std::vector<EvalItem> items(const Tokenizer& tokenizer) const override {
    std::vector<EvalItem> items;
    const std::size_t count = std::min(questions_.size(), std::size_t(samples_));
    for (std::size_t index = 0; index < count; ++index)
      for (const std::int64_t length : lengths_) items.push_back(make_item(tokenizer, length, index));
    return items;
  }

  ItemResult score(const Model& model, const Tokenizer& tokenizer, const EvalItem& item) const override {
    const auto& input = item.input;
    const auto prompt = tokenizer.encode(input.at("prompt").get<std::string>(), /*add_special_tokens=*/true);
    GenerationOptions options;
    options.max_tokens = kMaxNewTokens;
    options.sampling = {.temperature = 0, .top_k = 0, .top_p = 1, .seed = 0};  // greedy, as BABILong decodes
    const GenerationResult generated = generate(model, tokenizer, prompt, options);
    const auto question = input.at("question").get<std::string>();
    const auto answer = input.at("answer").get<std::string>();
    ItemResult result;
    result.metrics["acc"] = babilong_answer_correct(generated.text, answer, question, babilong_labels(task_)) ? 1 : 0;
    result.group = {{"context", input.at("context")}};
    result.details = {{"output", generated.text},
                      {"answer", answer},
                      {"question", question},
                      {"context_tokens", input.at("context_tokens")},
                      {"fact_depths", input.at("fact_depths")}};
    return result;
  }

 private:
  EvalItem make_item(const Tokenizer& tokenizer, std::int64_t length, std::size_t index) const {
    const std::string id = std::to_string(length) + "/" + std::to_string(index);
    const BabiSample& sample = questions_[index];
    SeededRandom random(splitmix64(seed_ ^ stable_hash(task_name() + "/" + id)));
    std::vector<double> depths;
    for (std::size_t i = 0; i < sample.facts.size(); ++i) depths.push_back(random.unit());
    std::sort(depths.begin(), depths.end());
    std::vector<Insertion> facts;
    for (std::size_t i = 0; i < sample.facts.size(); ++i) facts.push_back({.depth = depths[i], .text = sample.facts[i]});

    const auto context_only = [](const std::string& haystack) { return haystack; };
    Haystack context = haystack_without_filler(tokenizer, facts, context_only, /*add_special_tokens=*/false);
    if (length > context.tokens) {
      const Filler filler{.sentences = background_, .first = std::size_t(random.below(background_.size()))};
      context = fill_to_length(tokenizer, filler, facts, length, context_only, /*add_special_tokens=*/false,
                               "--task " + task_name() + " (length " + std::to_string(length) + ")");
    }
    // Each fact's place as a share of the background before it (0 with no background).
    std::vector<double> fact_depths;
    for (const std::size_t boundary : context.boundaries)
      fact_depths.push_back(context.filler_sentences == 0 ? 0.0 : double(boundary) / double(context.filler_sentences));
    const std::string prompt = babilong_prompt(task_, context.haystack, sample.question);
    return {.id = id,
            .input = {{"prompt", prompt},
                      {"context", length},
                      {"context_tokens", context.tokens},
                      {"question", sample.question},
                      {"answer", sample.answer},
                      {"fact_depths", fact_depths}}};
  }

  int task_;
  std::vector<std::int64_t> lengths_;
  int samples_;
  std::vector<BabiSample> questions_;
  std::vector<std::string> background_;
  std::uint64_t seed_;
};

}  // namespace

std::vector<BabiSample> parse_babi(std::string_view text, const std::string& where) {
  std::vector<BabiSample> samples;
  std::vector<std::string> facts;
  std::size_t line_number = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = trim(text.substr(begin, end - begin));
    begin = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const std::string at = where + ":" + std::to_string(line_number);
    const std::size_t digits = line.find_first_not_of("0123456789");
    if (digits == 0 || digits == std::string_view::npos || line[digits] != ' ')
      fail(at, "expected 'ID sentence' (a bAbI line)");
    if (line.substr(0, digits) == "1") facts.clear();  // ID 1: a new story
    const std::string_view rest = line.substr(digits + 1);
    const std::size_t tab = rest.find('\t');
    if (tab == std::string_view::npos) {
      facts.emplace_back(trim(rest));
      continue;
    }
    const std::size_t answer_end = rest.find('\t', tab + 1);
    const std::string_view answer = trim(rest.substr(tab + 1, answer_end == std::string_view::npos
                                                                   ? std::string_view::npos
                                                                   : answer_end - tab - 1));
    if (answer.empty()) fail(at, "a question without an answer");
    samples.push_back({.facts = facts, .question = std::string(trim(rest.substr(0, tab))), .answer = std::string(answer)});
  }
  if (samples.empty()) fail(where, "holds no bAbI question");
  return samples;
}

std::filesystem::path babi_test_file(const std::filesystem::path& data_dir, int task) {
  return data_dir / "babi" / "en-10k" / (std::string(file_stem(task)) + "_test.txt");
}

std::vector<BabiSample> read_babi_test(const std::filesystem::path& data_dir, int task) {
  const auto file = babi_test_file(data_dir, task);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot read the bAbI test file of babilong_qa" + std::to_string(task));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_babi(text.str(), file.string());
}

const std::vector<std::string>& babilong_labels(int task) {
  static const std::vector<std::string> rooms = {"bathroom", "bedroom", "garden", "hallway", "kitchen", "office"};
  static const std::vector<std::string> people_and_objects = {"Bill", "Fred", "Jeff", "Mary",
                                                              "apple", "football", "milk"};
  if (task < 1 || task > 5) fail("babilong_labels", "bAbI task " + std::to_string(task) + " is not one of 1-5");
  return task == 5 ? people_and_objects : rooms;
}

bool babilong_answer_correct(std::string_view output, std::string_view answer, std::string_view question,
                             const std::vector<std::string>& labels) {
  std::string said = lowercase_ascii(output);
  for (const std::string_view stop : {".", "<context>", "<example>", "question"})
    if (const std::size_t at = said.find(stop); at != std::string::npos) said.resize(at);
  const std::string asked = lowercase_ascii(question);
  const std::string expected = lowercase_ascii(answer);
  bool expected_found = false;
  for (const auto& label : labels) {
    const std::string name = lowercase_ascii(label);
    if (said.find(name) == std::string::npos || asked.find(name) != std::string::npos) continue;
    if (name != expected) return false;  // a distractor
    expected_found = true;
  }
  return expected_found;
}

std::string babilong_prompt(int task, std::string_view context, std::string_view question) {
  const BabilongInstructions& text = instructions(task);
  std::string prompt;
  prompt += text.instruction;
  prompt += "\n\n<example>\n";
  prompt += text.example;
  prompt += "\n</example>\n\n";
  prompt += text.answer_format;
  prompt += "\n\n<context>\n";
  prompt += context;
  prompt += "\n</context>\n\nQuestion: ";
  prompt += question;
  prompt += "\nAnswer:";
  return prompt;
}

std::unique_ptr<Task> make_babilong_task(TaskSpec spec, const TaskContext& context) {
  const std::string where = "--task " + spec.name;
  int task = 0;
  for (int n = 1; n <= 5; ++n)
    if (spec.name == "babilong_qa" + std::to_string(n)) task = n;
  if (task == 0) fail(where, "not a BABILong task (babilong_qa1 … babilong_qa5)");
  std::vector<std::int64_t> lengths = {0, 1024, 2048, 4096};
  if (const auto value = spec.take("lengths")) lengths = parse_context_lengths(*value, where, /*minimum=*/0);
  int samples = 100;
  if (const auto value = spec.take("samples")) samples = parse_sample_count(*value, where);
  spec.expect_no_more_options();
  auto questions = read_babi_test(context.data_dir, task);
  std::vector<std::string> background;
  if (std::any_of(lengths.begin(), lengths.end(), [](std::int64_t length) { return length > 0; }))
    background = read_essay_sentences(context.data_dir / "pg_essays");
  return std::make_unique<BabilongTask>(task, std::move(lengths), samples, std::move(questions), std::move(background),
                                        context.seed);
}

}  // namespace bifocal::eval
