// bifocal bench's CPU-side pieces: the decode traffic behind the roofline (checked against a
// hand count for the Qwen3-4B shape), the synthetic configs, --context parsing and the report.
#include <gtest/gtest.h>

#include <algorithm>

#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "bench/bench_shapes.h"
#include "bench/decode_traffic.h"
#include "test_files.h"

namespace bifocal {
namespace {

std::vector<MixerSpec> every_layer(const ModelConfig& config, const std::string& spec) {
  return std::vector<MixerSpec>(config.num_layers, MixerSpec::parse(spec));
}

// Qwen3-4B in bf16, by hand: per layer 2560·(4096 + 2·1024) + 4096·2560 + 3·2560·9728 + 2·2560
// + 2·128 = 100,930,816 parameters; 36 layers and the tied LM head 151,936·2560 + 2560 give
// 4,022,468,096 parameters = 8,044,936,192 bytes read per token.
TEST(BenchTraffic, Qwen3FourBWeightsAndCacheByHand) {
  const ModelConfig c = synthetic_model_config("qwen3-4b");
  EXPECT_EQ(transformer_weight_bytes(c, 2), 8'044'936'192u);
  // swa(576) at 256K: every layer reads its 576 cached tokens of 4 KiB and writes one, and its
  // 32 learned sinks (fp32) as weights.
  const DecodeTraffic swa = decode_traffic(c, every_layer(c, "swa:window=576,sink=learned"), 262'144, 2);
  EXPECT_EQ(swa.weight_bytes, 8'044'936'192u + 36u * 32 * 4);
  EXPECT_EQ(decode_traffic(c, every_layer(c, "swa:window=576,sinks=4"), 262'144, 2).weight_bytes, 8'044'936'192u);
  EXPECT_EQ(swa.cache_read_bytes, 36u * 576 * 4096);
  EXPECT_EQ(swa.cache_write_bytes, 36u * 4096);
  // full at 1K: the 1,024 cached tokens and the new one are read.
  const DecodeTraffic full = decode_traffic(c, every_layer(c, "full"), 1024, 2);
  EXPECT_EQ(full.cache_read_bytes, 36u * 1025 * 4096);
  // bifocal(448, kv): 448 tokens, 8 states of 128×128 fp32 (+ normalizer, stabilizer) read and
  // written, and the mLSTM and mix gates (2·8 + 32 rows of 2560 + bias) and the learned sinks as weights.
  const DecodeTraffic bifocal = decode_traffic(c, every_layer(c, "bifocal:window=448,state=kv"), 100'000, 2);
  const std::size_t state = 8 * (128 * 128 + 128 + 1) * 4;
  EXPECT_EQ(bifocal.cache_read_bytes, 36u * (448 * 4096 + state));
  EXPECT_EQ(bifocal.cache_write_bytes, 36u * (4096 + state));
  EXPECT_EQ(bifocal.weight_bytes, 8'044'936'192u + 36u * (48 * 2561 * 2 + 32 * 4));
  // linear with hedgehog features: a 2·64-feature state per KV head (8 × (128·128 + 128) fp32) and
  // the fp32 feature maps [8, 128, 64]; elu1 has no map. LoLCATs adds 64 window tokens and its 32
  // window factors.
  const std::size_t feature_map = 8 * 128 * 64 * 4;
  const DecodeTraffic hedgehog = decode_traffic(c, every_layer(c, "linear:feature=hedgehog"), 4096, 2);
  EXPECT_EQ(hedgehog.weight_bytes, 8'044'936'192u + 36u * feature_map);
  EXPECT_EQ(hedgehog.cache_read_bytes, 36u * 8 * (128 * 128 + 128) * 4);
  EXPECT_EQ(decode_traffic(c, every_layer(c, "linear:feature=elu1"), 4096, 2).weight_bytes, 8'044'936'192u);
  const DecodeTraffic lolcats = decode_traffic(c, every_layer(c, "lolcats:window=64"), 4096, 2);
  EXPECT_EQ(lolcats.weight_bytes, 8'044'936'192u + 36u * (feature_map + 32 * 4));
  EXPECT_EQ(lolcats.cache_read_bytes, 36u * (64 * 4096 + 8 * (128 * 128 + 128) * 4));
}

TEST(BenchShapes, SyntheticConfigsAndUnknownNames) {
  const ModelConfig c = synthetic_model_config("qwen3.5-4b-like");
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  testing::expect_error([] { synthetic_model_config("qwen9"); }, {"qwen9"});
}

TEST(BenchContexts, ParsesSuffixesSortsAndRejectsGarbage) {
  EXPECT_EQ(parse_contexts("8k,1k,1024,300"), (std::vector<std::int64_t>{300, 1024, 8192}));
  for (const char* bad : {"", "1k,", "x", "-4", "0", "1.5k", " 1k", "+1k", "1k ", "2kk"}) testing::expect_error([&] { parse_contexts(bad); }, {"--context"});
  // Past 2^30 tokens, and where value × 1024 would overflow int64.
  EXPECT_EQ(parse_contexts("1048576k,1073741824"), (std::vector<std::int64_t>{std::int64_t(1) << 30}));
  for (const char* huge : {"1048577k", "1073741825", "9223372036854775807k"})
    testing::expect_error([&] { parse_contexts(huge); }, {"--context", "more than 2^30 tokens"});
}

// The options are checked before any device work: a CPU build refuses them by name too.
TEST(BenchOptions, PrefillChunkBelowOneAndNegativeMaxPrefillAreRefusedByName) {
  BenchOptions options;
  options.shape = "qwen3-4b";
  options.mixers = {"swa:window=576,sink=learned"};
  options.contexts = {1024};
  for (const int chunk : {0, -4096}) {
    options.prefill_chunk = chunk;
    testing::expect_error([&] { run_bench(options, [](const std::string&) {}); }, {"--prefill-chunk", std::to_string(chunk)});
  }
  options.prefill_chunk = 4096;
  options.max_prefill = -1;
  testing::expect_error([&] { run_bench(options, [](const std::string&) {}); }, {"--max-prefill", "-1"});
}

TEST(BenchReport, RooflineRatioSpreadAndFiles) {
  BenchReport report;
  report.model = "qwen3-4b";
  report.dtype = "bf16";
  report.device = "test";
  report.prefill_chunk = 8192;
  for (const auto [context, speed] : {std::pair{1024, 450.0}, std::pair{262144, 430.0}}) {
    BenchRow row;
    row.mixer = "swa:window=576,sink=learned";
    row.context = context;
    row.decode_tokens_per_second = speed;
    row.bytes_per_token = 8'000'000'000;
    row.bandwidth = 4.0e12;
    report.rows.push_back(row);
  }
  EXPECT_NEAR(report.rows[0].roofline_tokens_per_second(), 500.0, 1e-9);
  EXPECT_NEAR(report.rows[0].roofline_ratio(), 0.9, 1e-12);
  EXPECT_NEAR(decode_spread(report, "swa:window=576,sink=learned"), 450.0 / 430.0 - 1.0, 1e-12);
  const std::string md = bench_markdown(report);
  EXPECT_NE(md.find("| `swa:window=576,sink=learned` | 1K | 450.0 | 500.0 | 0.900 | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 256K |"), std::string::npos) << md;
  EXPECT_NE(md.find("passes of 8192 tokens"), std::string::npos) << md;
  const auto json = bench_json(report);
  EXPECT_EQ(json.at("prefill_chunk"), 8192);
  EXPECT_EQ(json.at("rows").size(), 2u);
  EXPECT_TRUE(json.at("rows")[0].at("prefill_tokens_per_second").is_null());
  const std::string svg = bench_svg(report);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_GT(std::count(svg.begin(), svg.end(), '\n'), 2);
  EXPECT_NE(svg.find("translate("), std::string::npos);
  EXPECT_EQ(md.find("--ablate"), std::string::npos) << "no ablation table without --ablate";
  EXPECT_FALSE(json.at("rows")[0].contains("ablations"));
}

// A report of one row at 1K for `mixer` with one --ablate result.
BenchReport report_with_ablation(const std::string& mixer, const DecodeAblation& ablation) {
  BenchReport report;
  BenchRow row;
  row.mixer = mixer;
  row.context = 1024;
  row.decode_tokens_per_second = 300.0;
  row.ablations.push_back(ablation);
  report.rows.push_back(row);
  return report;
}

// --ablate's rows: the saved time per step and per launch, in the table and the JSON.
TEST(BenchReport, AblationTableShowsTheTimeSavedPerStepAndPerLaunch) {
  const BenchReport report = report_with_ablation(
      "bifocal:window=448,state=kv",
      {.kernel = "mlstm_decode", .launches = 36, .reference_seconds = 3.2e-3, .ablated_seconds = 2.84e-3});
  const std::string md = bench_markdown(report);
  // 360 µs saved over 36 launches: 10 µs each.
  EXPECT_NE(md.find("| `bifocal:window=448,state=kv` | 1K | `mlstm_decode` | 36 | 3200.0 | 2840.0 | 360.0 | 10.00 |"),
            std::string::npos)
      << md;
  const auto ablation = bench_json(report).at("rows")[0].at("ablations")[0];
  EXPECT_EQ(ablation.at("kernel"), "mlstm_decode");
  EXPECT_EQ(ablation.at("launches"), 36);
  EXPECT_NEAR(ablation.at("saved_seconds").get<double>(), 3.6e-4, 1e-12);
}

// A name not in a mixer's step (swa has no mLSTM kernel) gets a row that says so, and nulls in the
// JSON rather than zeros that would read as "costs nothing".
TEST(BenchReport, AnAblationNotInTheStepIsShownAsSuch) {
  const BenchReport report = report_with_ablation(
      "swa:window=576,sink=learned", {.kernel = "mlstm_decode", .launches = 0, .step_kernels = "gemv_kernel ×109"});
  const std::string md = bench_markdown(report);
  EXPECT_NE(md.find("| `swa:window=576,sink=learned` | 1K | `mlstm_decode` | 0: not in this step | — | — | — | — |"),
            std::string::npos)
      << md;
  const auto ablation = bench_json(report).at("rows")[0].at("ablations")[0];
  EXPECT_EQ(ablation.at("launches"), 0);
  EXPECT_TRUE(ablation.at("saved_seconds").is_null());
  EXPECT_EQ(ablation.at("step_kernels"), "gemv_kernel ×109");
}

}  // namespace
}  // namespace bifocal
