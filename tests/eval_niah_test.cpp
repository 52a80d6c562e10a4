// The haystack builder (exact token lengths with the testbed tokenizer, insertion by depth) and
// the S-NIAH tasks: keys, values, prompt and needle wording, scoring, items and option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/haystack.h"
#include "eval/niah.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

const std::filesystem::path kEvalData = std::filesystem::path(BIFOCAL_GOLDEN_DIR) / ".." / "eval";

const Tokenizer& testbed_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(testing::testbed_model());
  return tokenizer;
}

std::int64_t count_tokens(const std::string& text, bool add_special_tokens) {
  return std::int64_t(testbed_tokenizer().encode(text, add_special_tokens).size());
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// Every byte sequence is well-formed UTF-8 (a cut inside a multi-byte character is not).
bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    i += length;
  }
  return true;
}

std::string wrap(const std::string& haystack) { return "Read this.\n" + haystack + "\nWhat was said?"; }

// ---------------------------------------------------------------------------------------------
// haystack.h

TEST(Haystack, CollapsesWhitespace) {
  EXPECT_EQ(collapse_whitespace("  one\n\ttwo   three \r\n"), "one two three");
  EXPECT_EQ(collapse_whitespace(" \n "), "");
}

TEST(Haystack, SplitsSentencesAfterEndPunctuationFollowedByASpace) {
  const auto sentences = split_sentences("He said \"Stop.\" Then he left! Why? It ended.So did this (really.) e.g. x");
  const std::vector<std::string> expected = {"He said \"Stop.\"", "Then he left!", "Why?", "It ended.So did this (really.)",
                                             "e.g.", "x"};
  EXPECT_EQ(sentences, expected);
  EXPECT_EQ(split_sentences("“Quoted.” Next one."), (std::vector<std::string>{"“Quoted.”", "Next one."}));
  EXPECT_TRUE(split_sentences("").empty());
}

TEST(Haystack, NoiseIsThePasskeyTestsFiveSentences) {
  const auto& noise = noise_sentences();
  ASSERT_EQ(noise.size(), 5u);
  EXPECT_EQ(noise.front(), "The grass is green.");
  EXPECT_EQ(noise.back(), "There and back again.");
}

TEST(Haystack, ReadsEssaySentencesInFileOrder) {
  const auto sentences = read_essay_sentences(kEvalData / "pg_essays");
  ASSERT_GT(sentences.size(), 10u);
  // todo.txt sorts before weird.txt; its first line runs the date into the text, as in the source.
  EXPECT_EQ(sentences.front().rfind("April 2012A palliative care nurse called Bronnie Ware", 0), 0u);
  EXPECT_EQ(sentences.back(), "Nor is this all you can do with");
  for (const auto& sentence : sentences) EXPECT_EQ(sentence.find('\n'), std::string::npos);
}

TEST(Haystack, EssayFolderErrorsNameTheFolder) {
  testing::expect_error([] { read_essay_sentences("/nonexistent/pg_essays"); }, {"/nonexistent/pg_essays", "no such folder"});
  const testing::TempDir empty;
  empty.write("notes.md", "not an essay");
  testing::expect_error([&] { read_essay_sentences(empty.path()); }, {empty.path().string(), "no essay (*.txt)"});
}

TEST(Haystack, FillsNoiseToExactLengths) {
  const Filler noise{.sentences = noise_sentences()};
  const std::vector<Insertion> needle = {{.depth = 0.5, .text = "The special magic number for calm-river is: 1234567."}};
  for (const std::int64_t length : {60, 61, 62, 127, 500, 1001, 2048, 4064}) {
    const Haystack haystack = fill_to_length(testbed_tokenizer(), noise, needle, length, wrap, true, "test");
    EXPECT_EQ(haystack.tokens, length);
    EXPECT_EQ(count_tokens(haystack.prompt, true), length) << "length " << length;
    EXPECT_EQ(haystack.prompt, wrap(haystack.haystack));
    EXPECT_EQ(occurrences(haystack.prompt, "1234567"), 1u);
  }
}

