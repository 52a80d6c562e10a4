// BABILong: the bAbI parser, the label sets, the scorer on hand-written outputs, the prompt
// layout, items (facts in order among the background, the question last, exact context lengths,
// fixed by the seed) and the errors for bad options and missing files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/babilong.h"
#include "eval/haystack.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

const std::filesystem::path kEvalData = std::filesystem::path(BIFOCAL_GOLDEN_DIR) / ".." / "eval";

const Tokenizer& testbed_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(testing::testbed_model());
  return tokenizer;
}

TaskContext eval_context(std::uint64_t seed = 1234) {
  TaskContext context;
  context.data_dir = kEvalData;
  context.seed = seed;
  return context;
}

// The text between the prompt's context tags.
std::string context_of(const std::string& prompt) {
  const std::size_t begin = prompt.find("<context>\n") + 10, end = prompt.find("\n</context>");
  return prompt.substr(begin, end - begin);
}

std::string join(const std::vector<std::string>& sentences) {
  std::string text;
  for (const auto& sentence : sentences) text += (text.empty() ? "" : " ") + sentence;
  return text;
}

TEST(Babilong, ParsesStoriesIntoOneSamplePerQuestion) {
  const std::string text =
      "1 Mary moved to the bathroom.\n"
      "2 John went to the hallway.\n"
      "3 Where is Mary? \tbathroom\t1\n"
      "4 Daniel went back to the hallway.\n"
      "5 Where is Daniel?\thallway\t4\r\n"
      "1 The garden is west of the office.\n"
      "2 What is west of the office?\tgarden\t1\n";
  const auto samples = parse_babi(text, "stories.txt");
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].facts, (std::vector<std::string>{"Mary moved to the bathroom.", "John went to the hallway."}));
  EXPECT_EQ(samples[0].question, "Where is Mary?");
  EXPECT_EQ(samples[0].answer, "bathroom");
  // Every statement of the story before the question, not the earlier questions.
  EXPECT_EQ(samples[1].facts, (std::vector<std::string>{"Mary moved to the bathroom.", "John went to the hallway.",
                                                        "Daniel went back to the hallway."}));
  EXPECT_EQ(samples[1].answer, "hallway");
  // ID 1 starts a new story.
  EXPECT_EQ(samples[2].facts, (std::vector<std::string>{"The garden is west of the office."}));
  EXPECT_EQ(samples[2].question, "What is west of the office?");
  EXPECT_EQ(samples[2].answer, "garden");
}

TEST(Babilong, ParseErrorsNameTheLine) {
  testing::expect_error([] { parse_babi("1 Mary moved.\nMary moved again.\n", "qa.txt"); }, {"qa.txt:2", "expected 'ID sentence'"});
  testing::expect_error([] { parse_babi("1 Where is Mary?\t\t1\n", "qa.txt"); }, {"qa.txt:1", "without an answer"});
  testing::expect_error([] { parse_babi("1 Mary moved.\n", "qa.txt"); }, {"qa.txt", "no bAbI question"});
}

TEST(Babilong, ReadsTheShippedTestExcerpts) {
  const auto qa1 = read_babi_test(kEvalData, 1);
  ASSERT_EQ(qa1.size(), 10u);
  EXPECT_EQ(qa1[0].facts, (std::vector<std::string>{"John travelled to the hallway.", "Mary journeyed to the bathroom."}));
  EXPECT_EQ(qa1[0].question, "Where is John?");
  EXPECT_EQ(qa1[0].answer, "hallway");
  EXPECT_EQ(qa1[4].facts.size(), 10u);  // "Where is Sandra?" at line 15: ten statements before it
  EXPECT_EQ(qa1[4].answer, "kitchen");
  EXPECT_EQ(read_babi_test(kEvalData, 4).size(), 4u);
  const auto qa5 = read_babi_test(kEvalData, 5);
  EXPECT_EQ(qa5[1].question, "Who gave the football to Jeff?");
  EXPECT_EQ(qa5[1].answer, "Fred");
  EXPECT_EQ(babi_test_file("/data", 3), std::filesystem::path("/data/babi/en-10k/qa3_three-supporting-facts_test.txt"));
  testing::expect_error([] { read_babi_test("/nonexistent", 2); },
                        {"/nonexistent/babi/en-10k/qa2_two-supporting-facts_test.txt", "cannot read"});
}

