// The `bifocal` binary as a user runs it: help texts, generation end to end against HF's greedy
// tokens, prompt sources, stop strings, and one-line errors with a non-zero exit.
#include <gtest/gtest.h>

#include <cstdio>

#include "bifocal/tokenizer.h"
#include "cli_runner.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::CommandResult;
using testing::run_cli;
std::string quote(const std::string& s) { return testing::shell_quote(s); }

const std::string kModel = testing::golden_model("qwen2_fp32_tied").string();

TEST(Cli, HelpDescribesEverySubcommandAndFlag) {
  const auto top = run_cli("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.output.find("generate"), std::string::npos);
  EXPECT_NE(top.output.find("tokenize"), std::string::npos);
  const auto generate = run_cli("generate --help");
  EXPECT_EQ(generate.exit_code, 0);
  for (const char* flag : {"--model", "--prompt", "--prompt-file", "--max-tokens", "--temperature", "--top-k", "--top-p",
                           "--seed", "--stop", "--ignore-eos"})
    EXPECT_NE(generate.output.find(flag), std::string::npos) << flag;
}

TEST(Cli, GreedyGenerationPrintsHFTokensThenStats) {
  const auto reference = testing::GoldenReference::load("qwen2_fp32_tied");
  const Tokenizer tokenizer = Tokenizer::from_dir(kModel);
  const std::string prompt = tokenizer.decode(reference.input_ids);
  ASSERT_EQ(tokenizer.encode(prompt, true), reference.input_ids);
  testing::TempDir dir;
  const auto prompt_file = dir.write("prompt.txt", prompt);
  const auto result = run_cli("generate -m " + quote(kModel) + " -f " + quote(prompt_file.string()) +
                              " --temperature 0 --max-tokens 16 --ignore-eos");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string expected = tokenizer.decode(reference.greedy_ids, /*skip_special_tokens=*/true);
  EXPECT_EQ(result.output.substr(0, expected.size()), expected);
  EXPECT_NE(result.output.find("prompt tokens: " + std::to_string(reference.input_ids.size())), std::string::npos);
  EXPECT_NE(result.output.find("generated tokens: 16"), std::string::npos);
  EXPECT_NE(result.output.find("decode:"), std::string::npos);
  EXPECT_NE(result.output.find("cache:"), std::string::npos);
}

TEST(Cli, PromptFromStandardInputAndStopString) {
  testing::TempDir dir;
  const auto prompt_file = dir.write("prompt.txt", "def f(x):\n    return");
  const auto full = run_cli("generate -m " + quote(kModel) + " --temperature 0 --max-tokens 12 --ignore-eos", prompt_file.string());
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const std::string text = full.output.substr(0, full.output.find("\nprompt tokens:"));
  ASSERT_GE(text.size(), 4u);
  const std::string stop = text.substr(2, 2);
  const auto cut = run_cli("generate -m " + quote(kModel) + " --temperature 0 --max-tokens 12 --ignore-eos --stop " +
                           quote(stop) + " -p -", prompt_file.string());
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_EQ(cut.output.substr(0, cut.output.find('\n')), text.substr(0, text.find(stop)));
  EXPECT_NE(cut.output.find("stop: stop string"), std::string::npos);
}

TEST(Cli, SamplingIsReproducibleWithASeed) {
  const std::string args = "generate -m " + quote(kModel) + " -p 'Hello' --temperature 1.2 --top-k 50 --top-p 0.9 --seed 7 -n 20 --ignore-eos";
  const auto a = run_cli(args), b = run_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output.substr(0, a.output.find("prefill:")), b.output.substr(0, b.output.find("prefill:")));
}

// DESIGN.md: a window keeps memory fixed however long the generation runs. 3 layers × 64 slots ×
// keys and values × 2 KV heads × 16 dims × 4 bytes (fp32 on the CPU) = 49,152 bytes.
TEST(Cli, GeneratesOneHundredThousandTokensInAFixedWindow) {
  const auto result = run_cli("generate -m " + quote(kModel) + " -p 'Once' --mixer swa:window=64,sinks=4 -n 100000 --ignore-eos --seed 3");
  ASSERT_EQ(result.exit_code, 0) << result.output.substr(result.output.size() - std::min<std::size_t>(500, result.output.size()));
  EXPECT_NE(result.output.find("generated tokens: 100000 |"), std::string::npos);
  EXPECT_NE(result.output.find("cache: 49152 bytes"), std::string::npos);
}

TEST(Cli, MixerFlagsAreCheckedAndUntrainedMixersWarned) {
  const auto bifocal = run_cli("generate -m " + quote(kModel) + " -p 'Hi' -n 4 --mixer bifocal:window=16");
  EXPECT_EQ(bifocal.exit_code, 0) << bifocal.output;
  EXPECT_NE(bifocal.output.find("warning: the mixer is untrained"), std::string::npos) << bifocal.output;
  const auto over = run_cli("generate -m " + quote(kModel) + " -p 'Hi' -n 4 --mixer swa:window=64,sinks=4 --budget 32");
  EXPECT_NE(over.exit_code, 0);
  EXPECT_NE(over.output.find("over the budget of 32"), std::string::npos) << over.output;
  const auto bad = run_cli("generate -m " + quote(kModel) + " -p 'Hi' --mixer swa:window=64,sinks=x");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("mixer 'swa:window=64,sinks=x': 'sinks' must be an integer"), std::string::npos) << bad.output;
  const auto rolling = run_cli("generate -m " + quote(kModel) + " -p 'Hi' -n 1200 --ignore-eos --mixer swa:window=32,sinks=4,positions=rolling");
  EXPECT_EQ(rolling.exit_code, 0);
  EXPECT_EQ(rolling.output.find("max_position_embeddings"), std::string::npos) << "rolling positions never exceed the window";
  EXPECT_NE(rolling.output.find("generated tokens: 1200"), std::string::npos);
}

TEST(Cli, BadInputIsOneLineErrorWithNonZeroExit) {
  const struct {
    std::string arguments;
    std::string fragment;
  } cases[] = {
      {"generate -m " + quote(kModel) + " -p ''", "empty prompt"},
      {"generate -m /no/such/model -p hi", "/no/such/model"},
      {"generate -m " + quote(kModel) + " -f /no/such/prompt.txt", "/no/such/prompt.txt"},
      {"generate -m " + quote(kModel) + " -p hi --top-p 1.5", "--top-p"},
      {"generate -m " + quote(kModel) + " -p hi --top-k -2", "--top-k"},
  };
  for (const auto& c : cases) {
    const auto result = run_cli(c.arguments);
    EXPECT_NE(result.exit_code, 0) << c.arguments;
    EXPECT_NE(result.output.find(c.fragment), std::string::npos) << c.arguments << " -> " << result.output;
    EXPECT_NE(result.output.find("error"), std::string::npos) << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  }
  EXPECT_NE(run_cli("generate").exit_code, 0);  // --model is required
  EXPECT_NE(run_cli("frobnicate").exit_code, 0);
}

}  // namespace
}  // namespace bifocal