// With the noise filler some counts are out of reach: "…go." costs as much as "…go" (the '.'
// merges with the newline after the haystack) and the next word adds two tokens ('.' and
// " There"), and no cut of the last words lands in between. Measured with the testbed tokenizer:
// 156 tokens with this needle and prompt is one of them, so the filler starts a sentence later.
TEST(Haystack, StartsTheFillerLaterWhenNoCutReachesTheCount) {
  const Filler noise{.sentences = noise_sentences()};
  const std::string key = "quiet-harbor";
  const std::vector<Insertion> needle = {{.depth = 0.2, .text = niah_needle(key, "1234567", NiahValue::number)}};
  const auto render = [&](const std::string& text) { return niah_prompt(text, key, NiahValue::number); };
  const Haystack haystack = fill_to_length(testbed_tokenizer(), noise, needle, 156, render, true, "test");
  EXPECT_EQ(haystack.filler_first, 1u);
  EXPECT_EQ(haystack.haystack.rfind("The sky is blue.", 0), 0u);
  EXPECT_EQ(count_tokens(haystack.prompt, true), 156);
  EXPECT_EQ(fill_to_length(testbed_tokenizer(), noise, needle, 155, render, true, "test").filler_first, 0u);
}

TEST(Haystack, FillsEssaysToExactLengthsWithoutCuttingACharacter) {
  const Filler essays{.sentences = read_essay_sentences(kEvalData / "pg_essays")};
  for (const std::int64_t length : {40, 333, 777, 1500}) {  // 1,500 tokens repeat the two excerpts
    const Haystack haystack = fill_to_length(testbed_tokenizer(), essays, {}, length, wrap, false, "test");
    EXPECT_EQ(count_tokens(haystack.prompt, false), length);
    EXPECT_TRUE(valid_utf8(haystack.prompt));
  }
  // A context counted alone (BABILong's way): exact too.
  const auto same = [](const std::string& text) { return text; };
  const Haystack alone = fill_to_length(testbed_tokenizer(), essays, {}, 256, same, false, "test");
  EXPECT_EQ(count_tokens(alone.haystack, false), 256);
}

TEST(Haystack, PutsTheNeedleAtItsDepthWithinOneSentence) {
  const Filler noise{.sentences = noise_sentences()};
  const std::string needle = "The special magic number for calm-river is: 7654321.";
  for (const double depth : {0.0, 0.1, 0.25, 0.5, 0.9, 1.0}) {
    const Haystack haystack = fill_to_length(testbed_tokenizer(), noise, {{.depth = depth, .text = needle}}, 1024, wrap,
                                             true, "test");
    ASSERT_EQ(occurrences(haystack.haystack, needle), 1u);
    // Every noise sentence ends in one '.', so the dots before the needle count the sentences.
    const std::string before = haystack.haystack.substr(0, haystack.haystack.find(needle));
    const auto sentences_before = std::size_t(std::count(before.begin(), before.end(), '.'));
    EXPECT_EQ(sentences_before, haystack.boundaries.at(0));
    EXPECT_NEAR(double(sentences_before), depth * double(haystack.filler_sentences), 1.0) << "depth " << depth;
    EXPECT_GT(haystack.filler_sentences, 150u);  // about 1,000 tokens of 5-token sentences
  }
}

