// Likelihood multiple choice (src/eval/multiple_choice, mc_datasets): acc against acc_norm,
// every dataset's prompt text for a fixture record (tests/eval/{mmlu,piqa,hellaswag}/, each
// with its PROVENANCE.md) or a hand-written one, WinoGrande's partial scoring, the generic
// mc:FILE.jsonl format, and the errors for malformed and missing data.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/csv_records.h"
#include "eval/mc_datasets.h"
#include "eval/multiple_choice.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

using Ids = std::vector<std::int32_t>;
const std::filesystem::path kFixtures = std::filesystem::path(BIFOCAL_GOLDEN_DIR) / ".." / "eval";

std::unique_ptr<Task> make(const std::string& spec, const std::filesystem::path& data_dir = kFixtures) {
  TaskContext context;
  context.data_dir = data_dir;
  return make_multiple_choice_task(TaskSpec::parse(spec), context);
}

// ---- acc and acc_norm ----

TEST(MultipleChoiceMetrics, CharacterLengthCountsCodePoints) {
  EXPECT_EQ(character_length("cat"), 3u);
  EXPECT_EQ(character_length("caf\xC3\xA9"), 4u);         // "café": 5 bytes
  EXPECT_EQ(character_length("\xE6\x97\xA5\xE6\x9C\xAC"), 2u);  // "日本": 6 bytes
  EXPECT_EQ(character_length(""), 0u);
}

TEST(MultipleChoiceMetrics, AccAndAccNormDisagreeWhenLengthsDiffer) {
  // "cat" at −4.0 nats beats "elephant" at −6.0, but per character −4/3 = −1.33 loses to
  // −6/8 = −0.75: acc picks choice 0, acc_norm choice 1.
  const std::vector<double> logprobs{-4.0, -6.0};
  const std::vector<std::size_t> lengths{character_length("cat"), character_length("elephant")};
  const ChoiceDecision gold_long = decide_choice(logprobs, lengths, 1);
  EXPECT_EQ(gold_long.prediction, 0u);
  EXPECT_EQ(gold_long.prediction_norm, 1u);
  EXPECT_EQ(gold_long.acc, 0.0);
  EXPECT_EQ(gold_long.acc_norm, 1.0);
  const ChoiceDecision gold_short = decide_choice(logprobs, lengths, 0);
  EXPECT_EQ(gold_short.acc, 1.0);
  EXPECT_EQ(gold_short.acc_norm, 0.0);
}

TEST(MultipleChoiceMetrics, TiesGoToTheFirstChoice) {
  const std::vector<double> logprobs{-2.0, -1.0, -1.0};
  const std::vector<std::size_t> lengths{1, 2, 2};  // normalized: −2, −0.5, −0.5
  const ChoiceDecision decision = decide_choice(logprobs, lengths, 2);
  EXPECT_EQ(decision.prediction, 1u);
  EXPECT_EQ(decision.prediction_norm, 1u);
  EXPECT_EQ(decision.acc, 0.0);
}

// ---- MMLU ----

TEST(MmluPrompt, FiveShotTextOfTheFixture) {
  const auto examples = read_mmlu_csv(kFixtures / "mmlu" / "dev" / "abstract_algebra_dev.csv");
  const auto rows = read_mmlu_csv(kFixtures / "mmlu" / "test" / "abstract_algebra_test.csv");
  ASSERT_EQ(examples.size(), 5u);
  ASSERT_EQ(rows.size(), 3u);
  const MultipleChoiceQuestion question = mmlu_question(rows[0], examples, "abstract_algebra");
  const std::string expected =
      "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
      "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.\nA. 0\nB. 1\nC. 2\nD. 3\nAnswer: B\n\n"
      "Statement 1 | If aH is an element of a factor group, then |aH| divides |a|. Statement 2 | If H and K are "
      "subgroups of G then HK is a subgroup of G.\nA. True, True\nB. False, False\nC. True, False\nD. False, True\n"
      "Answer: B\n\n"
      "Statement 1 | Every element of a group generates a cyclic subgroup of the group. Statement 2 | The symmetric "
      "group S_10 has 10 elements.\nA. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer: C\n\n"
      "Statement 1| Every function from a finite set onto itself must be one to one. Statement 2 | Every subgroup "
      "of an abelian group is abelian.\nA. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer: A\n\n"
      "Find the characteristic of the ring 2Z.\nA. 0\nB. 3\nC. 12\nD. 30\nAnswer: A\n\n"
      "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\n"
      "A. 0\nB. 4\nC. 2\nD. 6\nAnswer:";
  ASSERT_EQ(question.contexts.size(), 1u);
  EXPECT_EQ(question.contexts[0], expected);
  EXPECT_EQ(question.continuations, (std::vector<std::string>{" A", " B", " C", " D"}));
  EXPECT_EQ(question.choice_texts, (std::vector<std::string>{"A", "B", "C", "D"}));
  EXPECT_EQ(question.gold, 1);
  // Zero-shot: the header, then the question.
  EXPECT_EQ(mmlu_question(rows[0], {}, "abstract_algebra").contexts[0],
            "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
            "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\n"
            "A. 0\nB. 4\nC. 2\nD. 6\nAnswer:");
}

