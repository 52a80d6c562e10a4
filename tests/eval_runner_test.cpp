// The eval harness's own machinery: task specs, the results file (resume, an interrupted last
// line), --limit/--shard selection, the report's aggregation and recovery, the perplexity task,
// and `bifocal eval` end to end (a rerun resumes and scores nothing twice).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "cli_runner.h"
#include "eval/eval_comparisons.h"
#include "eval/eval_report.h"
#include "eval/eval_results.h"
#include "eval/eval_runner.h"
#include "eval/perplexity.h"
#include "eval/perplexity_task.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

TEST(EvalTaskSpec, NameOptionsListsAndFiles) {
  const TaskSpec plain = TaskSpec::parse("gsm8k");
  EXPECT_EQ(plain.name, "gsm8k");
  EXPECT_TRUE(plain.options.empty());
  TaskSpec niah = TaskSpec::parse("niah_single_1:lengths=512,1024,2048,samples=3");
  EXPECT_EQ(niah.name, "niah_single_1");
  EXPECT_EQ(niah.take("lengths"), "512,1024,2048");
  EXPECT_EQ(niah.take("samples"), "3");
  EXPECT_FALSE(niah.take("samples"));
  niah.expect_no_more_options();
  TaskSpec mc = TaskSpec::parse("mc:data/my tasks.jsonl");
  EXPECT_EQ(mc.take("file"), "data/my tasks.jsonl");
  TaskSpec extra = TaskSpec::parse("perplexity:a.txt,context=64,colour=red");
  extra.take("file");
  extra.take("context");
  testing::expect_error([&] { extra.expect_no_more_options(); }, {"--task perplexity", "unknown option 'colour'"});
  testing::expect_error([] { TaskSpec::parse(":x=1"); }, {"no task name"});
  testing::expect_error([] { TaskSpec::parse("a:x=1,x=2"); }, {"option 'x' given twice"});
}

TEST(EvalRunner, ShardsAndLimit) {
  std::vector<EvalItem> items;
  for (int i = 0; i < 10; ++i) items.push_back({.id = std::to_string(i), .input = {}});
  auto ids = [](const std::vector<EvalItem>& v) {
    std::string s;
    for (const auto& item : v) s += item.id;
    return s;
  };
  EXPECT_EQ(ids(select_items(items, 0, 0, 1)), "0123456789");
  EXPECT_EQ(ids(select_items(items, 4, 0, 1)), "0123");
  EXPECT_EQ(ids(select_items(items, 0, 1, 3)), "147");
  EXPECT_EQ(ids(select_items(items, 5, 2, 3)), "2");
  EXPECT_EQ(parse_shard("2/4"), std::make_pair(2, 4));
  for (const char* bad : {"4/4", "-1/2", "1", "a/b", "1/0", "1/2x", "+1/2", " 1/2", "1/ 2", "0/99999999999"})
    testing::expect_error([&] { parse_shard(bad); }, {"--shard", bad});
}

ResultRecord record(const std::string& task, const std::string& mixer, const std::string& id, double acc, int context) {
  ResultRecord r{.task = task, .mixer = mixer, .id = id, .result = {}};
  r.result.metrics["acc"] = acc;
  r.result.group = {{"context", context}};
  return r;
}

TEST(EvalResults, ResumeKeepsWhatWasWrittenAndDropsAnInterruptedLine) {
  testing::TempDir dir;
  const auto path = dir.path() / "out" / "results.jsonl";
  {
    ResultsFile file(path);
    file.append(record("t", "full", "a", 1, 512));
    file.append(record("t", "full", "b", 0, 1024));
  }
  std::ofstream(path, std::ios::app) << R"({"task": "t", "mixer": "full", "id": "c", "metr)";  // killed mid-write
  {
    ResultsFile file(path);
    EXPECT_EQ(file.records().size(), 2u);
    EXPECT_TRUE(file.contains("t", "full", "b"));
    EXPECT_FALSE(file.contains("t", "full", "c"));
    EXPECT_FALSE(file.contains("t", "swa", "a"));
    file.append(record("t", "full", "c", 1, 512));
  }
  const ResultsFile reread(path);
  ASSERT_EQ(reread.records().size(), 3u);
  EXPECT_EQ(reread.records()[2].id, "c");
  EXPECT_EQ(reread.records()[1].result.metrics.at("acc"), 0.0);
  // A broken line in the middle is not an interruption: an error naming the file and line.
  const auto broken = dir.write("broken.jsonl", "{\"task\": \"t\"}\n");
  testing::expect_error([&] { ResultsFile{broken}; }, {"broken.jsonl:1", "missing string field 'mixer'"});
}