TEST(Babilong, EveryShippedAnswerIsALabelOfItsTask) {
  EXPECT_EQ(babilong_labels(1), (std::vector<std::string>{"bathroom", "bedroom", "garden", "hallway", "kitchen", "office"}));
  EXPECT_EQ(babilong_labels(4), babilong_labels(1));
  EXPECT_EQ(babilong_labels(5), (std::vector<std::string>{"Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"}));
  for (int task = 1; task <= 5; ++task)
    for (const auto& sample : read_babi_test(kEvalData, task)) {
      const auto& labels = babilong_labels(task);
      EXPECT_NE(std::find(labels.begin(), labels.end(), sample.answer), labels.end()) << "qa" << task << ": " << sample.answer;
    }
  testing::expect_error([] { babilong_labels(6); }, {"6 is not one of 1-5"});
}

TEST(Babilong, ScoresTheAnswerLabelWithoutDistractors) {
  const auto& rooms = babilong_labels(1);
  const std::string where_john = "Where is John?";
  EXPECT_TRUE(babilong_answer_correct(" The most recent location of John is hallway.", "hallway", where_john, rooms));
  EXPECT_TRUE(babilong_answer_correct(" Hallway", "hallway", where_john, rooms));  // case is ignored
  EXPECT_FALSE(babilong_answer_correct(" The most recent location of John is kitchen.", "hallway", where_john, rooms));
  EXPECT_FALSE(babilong_answer_correct(" hallway or kitchen", "hallway", where_john, rooms));  // a distractor too
  EXPECT_FALSE(babilong_answer_correct(" I do not know.", "hallway", where_john, rooms));
  EXPECT_FALSE(babilong_answer_correct("", "hallway", where_john, rooms));
  // Only the first sentence counts, and nothing after the model starts a new question.
  EXPECT_TRUE(babilong_answer_correct(" hallway. Then John went to the kitchen.", "hallway", where_john, rooms));
  EXPECT_TRUE(babilong_answer_correct(" hallway\n\nQuestion: Where is Mary?\nAnswer: kitchen", "hallway", where_john, rooms));
  EXPECT_FALSE(babilong_answer_correct(" kitchen. The most recent location of John is hallway.", "hallway", where_john, rooms));

  // Labels the question names do not count against the output.
  const std::string qa4_question = "What is the bathroom east of?";
  EXPECT_TRUE(babilong_answer_correct(" The bathroom is east of the bedroom.", "bedroom", qa4_question, rooms));
  EXPECT_FALSE(babilong_answer_correct(" The bathroom is east of the garden.", "bedroom", qa4_question, rooms));
  const auto& qa5 = babilong_labels(5);
  const std::string who_gave = "Who gave the football to Jeff?";
  EXPECT_TRUE(babilong_answer_correct(" Fred gave the football to Jeff.", "Fred", who_gave, qa5));
  EXPECT_TRUE(babilong_answer_correct(" fred", "Fred", who_gave, qa5));
  EXPECT_FALSE(babilong_answer_correct(" Fred and Bill", "Fred", who_gave, qa5));
  EXPECT_FALSE(babilong_answer_correct(" the milk", "Fred", who_gave, qa5));
  EXPECT_TRUE(babilong_answer_correct(" football", "football", "What did Fred give to Jeff?", qa5));
}