TEST(MmluPrompt, QuotedCommasStayInsideAChoice) {
  const auto rows = read_mmlu_csv(kFixtures / "mmlu" / "test" / "abstract_algebra_test.csv");
  EXPECT_EQ(rows[2].choices, (std::vector<std::string>{"0", "1", "0,1", "0,4"}));
  EXPECT_EQ(rows[2].answer, 3);
}

TEST(MmluTask, LoadsSubjectsWithIdsAndGroups) {
  const auto task = make("mmlu");
  EXPECT_EQ(task->name(), "mmlu");
  EXPECT_EQ(task->primary_metric(), "acc");
  const auto items = load_mmlu(kFixtures, {}, 5);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[1].id, "abstract_algebra/1");
  EXPECT_EQ(items[1].group, (nlohmann::json{{"subject", "abstract_algebra"}}));
  EXPECT_EQ(items[1].question.gold, 2);
  EXPECT_EQ(make("mmlu:subjects=abstract_algebra,shots=0")->name(), "mmlu:subjects=abstract_algebra,shots=0");
}

TEST(MmluTask, BadSubjectsShotsAndFilesAreNamed) {
  testing::expect_error([] { make("mmlu:subjects=astrology"); },
                        {"mmlu/test/astrology_test.csv", "file not found", "--data-dir"});
  for (const char* bad : {"6", "-1", "+1", "1x", ""})
    testing::expect_error([&] { make(std::string("mmlu:shots=") + bad); }, {"shots must be an integer from 0 to 5"});
  testing::expect_error([] { make("mmlu:subject=anatomy"); }, {"unknown option 'subject'"});
  testing::TempDir empty;
  testing::expect_error([&] { make("mmlu", empty.path()); }, {"mmlu/test", "folder not found"});
  testing::TempDir bad;
  std::filesystem::create_directories(bad.path() / "mmlu" / "test");
  std::filesystem::create_directories(bad.path() / "mmlu" / "dev");
  bad.write("mmlu/dev/x_dev.csv", "question,choice0,choice1,choice2,choice3,answer\n");
  bad.write("mmlu/test/x_test.csv", "question,choice0,choice1,choice2,choice3,answer\nQ,a,b,c,d,D\n");
  testing::expect_error([&] { load_mmlu(bad.path(), {"x"}, 0); }, {"x_test.csv:2", "answer must be 0, 1, 2 or 3"});
  testing::expect_error([&] { load_mmlu(bad.path(), {"x"}, 5); }, {"x_dev.csv", "fewer than the 5 examples"});
}

TEST(Csv, QuotesLineBreaksAndErrors) {
  const auto records = parse_csv("a,\"b,c\",\"say \"\"hi\"\"\"\r\n\n\"two\nlines\",x\n", "t.csv");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].fields, (std::vector<std::string>{"a", "b,c", "say \"hi\""}));
  EXPECT_EQ(records[1].fields, (std::vector<std::string>{"two\nlines", "x"}));
  EXPECT_EQ(records[1].line, 3u);
  testing::expect_error([] { parse_csv("a,b\n\"open,c\n", "t.csv"); }, {"t.csv:2", "unterminated quoted field"});
  testing::expect_error([] { parse_csv("\"a\"b,c\n", "t.csv"); }, {"t.csv:1", "after the closing quote"});
}