TEST(EvalReport, MeansRecoveryAndStrata) {
  const std::vector<ResultRecord> records = {
      record("t", "full", "a", 1, 512), record("t", "full", "b", 1, 1024), record("t", "full", "c", 0, 1024),
      record("t", "swa", "a", 1, 512),  record("t", "swa", "b", 0, 1024),  record("t", "swa", "c", 0, 1024),
      record("u", "full", "a", 0, 512), record("u", "swa", "a", 1, 512)};
  const EvalReport report = aggregate(records, {"full", "swa"}, {{"t", "acc"}, {"u", "acc"}});
  ASSERT_EQ(report.tasks.size(), 2u);
  const TaskScores& t = report.tasks[0];
  EXPECT_EQ(t.mixers[0].items, 3u);
  EXPECT_NEAR(t.mixers[0].mean.at("acc"), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(t.mixers[1].mean.at("acc"), 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(t.recovery(0), 1.0, 1e-12);
  EXPECT_NEAR(t.recovery(1), 0.5, 1e-12);
  EXPECT_TRUE(std::isnan(report.tasks[1].recovery(1)));  // the teacher scored 0: no ratio
  EXPECT_NEAR(report.mean_recovery()[1], 0.5, 1e-12);    // the NaN task is skipped
  const auto& by_context = t.mixers[1].by_group.at("context");
  EXPECT_EQ(by_context.at("1024").second, 2u);
  EXPECT_NEAR(by_context.at("512").first, 1.0, 1e-12);
  const std::string md = report_markdown(report);
  EXPECT_NE(md.find("| `swa` | 3 | 0.333 | 0.500 |"), std::string::npos) << md;
  EXPECT_NE(md.find("acc by context"), std::string::npos) << md;
  const auto plots = report_plots(report);
  ASSERT_FALSE(plots.empty());
  EXPECT_EQ(plots[0].first, "t_context.svg");
}

// Answer lengths are binned into the length strata (one column per stratum, named by its lower
// bound), not one column per distinct length.
TEST(EvalReport, AnswerLengthsAreBinnedIntoStrata) {
  auto generation = [](const std::string& id, double pass, double length) {
    ResultRecord r{.task = "g", .mixer = "full", .id = id, .result = {}};
    r.result.metrics["pass@1"] = pass;
    r.result.group = {{"answer_length", length}};
    return r;
  };
  const std::vector<ResultRecord> records = {generation("1", 1, 100), generation("2", 0, 200),
                                             generation("3", 1, 300), generation("4", 1, 5000)};
  const EvalReport report = aggregate(records, {"full"}, {{"g", "pass@1"}}, {256, 1000});
  const auto& bins = report.tasks[0].mixers[0].by_group.at("answer_length");
  ASSERT_EQ(bins.size(), 3u);
  EXPECT_EQ(bins.at("0"), (std::pair<double, std::size_t>{1.0, 2u}));
  EXPECT_EQ(bins.at("256"), (std::pair<double, std::size_t>{1.0, 1u}));
  EXPECT_EQ(bins.at("1000"), (std::pair<double, std::size_t>{1.0, 1u}));
  EXPECT_NE(report_markdown(report).find("pass@1 by answer_length (stratum"), std::string::npos);
}

// Against the teacher: a paired bootstrap over the items both scored; with answer lengths, by
// stratum of the teacher's lengths, and the count of long correct answers.
TEST(EvalComparisons, PairedDifferencesOverallAndByAnswerLength) {
  auto generation = [](const std::string& mixer, const std::string& id, double pass, double length) {
    ResultRecord r{.task = "g", .mixer = mixer, .id = id, .result = {}};
    r.result.metrics["pass@1"] = pass;
    r.result.group = {{"answer_length", length}};
    r.result.details = {{"samples", {{{"length", length}, {"correct", pass > 0.5}}}}};
    return r;
  };
  std::vector<ResultRecord> records = {
      generation("full", "1", 1, 100),  generation("full", "2", 1, 5000), generation("full", "3", 0, 6000),
      generation("swa", "1", 1, 120),   generation("swa", "2", 0, 4500),  generation("swa", "3", 0, 7000),
      record("t", "full", "a", 1, 512), record("t", "swa", "a", 1, 512),
      generation("swa", "4", 1, 10)};  // an item the teacher lacks is left out
  const Comparisons c = compare_to_teacher(records, {"full", "swa"}, {{"g", "pass@1"}, {"t", "acc"}});
  // Overall: differences 0, −1, 0 → mean −1/3; short stratum (teacher < 4000): item 1 only.
  const auto& strata = c.json.at("g").at("swa").at("strata");
  ASSERT_EQ(strata.size(), 3u);
  EXPECT_EQ(strata[0].at("problems"), 3);
  EXPECT_NEAR(strata[0].at("difference").at("mean_difference").get<double>(), -1.0 / 3.0, 1e-12);
  EXPECT_EQ(strata[1].at("problems"), 1);
  EXPECT_NEAR(strata[1].at("difference").at("mean_difference").get<double>(), 0.0, 1e-12);
  EXPECT_EQ(strata[2].at("problems"), 2);
  EXPECT_NEAR(strata[2].at("difference").at("mean_difference").get<double>(), -0.5, 1e-12);
  EXPECT_EQ(c.json.at("g").at("long_answers").at("full").at("correct_longer"), 1);
  EXPECT_EQ(c.json.at("g").at("long_answers").at("swa").at("correct_longer"), 0);
  // Identical scores: difference 0 with a zero-width interval.
  const auto& same = c.json.at("t").at("swa").at("overall");
  EXPECT_EQ(same.at("mean_difference"), 0.0);
  EXPECT_EQ(same.at("lower"), 0.0);
  EXPECT_EQ(same.at("upper"), 0.0);
  EXPECT_NE(c.markdown.find("### g: each mixer − teacher `full`"), std::string::npos) << c.markdown;
}

// The perplexity task's NLL equals the one compare's machinery computes from the same logits.
TEST(EvalPerplexityTask, ScoresEveryNextTokenOfEachWindow) {
  testing::TempDir dir;
  const auto text = dir.write("held_out.txt", "The quick brown fox jumps over the lazy dog. It was not amused, and said so twice.");
  const auto model_dir = testing::golden_model("qwen3_bf16");
  const Model model = Model::load(model_dir);
  const Tokenizer tokenizer = Tokenizer::from_dir(model_dir);
  const auto task = make_perplexity_task(TaskSpec::parse("perplexity:" + text.string() + ",context=16"), {});
  const auto items = task->items(tokenizer);
  ASSERT_GE(items.size(), 2u);
  const auto tokens = items[0].input.at("tokens").get<std::vector<std::int32_t>>();
  EXPECT_EQ(tokens.size(), 16u);
  const ItemResult result = task->score(model, tokenizer, items[0]);
  std::vector<float> logits(tokens.size() * model.config().vocab_size);
  Session session = model.new_session(16);
  model.forward(session, tokens, logits, true);
  double nll = 0;
  const std::size_t vocab = model.config().vocab_size;
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i)
    nll += bifocal::token_nll(std::span<const float>(logits.data() + i * vocab, vocab), tokens[i + 1]);
  EXPECT_NEAR(result.metrics.at("nll_per_token"), nll / 15.0, 1e-6);  // fp32 logits of two chunkings
  EXPECT_GE(result.metrics.at("next_token_accuracy"), 0.0);
  EXPECT_LE(result.metrics.at("next_token_accuracy"), 1.0);
  testing::expect_error([] { make_perplexity_task(TaskSpec::parse("perplexity:/no/such/file.txt"), {}); },
                        {"/no/such/file.txt", "cannot read"});
  // context= is a whole number >= 2: trailing text is refused, not read as its leading digits.
  for (const char* bad : {"1", "16x", "x", "-16", "3000000000"})
    testing::expect_error([&] { make_perplexity_task(TaskSpec::parse("perplexity:" + text.string() + ",context=" + bad), {}); },
                          {"--task perplexity", std::string("context=") + bad});
}

TEST(EvalCli, ARerunResumesAndWritesTheReport) {
  testing::TempDir dir;
  const auto text = dir.write("held_out.txt", std::string(400, 'a') + " The end of the text, said the model.");
  const std::string out = (dir.path() / "run").string();
  const std::string command = "eval -m " + testing::golden_model("qwen3_bf16").string() +
                              " --mixer full --mixer swa:window=8,sinks=2 --task perplexity:" + text.string() +
                              ",context=32 --limit 2 --length-edges 16 --length-edges 64 --out " + out;
  const auto first = testing::run_cli(command);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("scored 4 items, 0 already"), std::string::npos) << first.output;
  const auto second = testing::run_cli(command);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("scored 0 items, 4 already"), std::string::npos) << second.output;
  std::ifstream results(dir.path() / "run" / "results.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(results, line)) ++lines;
  EXPECT_EQ(lines, 4);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "run" / "report.md"));
  // The report's command reproduces the run, the answer-length strata included.
  std::ifstream report_file(dir.path() / "run" / "report.md");
  const std::string report((std::istreambuf_iterator<char>(report_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("--length-edges 16 --length-edges 64 --long-threshold 4000 --limit 2"), std::string::npos)
      << report.substr(0, 600);
  EXPECT_NE(second.output.find("`swa:window=8,sinks=2` | 2 |"), std::string::npos) << second.output;
  const auto bad = testing::run_cli("eval -m " + testing::golden_model("qwen3_bf16").string() +
                                    " --mixer full --task nonsense --out " + out);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("unknown task"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace bifocal::eval
