// Long-generation tasks (src/eval/long_generation.h, src/eval/testbed_arithmetic.h): prompt
// templates, the readers on the shipped excerpts (tests/eval/gsm8k, tests/eval/math_competitions)
// and bad files, per-sample seeds, scoring of samples, the factory's names and options, the
// testbed's arithmetic problems re-derived from their text, and one scored item on the testbed
// model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "bifocal/generate.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/answer_extraction.h"
#include "eval/long_generation.h"
#include "eval/testbed_arithmetic.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

const std::filesystem::path kExcerpts = std::filesystem::path(BIFOCAL_GOLDEN_DIR) / ".." / "eval";

TaskContext excerpt_context() {
  TaskContext context;
  context.data_dir = kExcerpts;
  return context;
}

TEST(LongGenerationTask, PromptTemplates) {
  EXPECT_EQ(gsm8k_prompt("How many eggs?"), "Question: How many eggs?\nAnswer:");
  EXPECT_EQ(math_competition_prompt("Find $x$.\n", false),
            "Find $x$.\n\nPlease reason step by step, and put your final answer within \\boxed{}.");
  EXPECT_EQ(math_competition_prompt("Find $x$.", true),
            "Find $x$.\n\nPlease reason step by step, and put your final answer within \\boxed{}.\n"
            "The answer is an integer between 0 and 999 inclusive.");
}

TEST(LongGenerationTask, Gsm8kReferenceAnswer) {
  EXPECT_EQ(gsm8k_reference_answer("He makes 9 * 2 = $<<9*2=18>>18.\n#### 18", "x"), "18");
  EXPECT_EQ(gsm8k_reference_answer("…\n#### 1,450,000", "x"), "1450000");
  EXPECT_EQ(gsm8k_reference_answer("…\n#### -3", "x"), "-3");
  testing::expect_error([] { gsm8k_reference_answer("The answer is 18.", "test.jsonl:4"); },
                        {"test.jsonl:4", "no \"#### N\""});
}

TEST(LongGenerationTask, ReadsTheGsm8kExcerpt) {
  const auto problems = read_gsm8k(kExcerpts / "gsm8k" / "test.jsonl");
  ASSERT_EQ(problems.size(), 5u);
  const std::vector<std::string> answers{"18", "3", "70000", "2125", "-10"};
  for (std::size_t i = 0; i < problems.size(); ++i) {
    EXPECT_EQ(problems[i].id, "gsm8k-" + std::to_string(i));
    EXPECT_EQ(problems[i].answer, answers[i]);
    EXPECT_TRUE(problems[i].prompt.starts_with("Question: ")) << problems[i].prompt;
    EXPECT_TRUE(problems[i].prompt.ends_with("?\nAnswer:")) << problems[i].prompt;
  }
  EXPECT_TRUE(problems[0].prompt.starts_with("Question: Janet\u2019s ducks lay 16 eggs per day."));
}

TEST(LongGenerationTask, ReadsTheCompetitionExcerpts) {
  const auto aime = read_math_competition(kExcerpts / "math_competitions" / "aime_2024.jsonl", true);
  ASSERT_EQ(aime.size(), 2u);
  EXPECT_EQ(aime[0].id, "aime_2024_I_1");
  EXPECT_EQ(aime[0].answer, "204");
  EXPECT_EQ(aime[1].answer, "025");
  EXPECT_TRUE(aime[0].prompt.starts_with("Every morning Aya goes for a $9$-kilometer-long walk"));
  EXPECT_TRUE(aime[0].prompt.ends_with("inclusive."));
  const auto hmmt = read_math_competition(kExcerpts / "math_competitions" / "hmmt_feb_2025.jsonl", false);
  ASSERT_EQ(hmmt.size(), 2u);
  EXPECT_EQ(hmmt[0].answer, "\\frac{1}{576}");
  EXPECT_TRUE(hmmt[0].prompt.ends_with("within \\boxed{}."));
}