// ---- HellaSwag ----

TEST(HellaswagPrompt, PreprocessingFollowsTheHarness) {
  // Trim; " [title]" → ". "; every [...] dropped; then one pass of "  " → " " (three spaces
  // become two, as Python's str.replace leaves them).
  EXPECT_EQ(hellaswag_preprocess("  A [title]B [step] c  d "), "A. B c d");
  EXPECT_EQ(hellaswag_preprocess("a   b"), "a  b");
  EXPECT_EQ(hellaswag_preprocess("an [open bracket"), "an [open bracket");
}

TEST(HellaswagPrompt, FixtureItems) {
  const auto items = load_hellaswag(kFixtures);
  ASSERT_EQ(items.size(), 4u);
  const MultipleChoiceQuestion& first = items[0].question;
  EXPECT_EQ(items[0].id, "0");
  EXPECT_EQ(first.contexts, (std::vector<std::string>{"Roof shingle removal: A man is sitting on a roof. he"}));
  EXPECT_EQ(first.continuations, (std::vector<std::string>{" is using wrap to wrap a pair of skis.",
                                                           " is ripping level tiles off.",
                                                           " is holding a rubik's cube.",
                                                           " starts pulling up roofing on a roof."}));
  EXPECT_EQ(first.choice_texts[3], "starts pulling up roofing on a roof.");
  EXPECT_EQ(first.gold, 3);
  // The fourth fixture item carries a bracketed web address, which the cleanup removes.
  EXPECT_EQ(items[3].question.contexts[0],
            "Family Life: How to entertain a toddler. Ask the toddler what he or she would like to do instead of "
            "doing what you would like to do.. Visit a site like to find loads of creative activities for toddlers "
            "and preschoolers.. Choose small, simple games like candy land or chutes and ladders.");
  EXPECT_EQ(items[3].question.gold, 1);
  const auto task = make("hellaswag");
  EXPECT_EQ(task->primary_metric(), "acc_norm");
}

TEST(HellaswagTask, ReadsTheBzip2File) {
  if (std::system("command -v bzip2 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no bzip2 program";
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "hellaswag");
  std::filesystem::copy_file(kFixtures / "hellaswag" / "hellaswag_val_full.txt.bz2",
                             dir.path() / "hellaswag" / "hellaswag_val_full.txt.bz2");
  const auto from_bzip2 = load_hellaswag(dir.path());
  const auto from_text = load_hellaswag(kFixtures);
  ASSERT_EQ(from_bzip2.size(), from_text.size());
  for (std::size_t i = 0; i < from_text.size(); ++i)
    EXPECT_EQ(from_bzip2[i].question.to_json(), from_text[i].question.to_json());
  dir.write("hellaswag/hellaswag_val_full.txt.bz2", "not bzip2 data");
  testing::expect_error([&] { load_hellaswag(dir.path()); }, {"hellaswag_val_full.txt.bz2", "bzip2 could not decompress"});
}

TEST(HellaswagTask, MalformedAndMissingData) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "hellaswag");
  testing::expect_error([&] { load_hellaswag(dir.path()); },
                        {"hellaswag/hellaswag_val_full.txt.bz2", "file not found", "--data-dir"});
  dir.write("hellaswag/hellaswag_val_full.txt", "ctx\n7\na\nb\nc\nd\n");
  testing::expect_error([&] { load_hellaswag(dir.path()); }, {"hellaswag_val_full.txt:2", "gold ending's index"});
  dir.write("hellaswag/hellaswag_val_full.txt", "ctx\n1\na\nb\nc\n");
  testing::expect_error([&] { load_hellaswag(dir.path()); }, {"5 lines, not six per item"});
}

// ---- PIQA ----

TEST(PiqaPrompt, FixtureItems) {
  const auto items = load_piqa(kFixtures);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].question.contexts[0],
            "Question: How do I ready a guinea pig cage for it's new occupants?\nAnswer:");
  EXPECT_EQ(items[0].question.continuations[0],
            " Provide the guinea pig with a cage full of a few inches of bedding made of ripped paper strips, you "
            "will also need to supply it with a water bottle and a food dish.");
  EXPECT_EQ(items[0].question.gold, 0);
  // Solutions keep their own spacing: only the delimiter space is added.
  EXPECT_EQ(items[1].question.contexts[0], "Question: dresser\nAnswer:");
  EXPECT_EQ(items[1].question.continuations,
            (std::vector<std::string>{" replace drawer with bobby pin ", " finish, woodgrain with  bobby pin "}));
  EXPECT_EQ(items[1].question.choice_texts[1], "finish, woodgrain with  bobby pin ");
  EXPECT_EQ(items[1].question.gold, 1);
  EXPECT_EQ(make("piqa")->primary_metric(), "acc_norm");
}