TEST(Babilong, PromptFollowsBabilongsLayout) {
  const std::string prompt = babilong_prompt(1, "CONTEXT TEXT", "Where is John?");
  EXPECT_EQ(prompt.rfind("Below is a text in which facts about where people are", 0), 0u);
  const std::size_t example = prompt.find("<example>\n"), example_end = prompt.find("\n</example>\n\n"),
                    format = prompt.find("Answer in the form: The most recent location of PERSON is LOCATION."),
                    context = prompt.find("<context>\nCONTEXT TEXT\n</context>\n\n");
  ASSERT_NE(example, std::string::npos);
  ASSERT_NE(example_end, std::string::npos);
  ASSERT_NE(format, std::string::npos);
  ASSERT_NE(context, std::string::npos);
  EXPECT_LT(example, example_end);
  EXPECT_LT(example_end, format);
  EXPECT_LT(format, context);
  EXPECT_TRUE(prompt.ends_with("</context>\n\nQuestion: Where is John?\nAnswer:"));
  for (int task = 2; task <= 5; ++task) EXPECT_NE(babilong_prompt(task, "C", "Q?"), prompt);
}

TEST(Babilong, ItemsKeepFactsInOrderAndTheQuestionLast) {
  const auto task = make_babilong_task(TaskSpec::parse("babilong_qa2:lengths=0,512,1024,samples=3"), eval_context());
  EXPECT_EQ(task->name(), "babilong_qa2:lengths=0,512,1024,samples=3");
  EXPECT_EQ(task->primary_metric(), "acc");
  const auto items = task->items(testbed_tokenizer());
  ASSERT_EQ(items.size(), 9u);
  const std::vector<std::string> ids = {"0/0", "512/0", "1024/0", "0/1", "512/1", "1024/1", "0/2", "512/2", "1024/2"};
  const auto samples = read_babi_test(kEvalData, 2);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& input = items[i].input;
    EXPECT_EQ(items[i].id, ids[i]);
    const BabiSample& sample = samples[i / 3];
    const auto prompt = input.at("prompt").get<std::string>();
    const std::string context = context_of(prompt);
    const auto length = input.at("context").get<std::int64_t>();
    EXPECT_EQ(input.at("question").get<std::string>(), sample.question);
    EXPECT_EQ(input.at("answer").get<std::string>(), sample.answer);
    EXPECT_TRUE(prompt.ends_with("\n</context>\n\nQuestion: " + sample.question + "\nAnswer:"));
    if (length == 0) {
      EXPECT_EQ(context, join(sample.facts));
      continue;
    }
    EXPECT_EQ(std::int64_t(testbed_tokenizer().encode(context, false).size()), length);
    EXPECT_EQ(input.at("context_tokens").get<std::int64_t>(), length);
    std::size_t previous = 0;
    for (const auto& fact : sample.facts) {  // each fact found after the one before it
      const std::size_t at = context.find(fact, previous);
      ASSERT_NE(at, std::string::npos) << fact;
      previous = at + fact.size();
    }
    EXPECT_GT(context.size(), join(sample.facts).size() * 2);  // background surrounds the facts
    const auto depths = input.at("fact_depths").get<std::vector<double>>();
    ASSERT_EQ(depths.size(), sample.facts.size());
    EXPECT_TRUE(std::is_sorted(depths.begin(), depths.end()));
    EXPECT_LT(depths.front(), depths.back());
  }
}

TEST(Babilong, ItemsAreFixedByTheSeed) {
  const auto spec = "babilong_qa1:lengths=0,400,samples=2";
  const auto first = make_babilong_task(TaskSpec::parse(spec), eval_context(3))->items(testbed_tokenizer());
  const auto again = make_babilong_task(TaskSpec::parse(spec), eval_context(3))->items(testbed_tokenizer());
  const auto other = make_babilong_task(TaskSpec::parse(spec), eval_context(4))->items(testbed_tokenizer());
  ASSERT_EQ(first.size(), 4u);
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].input, again[i].input);
  EXPECT_EQ(first[0].input, other[0].input);                                       // length 0: the facts alone
  EXPECT_NE(first[1].input.at("prompt"), other[1].input.at("prompt"));             // other background and places
}