TEST(LongGenerationTask, BadFilesAreNamedWithTheirLine) {
  const testing::TempDir dir;
  const auto bad_json = dir.write("bad.jsonl", "{\"question\": \"q\", \"answer\": \"#### 1\"}\n{oops\n");
  testing::expect_error([&] { read_gsm8k(bad_json); }, {"bad.jsonl:2", "malformed JSON"});
  const auto overflow = dir.write("overflow.jsonl", "{\"question\": \"q\", \"answer\": \"#### 1\", \"n\": -1e999}\n");
  testing::expect_error([&] { read_gsm8k(overflow); }, {"overflow.jsonl:1", "malformed JSON", "number overflow"});
  const auto no_answer = dir.write("no_answer.jsonl", "{\"question\": \"q\"}\n");
  testing::expect_error([&] { read_gsm8k(no_answer); }, {"no_answer.jsonl:1", "no \"answer\" field"});
  const auto not_string = dir.write("number.jsonl", "{\"id\": 3, \"problem\": \"p\", \"answer\": \"1\"}\n");
  testing::expect_error([&] { read_math_competition(not_string, true); }, {"number.jsonl:1", "\"id\" is not a string"});
  const auto no_marker = dir.write("marker.jsonl", "{\"question\": \"q\", \"answer\": \"18\"}\n");
  testing::expect_error([&] { read_gsm8k(no_marker); }, {"marker.jsonl:1", "####"});
  const auto empty = dir.write("empty.jsonl", "\n");
  testing::expect_error([&] { read_gsm8k(empty); }, {"empty.jsonl", "no problems"});
  testing::expect_error([&] { read_gsm8k(dir.path() / "missing.jsonl"); }, {"missing.jsonl", "file not found"});
}

// k samples share one prefill: each continues a copy of the prefilled session with its own seed,
// which gives exactly what k separate generate() calls give (tokens, text, stop reason), for full
// attention and for a window that wraps during the answer.
TEST(LongGenerationTask, SamplesFromOneSharedPrefillEqualSeparateGenerations) {
  const Tokenizer tokenizer = Tokenizer::from_dir(testing::testbed_model());
  const auto prompt = tokenizer.encode("Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:", true);
  for (const char* mixer : {"full", "swa:window=16,sinks=4"}) {
    SCOPED_TRACE(mixer);
    const Model model = Model::load(testing::testbed_model(), {.mixer = std::string(mixer)});
    GenerationOptions options{.max_tokens = 40, .sampling = {}, .stop_strings = {"\n\n"}, .stop_at_eos = true};
    options.sampling.temperature = 0.9f;
    options.sampling.top_k = 50;
    Session prefilled = model.new_session(std::int64_t(prompt.size()) + options.max_tokens);
    const auto last = model.prefill(prefilled, prompt);
    const std::vector<float> prompt_logits(last.begin(), last.end());
    std::set<std::string> texts;
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      options.sampling.seed = seed;
      const GenerationResult alone = generate(model, tokenizer, prompt, options);
      Session copy = model.copy_session(prefilled);
      const GenerationResult shared = generate_from(model, tokenizer, copy, prompt_logits, options);
      EXPECT_EQ(shared.tokens, alone.tokens) << "seed " << seed;
      EXPECT_EQ(shared.text, alone.text);
      EXPECT_EQ(shared.stop_reason, alone.stop_reason);
      EXPECT_EQ(shared.prompt_tokens, alone.prompt_tokens);
      texts.insert(alone.text);
    }
    EXPECT_GT(texts.size(), 1u);  // the seeds do draw different samples: the comparison is not vacuous
    EXPECT_EQ(prefilled.position(), std::int64_t(prompt.size()));
  }
}

TEST(LongGenerationTask, SampleSeedsDependOnRunItemAndSampleOnly) {
  const std::uint64_t seed = sample_seed(1234, "gsm8k-0", 0);
  EXPECT_EQ(seed, sample_seed(1234, "gsm8k-0", 0));
  std::set<std::uint64_t> seeds{seed, sample_seed(1234, "gsm8k-0", 1), sample_seed(1234, "gsm8k-1", 0),
                                sample_seed(1235, "gsm8k-0", 0)};
  EXPECT_EQ(seeds.size(), 4u);
  // Pinned: results files record samples drawn with these seeds, so the derivation must not change.
  EXPECT_EQ(seed, 3856841977198202744u) << "regression value";
}