TEST(PiqaTask, LabelsMustMatchTheQuestions) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "piqa");
  dir.write("piqa/valid.jsonl",
            R"({"goal": "g", "sol1": "a", "sol2": "b"})" "\n"
            R"({"goal": "h", "sol1": "a", "sol2": "b"})" "\n");
  testing::expect_error([&] { load_piqa(dir.path()); }, {"piqa/valid-labels.lst", "file not found"});
  dir.write("piqa/valid-labels.lst", "0\n");
  testing::expect_error([&] { load_piqa(dir.path()); }, {"1 labels for 2 questions"});
  dir.write("piqa/valid-labels.lst", "0\n2\n");
  testing::expect_error([&] { load_piqa(dir.path()); }, {"valid-labels.lst:2", "expected 0 or 1"});
}

// ---- ARC ----

TEST(ArcPrompt, BothRecordLayoutsGiveTheSameQuestion) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "arc");
  // Hand-written, in AI2's layout and in the Hugging Face flattening; the answer key is a label.
  dir.write("arc/ARC-Easy-Test.jsonl",
            R"({"id": "q1", "question": {"stem": "Which is a liquid at room temperature?", "choices": )"
            R"([{"text": "iron", "label": "A"}, {"text": "water", "label": "B"}, {"text": "salt", "label": "C"}]}, )"
            R"("answerKey": "B"})"
            "\n"
            R"({"id": "q2", "question": "Which is a liquid at room temperature?", "choices": )"
            R"({"text": ["iron", "water", "salt"], "label": ["1", "2", "3"]}, "answerKey": "2"})"
            "\n");
  const auto items = load_arc(dir.path(), /*challenge=*/false);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].id, "q1");
  EXPECT_EQ(items[0].question.contexts[0], "Question: Which is a liquid at room temperature?\nAnswer:");
  EXPECT_EQ(items[0].question.continuations, (std::vector<std::string>{" iron", " water", " salt"}));
  EXPECT_EQ(items[0].question.gold, 1);
  EXPECT_EQ(items[1].question.to_json(), items[0].question.to_json());
  EXPECT_EQ(make("arc_easy", dir.path())->primary_metric(), "acc_norm");
}

TEST(ArcTask, MissingDataAndBadAnswerKeys) {
  testing::TempDir dir;
  testing::expect_error([&] { make("arc_easy", dir.path()); },
                        {"arc/ARC-Easy-Test.jsonl", "file not found", "the arc_easy task", "--data-dir"});
  testing::expect_error([&] { make("arc_challenge", dir.path()); }, {"arc/ARC-Challenge-Test.jsonl", "arc_challenge"});
  std::filesystem::create_directories(dir.path() / "arc");
  dir.write("arc/ARC-Challenge-Test.jsonl",
            R"({"id": "q", "question": "?", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "E"})"
            "\n");
  testing::expect_error([&] { make("arc_challenge", dir.path()); },
                        {"ARC-Challenge-Test.jsonl:1", "answerKey 'E' is not one of the choices' labels"});
}

// ---- WinoGrande ----

TEST(WinograndePrompt, OptionGoesIntoTheContextAndTheRestIsScored) {
  const MultipleChoiceQuestion question = winogrande_question(
      "The trophy doesn't fit into the brown suitcase because the _ is too large.", "trophy", "suitcase", 0, "test");
  EXPECT_EQ(question.contexts,
            (std::vector<std::string>{"The trophy doesn't fit into the brown suitcase because the trophy",
                                      "The trophy doesn't fit into the brown suitcase because the suitcase"}));
  EXPECT_EQ(question.continuations, (std::vector<std::string>{" is too large."}));
  EXPECT_EQ(question.choices(), 2u);
  EXPECT_EQ(question.continuation(1), " is too large.");
  EXPECT_EQ(question.gold, 0);
  // The remainder after the blank is trimmed before the delimiter space is added.
  EXPECT_EQ(winogrande_question("Ann gave _  a book .", "Bea", "Cy", 1, "test").continuations[0], " a book .");
  testing::expect_error([] { winogrande_question("no blank here", "a", "b", 0, "dev.jsonl:3"); },
                        {"dev.jsonl:3", "no blank"});
}