TEST(Haystack, InsertionsAtOneBoundaryKeepTheirOrder) {
  const Filler noise{.sentences = noise_sentences()};
  const std::vector<Insertion> facts = {{.depth = 0.3, .text = "Fact A."}, {.depth = 0.3, .text = "Fact B."},
                                        {.depth = 0.8, .text = "Fact C."}};
  const auto same = [](const std::string& text) { return text; };
  const Haystack haystack = fill_to_length(testbed_tokenizer(), noise, facts, 300, same, false, "test");
  const std::size_t a = haystack.haystack.find("Fact A."), b = haystack.haystack.find("Fact B."),
                    c = haystack.haystack.find("Fact C.");
  EXPECT_NE(haystack.haystack.find("Fact A. Fact B."), std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_EQ(haystack.boundaries[0], haystack.boundaries[1]);
}

TEST(Haystack, WithoutFillerIsTheInsertionsAlone) {
  const auto same = [](const std::string& text) { return text; };
  const Haystack haystack = haystack_without_filler(testbed_tokenizer(), {{.depth = 0.9, .text = "First."}, {.depth = 0.1, .text = "Second."}},
                                                    same, false);
  EXPECT_EQ(haystack.haystack, "First. Second.");  // all at boundary 0: in the order given
  EXPECT_EQ(haystack.tokens, count_tokens("First. Second.", false));
  EXPECT_EQ(haystack.filler_sentences, 0u);
}

TEST(Haystack, ATargetShorterThanThePromptIsAnError) {
  const Filler noise{.sentences = noise_sentences()};
  const std::int64_t bare = count_tokens(wrap(""), true);
  testing::expect_error([&] { fill_to_length(testbed_tokenizer(), noise, {}, bare - 1, wrap, true, "--task niah_single_1"); },
                        {"--task niah_single_1", "without any filler", "more than the " + std::to_string(bare - 1)});
  EXPECT_EQ(fill_to_length(testbed_tokenizer(), noise, {}, bare, wrap, true, "test").haystack, "");
}

TEST(Haystack, ParsesLengthAndSampleOptions) {
  EXPECT_EQ(parse_context_lengths("512,1024,4096", "t", 1), (std::vector<std::int64_t>{512, 1024, 4096}));
  EXPECT_EQ(parse_context_lengths("0", "t", 0), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(format_context_lengths({0, 1024}), "0,1024");
  EXPECT_EQ(parse_sample_count("7", "t"), 7);
  testing::expect_error([] { parse_context_lengths("512,abc", "--task x", 1); }, {"--task x", "'abc' is not a number of tokens"});
  testing::expect_error([] { parse_context_lengths("512,", "--task x", 1); }, {"'' is not a number of tokens"});
  testing::expect_error([] { parse_context_lengths("-5", "--task x", 0); }, {"'-5' is not a number"});
  testing::expect_error([] { parse_context_lengths("20", "--task x", 33); }, {"20 is below the smallest length, 33"});
  testing::expect_error([] { parse_context_lengths("512,512", "--task x", 1); }, {"512 is given twice"});
  testing::expect_error([] { parse_sample_count("0", "--task x"); }, {"--task x", "samples=0"});
  testing::expect_error([] { parse_sample_count("many", "--task x"); }, {"samples=many"});
}

// ---------------------------------------------------------------------------------------------
// niah.h

TEST(Niah, VariantsAreRulersThree) {
  const auto one = niah_variant("niah_single_1"), two = niah_variant("niah_single_2"), three = niah_variant("niah_single_3");
  ASSERT_TRUE(one && two && three);
  EXPECT_EQ(one->filler, NiahFiller::noise);
  EXPECT_EQ(one->value, NiahValue::number);
  EXPECT_EQ(one->max_new_tokens, 32);
  EXPECT_EQ(two->filler, NiahFiller::essays);
  EXPECT_EQ(two->value, NiahValue::number);
  EXPECT_EQ(three->filler, NiahFiller::essays);
  EXPECT_EQ(three->value, NiahValue::uuid);
  EXPECT_EQ(three->max_new_tokens, 64);
  EXPECT_FALSE(niah_variant("niah_single_4"));
  EXPECT_FALSE(niah_variant("niah_multikey_1"));
}

TEST(Niah, KeysAndValuesHaveTheirFormats) {
  SeededRandom random(42);
  for (int i = 0; i < 200; ++i) {
    const std::string key = niah_key(random);
    const std::size_t dash = key.find('-');
    ASSERT_NE(dash, std::string::npos);
    EXPECT_GT(dash, 1u);
    EXPECT_GT(key.size(), dash + 2);
    EXPECT_TRUE(std::all_of(key.begin(), key.end(), [](char c) { return c == '-' || (c >= 'a' && c <= 'z'); })) << key;

    const std::string number = niah_number(random);
    ASSERT_EQ(number.size(), 7u);
    EXPECT_NE(number[0], '0');
    EXPECT_TRUE(std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }));

    const std::string uuid = niah_uuid(random);
    ASSERT_EQ(uuid.size(), 36u);
    for (const std::size_t at : {8u, 13u, 18u, 23u}) EXPECT_EQ(uuid[at], '-') << uuid;
    EXPECT_EQ(uuid[14], '4') << uuid;                                            // version 4
    EXPECT_NE(std::string("89ab").find(uuid[19]), std::string::npos) << uuid;   // RFC 4122 variant
    EXPECT_TRUE(std::all_of(uuid.begin(), uuid.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }));
  }
  SeededRandom first(7), second(7);
  EXPECT_EQ(niah_uuid(first), niah_uuid(second));
}