TEST(LongGenerationTask, Median) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({7}), 7);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(LongGenerationTask, ScoresSamplesAgainstTheReference) {
  const ItemResult result = score_samples({{"so $xy = \\boxed{025}$", 10, "eos"},
                                           {"The answer is 24.", 20, "max tokens"},
                                           {"9 + 16 = 25\n#### 25", 31, "eos"},
                                           {"no idea", 7, "stop string"}},
                                          "25");
  EXPECT_DOUBLE_EQ(result.metrics.at("pass@1"), 0.5);
  EXPECT_DOUBLE_EQ(result.metrics.at("truncated"), 0.25);
  EXPECT_EQ(result.group.at("answer_length").get<double>(), 15);  // median of 7, 10, 20, 31
  EXPECT_EQ(result.details.at("reference"), "25");
  const auto& samples = result.details.at("samples");
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].at("extracted"), "025");
  EXPECT_EQ(samples[0].at("source"), "boxed");
  EXPECT_EQ(samples[0].at("correct"), true);
  EXPECT_EQ(samples[1].at("extracted"), "24");
  EXPECT_EQ(samples[1].at("correct"), false);
  EXPECT_EQ(samples[2].at("source"), "####");
  EXPECT_EQ(samples[3].at("source"), "none");
  EXPECT_EQ(samples[3].at("length"), 7);
  EXPECT_EQ(samples[3].at("stop_reason"), "stop string");
  EXPECT_EQ(samples[3].at("text"), "no idea");
  testing::expect_error([] { score_samples({}, "1"); }, {"no samples"});
}

TEST(LongGenerationTask, FactoryNamesOptionsAndItems) {
  const TaskContext context = excerpt_context();
  const auto gsm8k = make_long_generation_task(TaskSpec::parse("gsm8k"), context);
  EXPECT_EQ(gsm8k->name(), "gsm8k:samples=1,max_tokens=1024");
  EXPECT_EQ(gsm8k->primary_metric(), "pass@1");
  const Tokenizer tokenizer = Tokenizer::from_dir(testing::testbed_model());
  const auto items = gsm8k->items(tokenizer);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[3].id, "gsm8k-3");
  EXPECT_EQ(items[3].input.at("answer"), "2125");

  EXPECT_EQ(make_long_generation_task(TaskSpec::parse("aime24:samples=4,max_tokens=8000"), context)->name(),
            "aime24:samples=4,max_tokens=8000");
  EXPECT_EQ(make_long_generation_task(TaskSpec::parse("aime25"), context)->items(tokenizer).at(0).id, "aime_2025_I_1");
  EXPECT_EQ(make_long_generation_task(TaskSpec::parse("hmmt_feb25"), context)->items(tokenizer).size(), 2u);
  EXPECT_EQ(make_long_generation_task(TaskSpec::parse("testbed_arithmetic:problems=3,chars=900"), context)->name(),
            "testbed_arithmetic:samples=1,max_tokens=1024,problems=3,chars=900");

  TaskContext greedy = context;
  greedy.sampling.temperature = 0;
  greedy.samples = 8;
  EXPECT_EQ(make_long_generation_task(TaskSpec::parse("gsm8k"), greedy)->name(), "gsm8k:samples=1,max_tokens=1024");

  testing::expect_error([&] { make_long_generation_task(TaskSpec::parse("gsm8k:shots=5"), context); },
                        {"--task gsm8k", "unknown option 'shots'"});
  testing::expect_error([&] { make_long_generation_task(TaskSpec::parse("gsm8k:samples=0"), context); },
                        {"--task gsm8k", "samples=0"});
  testing::expect_error([&] { make_long_generation_task(TaskSpec::parse("aime24:max_tokens=lots"), context); },
                        {"max_tokens=lots"});
  testing::expect_error([&] { make_long_generation_task(TaskSpec::parse("aime23"), context); },
                        {"--task aime23", "not a long-generation task"});
  TaskContext no_data;
  no_data.data_dir = "/nonexistent-data";
  testing::expect_error([&] { make_long_generation_task(TaskSpec::parse("hmmt_feb25"), no_data); },
                        {"/nonexistent-data/math_competitions/hmmt_feb_2025.jsonl", "file not found"});
}