TEST(WinograndeTask, LoadsTheReleaseFormatAndNamesMissingData) {
  testing::TempDir dir;
  testing::expect_error([&] { make("winogrande", dir.path()); },
                        {"winogrande/dev.jsonl", "file not found", "the winogrande task", "--data-dir"});
  std::filesystem::create_directories(dir.path() / "winogrande");
  dir.write("winogrande/dev.jsonl",
            R"({"qID": "w-1", "sentence": "Sam lent Max money because _ was broke.", )"
            R"("option1": "Sam", "option2": "Max", "answer": "2"})"
            "\n");
  const auto task = make("winogrande", dir.path());
  EXPECT_EQ(task->primary_metric(), "acc");
  const auto items = load_winogrande(dir.path());
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].id, "w-1");
  EXPECT_EQ(items[0].question.contexts[1], "Sam lent Max money because Max");
  EXPECT_EQ(items[0].question.continuations[0], " was broke.");
  EXPECT_EQ(items[0].question.gold, 1);
  dir.write("winogrande/dev.jsonl",
            R"({"qID": "w-1", "sentence": "_ x", "option1": "a", "option2": "b", "answer": "3"})"
            "\n");
  testing::expect_error([&] { load_winogrande(dir.path()); }, {"dev.jsonl:1", "answer must be \"1\" or \"2\""});
}

// ---- the generic mc:FILE.jsonl task ----

TEST(ChoiceJsonl, ReadsQuestionsAndTheDelimiterOption) {
  testing::TempDir dir;
  const auto file = dir.write("quiz.jsonl",
                              "{\"context\": \"The capital of France is\", \"choices\": [\"Paris\", \"Rome\"], \"gold\": 0}\n"
                              "\n"
                              "{\"context\": \"2 + 2 =\", \"choices\": [\"3\", \"4\", \"5\"], \"gold\": 1}\n");
  const auto task = make("mc:" + file.string(), dir.path());
  EXPECT_EQ(task->name(), "mc:" + file.string());
  EXPECT_EQ(task->primary_metric(), "acc");
  const auto items = read_choice_jsonl(file);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].id, "3");  // the line number; blank lines are skipped
  EXPECT_EQ(items[0].question.continuations, (std::vector<std::string>{" Paris", " Rome"}));
  EXPECT_EQ(read_choice_jsonl(file, "")[0].question.continuations, (std::vector<std::string>{"Paris", "Rome"}));
  EXPECT_EQ(make("mc:" + file.string() + ",delimiter=none")->name(), "mc:" + file.string() + ",delimiter=none");
  testing::expect_error([&] { make("mc:" + file.string() + ",delimiter=tab"); }, {"delimiter must be 'space' or 'none'"});
  testing::expect_error([] { make("mc"); }, {"needs a file"});
}