TEST(Niah, NeedleAndPromptWording) {
  EXPECT_EQ(niah_needle("calm-river", "1234567", NiahValue::number), "The special magic number for calm-river is: 1234567.");
  EXPECT_EQ(niah_needle("calm-river", "ab-cd", NiahValue::uuid), "The special magic uuid for calm-river is: ab-cd.");
  EXPECT_EQ(niah_prompt("HAY", "calm-river", NiahValue::number),
            "A special magic number is hidden in the text below. Read the text carefully and remember the special "
            "magic number, because you will be asked for it afterwards.\nHAY\nWhat is the special magic number for "
            "calm-river mentioned in the text above? The special magic number for calm-river mentioned in the text "
            "above is");
}

// testbed_needle speaks tools/testbed/procedural_retrieval.py's needle template (the first of
// _NEEDLE_TEMPLATES, its preamble, and the "Question: … Answer:" frame of inline_question).
TEST(Niah, TestbedWordingIsTheTrainingDocumentsOwn) {
  const auto variant = niah_variant("testbed_needle");
  ASSERT_TRUE(variant.has_value());
  EXPECT_EQ(variant->wording, NiahWording::testbed);
  EXPECT_EQ(variant->filler, NiahFiller::essays);
  EXPECT_EQ(variant->value, NiahValue::number);
  EXPECT_EQ(niah_variant("niah_single_2")->wording, NiahWording::ruler);
  EXPECT_EQ(niah_needle("calm-river", "1234567", NiahValue::number, NiahWording::testbed),
            "The special magic number for calm-river is 1234567.");
  EXPECT_EQ(niah_prompt("HAY", "calm-river", NiahValue::number, NiahWording::testbed),
            "Some special values are hidden in the text below. Remember them.\nHAY\nQuestion: What is the special "
            "magic number for calm-river? Answer: The special magic number for calm-river is");
}

TEST(Niah, DepthsSpreadFromStartToEnd) {
  EXPECT_DOUBLE_EQ(niah_depth(0, 20), 0.0);
  EXPECT_DOUBLE_EQ(niah_depth(19, 20), 1.0);
  EXPECT_DOUBLE_EQ(niah_depth(1, 3), 0.5);
  EXPECT_DOUBLE_EQ(niah_depth(0, 1), 0.5);
}