// ---- The testbed's arithmetic, re-derived from the problem text ------------------------------

// Evaluates an expression over single-letter names with + − × ÷ and parentheses (left to
// right within a precedence level, × ÷ before + −); every division must be exact.
class ExpressionEvaluator {
 public:
  ExpressionEvaluator(std::string_view text, const std::map<std::string, std::int64_t>& values) : text_(text), values_(values) {}
  std::int64_t evaluate() {
    const std::int64_t value = sum();
    skip_spaces();
    EXPECT_EQ(at_, text_.size()) << "trailing text in " << text_;
    return value;
  }

 private:
  void skip_spaces() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  bool take(std::string_view token) {
    skip_spaces();
    if (text_.substr(at_).starts_with(token)) {
      at_ += token.size();
      return true;
    }
    return false;
  }
  std::int64_t sum() {
    std::int64_t value = product();
    for (;;) {
      if (take("+")) value += product();
      else if (take("\u2212")) value -= product();
      else return value;
    }
  }
  std::int64_t product() {
    std::int64_t value = atom();
    for (;;) {
      if (take("\u00D7")) {
        value *= atom();
      } else if (take("\u00F7")) {
        const std::int64_t divisor = atom();
        EXPECT_EQ(value % divisor, 0) << "inexact division in " << text_;
        value /= divisor;
      } else {
        return value;
      }
    }
  }
  std::int64_t atom() {
    if (take("(")) {
      const std::int64_t value = sum();
      EXPECT_TRUE(take(")")) << text_;
      return value;
    }
    skip_spaces();
    const std::string name(1, text_[at_++]);
    EXPECT_TRUE(values_.contains(name)) << "unknown name " << name << " in " << text_;
    return values_.contains(name) ? values_.at(name) : 0;
  }
  std::string_view text_;
  const std::map<std::string, std::int64_t>& values_;
  std::size_t at_ = 0;
};

TEST(TestbedArithmetic, AnswersFollowFromTheProblemText) {
  const auto problems = make_arithmetic_problems(1234, 200, 1500);
  ASSERT_EQ(problems.size(), 200u);
  std::map<std::string, int> layouts;
  for (const auto& problem : problems) {
    SCOPED_TRACE(problem.prompt + problem.worked_solution);
    const std::map<std::string, std::int64_t> values(problem.definitions.begin(), problem.definitions.end());
    EXPECT_EQ(values.size(), problem.definitions.size()) << "a name defined twice";
    EXPECT_EQ(std::to_string(ExpressionEvaluator(problem.expression, values).evaluate()), problem.answer);
    // The prompt states every definition, asks about the expression, and has no other number
    // (the filler has no digits).
    for (const auto& [name, value] : problem.definitions)
      EXPECT_NE(problem.prompt.find(name + " = " + std::to_string(value)), std::string::npos) << name;
    EXPECT_TRUE(problem.prompt.ends_with("Question: What is " + problem.expression + "?") ||
                problem.prompt.ends_with("Problem: compute " + problem.expression + "."));
    std::multiset<std::string> defined, mentioned;
    for (const auto& [name, value] : problem.definitions) defined.insert(std::to_string(value));
    std::string_view rest = problem.prompt;
    while (const auto number = last_number(rest)) {
      mentioned.insert(*number);
      rest = rest.substr(0, rest.rfind(*number));
    }
    EXPECT_EQ(mentioned, defined);
    // Every step of the worked solution is right and whole; the solution ends with the answer.
    std::istringstream lines(problem.worked_solution);
    std::string line;
    std::getline(lines, line);
    EXPECT_EQ(line, "");  // the solution starts on the line after the question
    int steps = 0;
    while (std::getline(lines, line) && !line.starts_with("The answer is")) {
      ++steps;
      const std::size_t first_equals = line.find(" = ");
      const std::size_t second_equals = line.rfind(" = ");
      ASSERT_NE(first_equals, second_equals) << line;
      const std::string calculation = line.substr(first_equals + 3, second_equals - first_equals - 3);
      const std::int64_t result = std::stoll(line.substr(second_equals + 3));
      const std::vector<std::string> ops{"+", "\u2212", "\u00D7", "\u00F7"};
      bool checked = false;
      for (const auto& op : ops) {
        const std::size_t at = calculation.find(" " + op + " ");
        if (at == std::string::npos) continue;
        const std::int64_t left = std::stoll(calculation.substr(0, at));
        const std::int64_t right = std::stoll(calculation.substr(at + op.size() + 2));
        const std::int64_t expected = op == "+" ? left + right : op == "\u2212" ? left - right
                                                  : op == "\u00D7" ? left * right : left / right;
        if (op == "\u00F7") EXPECT_EQ(left % right, 0) << line;
        EXPECT_EQ(result, expected) << line;
        EXPECT_GT(result, 0) << line;
        EXPECT_LT(result, 100000) << line;
        checked = true;
      }
      EXPECT_TRUE(checked) << line;
    }
    EXPECT_GE(steps, 2);
    EXPECT_LE(steps, 6);
    EXPECT_EQ(line, "The answer is " + problem.answer + ".");
    // The document (prompt, newline, solution) fills the target to within one filler sentence.
    const std::size_t document = problem.prompt.size() + problem.worked_solution.size();
    EXPECT_LE(document, 1500u);
    EXPECT_GE(document, 1500u - 120u);
    for (const std::string opening : {"Let ", "We are given the numbers ", "Given:\n"})
      layouts[opening] += problem.prompt.starts_with(opening);
    layouts["question"] += problem.prompt.ends_with("?");
  }
  // Every way of stating the numbers, and both question forms, occur among 200 problems.
  EXPECT_GT(layouts["Let "], 0);
  EXPECT_GT(layouts["We are given the numbers "], 0);
  EXPECT_GT(layouts["Given:\n"], 0);
  EXPECT_GT(layouts["question"], 0);
  EXPECT_LT(layouts["question"], 200);
}