TEST(Babilong, FactsLongerThanTheLengthAreGivenAlone) {
  // qa3's first question has 38 statements before it, far more than 64 tokens.
  const auto task = make_babilong_task(TaskSpec::parse("babilong_qa3:lengths=64,samples=1"), eval_context());
  const auto items = task->items(testbed_tokenizer());
  ASSERT_EQ(items.size(), 1u);
  const auto sample = read_babi_test(kEvalData, 3).at(0);
  EXPECT_EQ(context_of(items[0].input.at("prompt").get<std::string>()), join(sample.facts));
  EXPECT_GT(items[0].input.at("context_tokens").get<std::int64_t>(), 64);
}

TEST(Babilong, DefaultsAndSampleCount) {
  EXPECT_EQ(make_babilong_task(TaskSpec::parse("babilong_qa4"), eval_context())->name(),
            "babilong_qa4:lengths=0,1024,2048,4096,samples=100");
  // The excerpt holds 4 questions: samples=100 gives those 4 at each length.
  const auto task = make_babilong_task(TaskSpec::parse("babilong_qa4:lengths=0"), eval_context());
  EXPECT_EQ(task->items(testbed_tokenizer()).size(), 4u);
}

TEST(Babilong, BadOptionsAndMissingFilesAreErrors) {
  testing::expect_error([] { make_babilong_task(TaskSpec::parse("babilong_qa6"), eval_context()); },
                        {"babilong_qa6", "not a BABILong task"});
  testing::expect_error([] { make_babilong_task(TaskSpec::parse("babilong_qa1:lengths=1k"), eval_context()); },
                        {"--task babilong_qa1", "'1k' is not a number of tokens"});
  testing::expect_error([] { make_babilong_task(TaskSpec::parse("babilong_qa1:samples=-1"), eval_context()); },
                        {"samples=-1"});
  testing::expect_error([] { make_babilong_task(TaskSpec::parse("babilong_qa1:noise=pg19"), eval_context()); },
                        {"babilong_qa1", "unknown option 'noise'"});
  const testing::TempDir data;
  TaskContext context = eval_context();
  context.data_dir = data.path();
  testing::expect_error([&] { make_babilong_task(TaskSpec::parse("babilong_qa5"), context); },
                        {"babi/en-10k/qa5_three-arg-relations_test.txt", "cannot read"});
  // With the bAbI file but no essays: length 0 works, longer contexts name the essay folder.
  std::filesystem::create_directories(data.path() / "babi" / "en-10k");
  std::filesystem::copy_file(babi_test_file(kEvalData, 5), babi_test_file(data.path(), 5));
  EXPECT_NO_THROW(make_babilong_task(TaskSpec::parse("babilong_qa5:lengths=0"), context));
  testing::expect_error([&] { make_babilong_task(TaskSpec::parse("babilong_qa5:lengths=0,1024"), context); },
                        {(data.path() / "pg_essays").string(), "no such folder"});
}

TEST(Babilong, ScoresAnItemWithTheTestbedModel) {
  const Model model = Model::load(testing::testbed_model());
  const auto task = make_babilong_task(TaskSpec::parse("babilong_qa1:lengths=0,256,samples=1"), eval_context());
  const auto items = task->items(testbed_tokenizer());
  ASSERT_EQ(items.size(), 2u);
  for (const auto& item : items) {
    const ItemResult result = task->score(model, testbed_tokenizer(), item);
    ASSERT_TRUE(result.metrics.contains("acc"));
    const double acc = result.metrics.at("acc");
    EXPECT_TRUE(acc == 0.0 || acc == 1.0);
    EXPECT_EQ(result.group, nlohmann::json({{"context", item.input.at("context")}}));
    const auto output = result.details.at("output").get<std::string>();
    EXPECT_EQ(acc == 1.0, babilong_answer_correct(output, "hallway", "Where is John?", babilong_labels(1)));
    EXPECT_EQ(result.details.at("answer"), "hallway");
  }
}

}  // namespace
}  // namespace bifocal::eval