TEST(Niah, ScoresTheShareOfValuesFound) {
  EXPECT_DOUBLE_EQ(niah_score(" 1234567.", {"1234567"}), 1.0);
  EXPECT_DOUBLE_EQ(niah_score(" 1234568.", {"1234567"}), 0.0);
  EXPECT_DOUBLE_EQ(niah_score(" 123456", {"1234567"}), 0.0);  // a cut-off value is not found
  EXPECT_DOUBLE_EQ(niah_score(" 9A1B-77C2", {"9a1b-77c2"}), 1.0);  // case is ignored
  EXPECT_DOUBLE_EQ(niah_score("1111111 and 3333333", {"1111111", "2222222", "3333333"}), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(niah_score("", {"1111111", "2222222"}), 0.0);
  EXPECT_DOUBLE_EQ(niah_score("anything", {}), 0.0);
}

TaskContext eval_context(std::uint64_t seed = 1234) {
  TaskContext context;
  context.data_dir = kEvalData;
  context.seed = seed;
  return context;
}

TEST(Niah, TestbedNeedleItemsUseItsWordingAtExactLengths) {
  const auto task = make_niah_task(TaskSpec::parse("testbed_needle:lengths=512,samples=2"), eval_context());
  EXPECT_EQ(task->name(), "testbed_needle:lengths=512,samples=2");
  const auto items = task->items(testbed_tokenizer());
  ASSERT_EQ(items.size(), 2u);
  for (const auto& item : items) {
    const auto prompt = item.input.at("prompt").get<std::string>();
    const auto key = item.input.at("key").get<std::string>();
    const auto value = item.input.at("answers").at(0).get<std::string>();
    EXPECT_EQ(count_tokens(prompt, true), 512 - 32);
    EXPECT_EQ(occurrences(prompt, niah_needle(key, value, NiahValue::number, NiahWording::testbed)), 1u);
    EXPECT_EQ(occurrences(prompt, " is: "), 0u);  // none of RULER's wording
    EXPECT_TRUE(prompt.ends_with("Answer: The special magic number for " + key + " is"));
  }
}

TEST(Niah, ItemsHaveExactLengthsOneNeedleAndSpreadDepths) {
  const auto task = make_niah_task(TaskSpec::parse("niah_single_1:lengths=256,512,samples=3"), eval_context());
  EXPECT_EQ(task->name(), "niah_single_1:lengths=256,512,samples=3");
  EXPECT_EQ(task->primary_metric(), "score");
  const auto items = task->items(testbed_tokenizer());
  ASSERT_EQ(items.size(), 6u);
  const std::vector<std::string> ids = {"256/0", "512/0", "256/1", "512/1", "256/2", "512/2"};
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& input = items[i].input;
    EXPECT_EQ(items[i].id, ids[i]);
    const auto length = input.at("context").get<std::int64_t>();
    const auto prompt = input.at("prompt").get<std::string>();
    EXPECT_EQ(count_tokens(prompt, true), length - 32);  // the answer budget completes the length
    EXPECT_EQ(input.at("prompt_tokens").get<std::int64_t>(), length - 32);
    const auto value = input.at("answers").at(0).get<std::string>();
    const auto key = input.at("key").get<std::string>();
    EXPECT_EQ(occurrences(prompt, niah_needle(key, value, NiahValue::number)), 1u);
    EXPECT_EQ(occurrences(prompt, value), 1u);
    EXPECT_DOUBLE_EQ(input.at("depth").get<double>(), niah_depth(int(i / 2), 3));
    EXPECT_EQ(input.at("max_new_tokens").get<int>(), 32);
    EXPECT_TRUE(prompt.ends_with("What is the special magic number for " + key +
                                 " mentioned in the text above? The special magic number for " + key +
                                 " mentioned in the text above is"));
  }
  // Depth 0 puts the needle first in the haystack, depth 1 after the last whole sentence.
  EXPECT_EQ(items[0].input.at("needle_sentence").get<std::size_t>(), 0u);
  EXPECT_EQ(items[5].input.at("needle_sentence").get<std::size_t>(), items[5].input.at("filler_sentences").get<std::size_t>());
}

TEST(Niah, ItemsAreFixedByTheSeed) {
  const auto spec = "niah_single_1:lengths=300,samples=2";
  const auto first = make_niah_task(TaskSpec::parse(spec), eval_context(5))->items(testbed_tokenizer());
  const auto again = make_niah_task(TaskSpec::parse(spec), eval_context(5))->items(testbed_tokenizer());
  const auto other = make_niah_task(TaskSpec::parse(spec), eval_context(6))->items(testbed_tokenizer());
  ASSERT_EQ(first.size(), 2u);
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].id, again[i].id);
    EXPECT_EQ(first[i].input, again[i].input);
    EXPECT_NE(first[i].input.at("answers"), other[i].input.at("answers"));
  }
  EXPECT_NE(first[0].input.at("key"), first[1].input.at("key"));
}