TEST(TestbedArithmetic, DeterministicAndAPrefixOfLongerRuns) {
  const auto three = make_arithmetic_problems(7, 3, 2000);
  const auto five = make_arithmetic_problems(7, 5, 2000);
  for (std::size_t i = 0; i < three.size(); ++i) EXPECT_EQ(three[i].prompt, five[i].prompt);
  EXPECT_NE(make_arithmetic_problems(8, 1, 2000)[0].prompt, three[0].prompt);
}

// ---- One item scored on the testbed model ----------------------------------------------------

TEST(LongGenerationTaskOnTestbed, SamplesAreSeededPerItemAndScored) {
  const Model model = Model::load(testing::testbed_model());
  const Tokenizer tokenizer = Tokenizer::from_dir(testing::testbed_model());
  TaskContext context = excerpt_context();
  context.sampling = {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .seed = 0};
  const auto task = make_long_generation_task(TaskSpec::parse("testbed_arithmetic:problems=2,chars=600,samples=2,max_tokens=40"), context);
  const auto items = task->items(tokenizer);
  ASSERT_EQ(items.size(), 2u);
  const ItemResult first = task->score(model, tokenizer, items[0]);
  const ItemResult again = task->score(model, tokenizer, items[0]);
  EXPECT_EQ(first.details, again.details);  // same seeds, same samples
  const auto& samples = first.details.at("samples");
  ASSERT_EQ(samples.size(), 2u);
  std::vector<double> lengths;
  int correct = 0;
  for (const auto& sample : samples) {
    EXPECT_LE(sample.at("length").get<int>(), 40);
    lengths.push_back(sample.at("length").get<double>());
    correct += sample.at("correct").get<bool>();
  }
  EXPECT_NE(samples[0].at("text"), samples[1].at("text"));  // two seeds, two different samples
  EXPECT_DOUBLE_EQ(first.metrics.at("pass@1"), correct / 2.0);
  EXPECT_DOUBLE_EQ(first.group.at("answer_length").get<double>(), (lengths[0] + lengths[1]) / 2);
  EXPECT_EQ(first.details.at("reference"), items[0].input.at("answer"));
}

}  // namespace
}  // namespace bifocal::eval
