// The accounting reproduces DESIGN.md's "Memory accounting" table row by row, through the
// library and through `bifocal budget`.
#include <gtest/gtest.h>


#include <cstdio>

#include <nlohmann/json.hpp>

#include "bifocal/budget.h"
#include "cli_runner.h"
#include "test_files.h"

namespace bifocal {
namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

struct DesignRow {
  const char* shape;
  const char* mixer;
  std::size_t layer_bytes;   // cached tokens + state matrices
  double token_equivalents;
  std::size_t model_bytes;   // 0: not stated in the table
};
// DESIGN.md "Memory accounting": each row of the worked-examples table.
const DesignRow kDesignTable[] = {
    {"qwen3-4b", "swa:window=576,sink=learned", 576 * 4 * KiB, 576, 0},
    {"qwen3-4b", "swa:window=576,sinks=4", 576 * 4 * KiB, 576, 0},
    {"qwen3-4b", "bifocal:window=448,state=kv", 448 * 4 * KiB + 8 * 64 * KiB, 576, 0},
    {"qwen3-4b", "bifocal:window=64,state=q", 64 * 4 * KiB + 32 * 64 * KiB, 576, 0},
    {"qwen3.5-4b-like", "bifocal:window=320,state=kv", 2 * MiB + 256 * KiB, 576, 72 * MiB},
};

TEST(Budget, KvTokenUnitIsFourKiBForQwen3) {
  EXPECT_EQ(kv_token_bytes(builtin_shape("qwen3-4b").layer), 4 * KiB);
  EXPECT_EQ(kv_token_bytes(builtin_shape("qwen3.5-4b-like").layer), 4 * KiB);
  EXPECT_EQ(kv_token_bytes(builtin_shape("qwen3-4b").layer, 4), 8 * KiB);
}

TEST(Budget, ReproducesEveryRowOfTheDesignTable) {
  for (const auto& row : kDesignTable) {
    const ModelShape& shape = builtin_shape(row.shape);
    const MixerMemory m = mixer_memory(MixerSpec::parse(row.mixer), shape.layer, 100000);
    EXPECT_EQ(m.kv_bytes + m.state_matrix_bytes, row.layer_bytes) << row.mixer;
    EXPECT_DOUBLE_EQ(m.token_equivalents(), row.token_equivalents) << row.mixer;
    if (row.model_bytes) EXPECT_EQ((m.kv_bytes + m.state_matrix_bytes) * shape.layers, row.model_bytes) << row.mixer;
    EXPECT_GE(m.state_total_bytes, m.state_matrix_bytes);  // normalizers only add
  }
}

TEST(Budget, StateTotalsAddNormalizersAndStabilizers) {
  const auto& layer = builtin_shape("qwen3-4b").layer;
  const MixerMemory bifocal = mixer_memory(MixerSpec::parse("bifocal:window=448,state=kv"), layer, 0);
  EXPECT_EQ(bifocal.state_total_bytes, 8 * (128 * 128 + 128 + 1) * 4u);
  const MixerMemory hedgehog = mixer_memory(MixerSpec::parse("linear:feature=hedgehog"), layer, 0);
  EXPECT_EQ(hedgehog.state_matrix_bytes, 8 * 128 * 128 * 4u);  // 2·64 features × d
  EXPECT_EQ(hedgehog.state_total_bytes, 8 * (128 * 128 + 128) * 4u);
  const MixerMemory full = mixer_memory(MixerSpec::parse("full"), layer, 1000);
  EXPECT_TRUE(full.grows_with_context);
  EXPECT_EQ(full.kv_bytes, 1000 * 4 * KiB);
}

TEST(Budget, PlannerSplitsTheBudgetBetweenWindowAndStates) {
  const auto plans = plan_budget(builtin_shape("qwen3-4b").layer, 576);
  auto find = [&](const std::string& prefix) -> const BudgetPlan* {
    for (const auto& p : plans)
      if (p.spec.to_string().starts_with(prefix)) return &p;
    return nullptr;
  };
  ASSERT_NE(find("bifocal:window=448,sink=learned,state=kv"), nullptr);
  ASSERT_NE(find("bifocal:window=64,sink=learned,state=q"), nullptr);
  ASSERT_NE(find("swa:window=576,sink=learned"), nullptr);
  for (const auto& p : plans) EXPECT_LE(p.memory.token_equivalents(), 576.0) << p.spec.to_string();
  // paper-fig2: 16 KV heads of 64 → unit 4 KiB, a 64×64 state 16 KiB = 4 token equivalents, so
  // 16 states take the whole budget of 64: no room for bifocal's window, mlstm alone just fits.
  const auto small = plan_budget(builtin_shape("paper-fig2").layer, 64);
  bool bifocal_kv = false;
  std::int64_t mlstm_state_tokens = -1;
  for (const auto& p : small) {
    if (p.spec.kind == MixerSpec::Kind::Bifocal && p.spec.state == MixerSpec::StatePlacement::PerKvHead) bifocal_kv = true;
    if (p.spec.to_string() == "mlstm:state=kv") mlstm_state_tokens = p.state_tokens;
  }
  EXPECT_FALSE(bifocal_kv);
  EXPECT_EQ(mlstm_state_tokens, 64);
}

std::string run_budget(const std::string& arguments, int& exit_code) {
  const auto result = testing::run_cli("budget " + arguments);
  exit_code = result.exit_code;
  return result.output;
}

TEST(BudgetCommand, JsonOutputMatchesTheDesignTable) {
  for (const auto& row : kDesignTable) {
    int exit_code = 0;
    const std::string output = run_budget(std::string("--shape ") + row.shape + " --tokens 576 --json --mixer " + row.mixer, exit_code);
    ASSERT_EQ(exit_code, 0) << output;
    const auto json = nlohmann::json::parse(output);
    const auto& mixer = json["mixers"][0];
    EXPECT_EQ(mixer["kv_bytes"].get<std::size_t>() + mixer["state_matrix_bytes"].get<std::size_t>(), row.layer_bytes);
    EXPECT_DOUBLE_EQ(mixer["token_equivalents"].get<double>(), row.token_equivalents);
  }
}

TEST(BudgetCommand, MarkdownTablesAndErrors) {
  int exit_code = 0;
  const std::string table = run_budget("--shape qwen3.5-4b-like --tokens 576", exit_code);
  EXPECT_EQ(exit_code, 0) << table;
  EXPECT_NE(table.find("| `bifocal:window=320,sink=learned,state=kv` | 320 | 4 × 256.00 KiB | 2.25 MiB |"), std::string::npos) << table;
  EXPECT_NE(table.find("72.00 MiB"), std::string::npos);
  EXPECT_NE(table.find("Configurations that fit 576"), std::string::npos);
  run_budget("--shape qwen9 --tokens 5", exit_code);
  EXPECT_NE(exit_code, 0);
  const std::string bad = run_budget("--shape qwen3-4b --tokens 576 --mixer swa:window=x", exit_code);
  EXPECT_NE(exit_code, 0);
  EXPECT_NE(bad.find("must be an integer"), std::string::npos) << bad;
}

}  // namespace
}  // namespace bifocal