TEST(Niah, EssayVariantsUseEssaysAndUuids) {
  const auto task = make_niah_task(TaskSpec::parse("niah_single_3:lengths=700,samples=1"), eval_context());
  const auto items = task->items(testbed_tokenizer());
  ASSERT_EQ(items.size(), 1u);
  const auto prompt = items[0].input.at("prompt").get<std::string>();
  EXPECT_EQ(count_tokens(prompt, true), 700 - 64);
  EXPECT_EQ(items[0].input.at("answers").at(0).get<std::string>().size(), 36u);
  EXPECT_NE(prompt.find("Bronnie Ware"), std::string::npos);
  EXPECT_NE(prompt.find("special magic uuid for"), std::string::npos);
  EXPECT_EQ(prompt.find("The grass is green."), std::string::npos);
  EXPECT_TRUE(valid_utf8(prompt));
}

TEST(Niah, DefaultsAreRulersLengthsAndTwentySamples) {
  EXPECT_EQ(make_niah_task(TaskSpec::parse("niah_single_1"), eval_context())->name(),
            "niah_single_1:lengths=512,1024,2048,4096,samples=20");
}

TEST(Niah, BadOptionsAndMissingDataAreErrors) {
  testing::expect_error([] { make_niah_task(TaskSpec::parse("niah_single_1:depth=3"), eval_context()); },
                        {"niah_single_1", "unknown option 'depth'"});
  testing::expect_error([] { make_niah_task(TaskSpec::parse("niah_single_1:lengths=512,x"), eval_context()); },
                        {"--task niah_single_1", "'x' is not a number of tokens"});
  testing::expect_error([] { make_niah_task(TaskSpec::parse("niah_single_3:lengths=64"), eval_context()); },
                        {"--task niah_single_3", "64 is below the smallest length, 65"});
  testing::expect_error([] { make_niah_task(TaskSpec::parse("niah_single_1:samples=0"), eval_context()); },
                        {"samples=0"});
  testing::expect_error([] { make_niah_task(TaskSpec::parse("niah_single_9"), eval_context()); },
                        {"niah_single_9", "not an S-NIAH task"});
  TaskContext no_data = eval_context();
  no_data.data_dir = "/nonexistent/data";
  testing::expect_error([&] { make_niah_task(TaskSpec::parse("niah_single_2"), no_data); },
                        {"/nonexistent/data/pg_essays", "no such folder"});
  EXPECT_NO_THROW(make_niah_task(TaskSpec::parse("niah_single_1"), no_data));  // noise needs no data
  // A length too short for the instructions fails when the items are made, naming the length.
  const auto short_task = make_niah_task(TaskSpec::parse("niah_single_1:lengths=60"), eval_context());
  testing::expect_error([&] { short_task->items(testbed_tokenizer()); }, {"niah_single_1 (length 60)", "without any filler"});
}

TEST(Niah, ScoresAnItemWithTheTestbedModel) {
  const Model model = Model::load(testing::testbed_model());
  const auto task = make_niah_task(TaskSpec::parse("niah_single_1:lengths=256,samples=1"), eval_context());
  const auto items = task->items(testbed_tokenizer());
  const ItemResult result = task->score(model, testbed_tokenizer(), items.at(0));
  ASSERT_TRUE(result.metrics.contains("score"));
  const double score = result.metrics.at("score");
  EXPECT_TRUE(score == 0.0 || score == 1.0);
  EXPECT_EQ(result.group, nlohmann::json({{"context", 256}}));
  const auto output = result.details.at("output").get<std::string>();
  EXPECT_FALSE(output.empty());
  EXPECT_EQ(score, niah_score(output, result.details.at("answers").get<std::vector<std::string>>()));
  EXPECT_DOUBLE_EQ(result.details.at("depth").get<double>(), 0.5);
}

}  // namespace
}  // namespace bifocal::eval