TEST(ChoiceJsonl, MalformedLinesAreNamed) {
  testing::TempDir dir;
  const std::string good = "{\"context\": \"c\", \"choices\": [\"a\", \"b\"], \"gold\": 0}\n";
  auto expect_line_error = [&](const std::string& second_line, std::initializer_list<std::string> fragments) {
    const auto file = dir.write("bad.jsonl", good + second_line + "\n");
    std::vector<std::string> all{file.string() + ":2"};
    all.insert(all.end(), fragments);
    try {
      read_choice_jsonl(file);
      ADD_FAILURE() << "expected an error for " << second_line;
    } catch (const Error& e) {
      for (const auto& fragment : all) EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_line_error("{\"context\": \"c\", \"choices\": [\"a\", \"b\"], \"gold\": 0", {"malformed JSON"});
  expect_line_error("[1, 2]", {"expected a JSON object"});
  expect_line_error("{\"choices\": [\"a\", \"b\"], \"gold\": 0}", {"missing key 'context'"});
  expect_line_error("{\"context\": \"c\", \"choices\": \"a\", \"gold\": 0}", {"'choices' must be an array of strings"});
  expect_line_error("{\"context\": \"c\", \"choices\": [\"a\", 2], \"gold\": 0}", {"'choices' must be an array of strings"});
  expect_line_error("{\"context\": \"c\", \"choices\": [\"a\", \"b\"], \"gold\": 2}", {"gold 2 is not a choice index"});
  expect_line_error("{\"context\": \"c\", \"choices\": [\"a\", \"b\"], \"gold\": \"0\"}", {"'gold' must be an integer"});
  expect_line_error("{\"context\": \"c\", \"choices\": [\"a\"], \"gold\": 0}", {"at least 2 choices"});
  testing::expect_error([&] { read_choice_jsonl(dir.path() / "absent.jsonl"); }, {"absent.jsonl", "file not found"});
  testing::expect_error([&] { read_choice_jsonl(dir.write("empty.jsonl", "\n")); }, {"empty.jsonl", "no questions"});
  testing::expect_error([] { make("piqa_xl"); }, {"not a multiple-choice task"});
}

// ---- scoring on the testbed model ----

class MultipleChoiceScoring : public testing::TestbedSuite {};

TEST_F(MultipleChoiceScoring, MetricsFollowTheChoicesLogProbabilities) {
  const MultipleChoiceQuestion question =
      shared_context_question("The Python function len returns the", {"length of a list", "color of the sky"}, 0);
  const ItemResult result = score_question(*model_, *tokenizer_, question);
  const double first = loglikelihood(*model_, *tokenizer_, question.context(0), question.continuation(0)).logprob;
  const double second = loglikelihood(*model_, *tokenizer_, question.context(1), question.continuation(1)).logprob;
  EXPECT_DOUBLE_EQ(result.details.at("logprobs")[0].get<double>(), first);
  EXPECT_DOUBLE_EQ(result.details.at("logprobs")[1].get<double>(), second);
  EXPECT_EQ(result.metrics.at("acc"), first > second ? 1.0 : 0.0);
  // Both choices have 16 characters, so acc_norm must agree with acc.
  EXPECT_EQ(result.metrics.at("acc_norm"), result.metrics.at("acc"));
  EXPECT_EQ(result.details.at("gold"), 0);
}

TEST_F(MultipleChoiceScoring, WinograndeScoresTheSharedContinuationAfterEachOption) {
  const MultipleChoiceQuestion question = winogrande_question(
      "The trophy doesn't fit into the brown suitcase because the _ is too large.", "trophy", "suitcase", 0, "test");
  // The scored tokens are those of " is too large." whichever option precedes it.
  const Ids expected_continuation = tokenizer_->encode(" is too large.", false);
  EXPECT_EQ(expected_continuation, (Ids{335, 3398, 1486, 15}));
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_EQ(split_context_continuation(*tokenizer_, question.context(i), question.continuation(i)).continuation,
              expected_continuation);
  const ItemResult result = score_question(*model_, *tokenizer_, question);
  EXPECT_EQ(result.details.at("continuation_tokens"), (nlohmann::json{4, 4}));
}

TEST_F(MultipleChoiceScoring, TaskItemsRoundTripAndScore) {
  const auto task = make("mmlu:shots=1");
  const auto items = task->items(*tokenizer_);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].id, "abstract_algebra/0");
  auto question_only = items[0].input;
  question_only.erase("group");
  EXPECT_EQ(MultipleChoiceQuestion::from_json(items[0].input, "item").to_json(), question_only);
  const ItemResult result = task->score(*model_, *tokenizer_, items[0]);
  EXPECT_EQ(result.group, (nlohmann::json{{"subject", "abstract_algebra"}}));
  EXPECT_EQ(result.details.at("logprobs").size(), 4u);
  EXPECT_EQ(result.details.at("continuation_tokens"), (nlohmann::json{1, 1, 1, 1}));
  // MMLU's choices are single letters, so acc_norm equals acc.
  EXPECT_EQ(result.metrics.at("acc"), result.metrics.at("acc_norm"));
  EXPECT_EQ(result.metrics.at("acc"), result.details.at("prediction") == 1 ? 1.0 : 0.0);
}

}  // namespace
}  // namespace bifocal::eval
