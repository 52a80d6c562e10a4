// `bifocal compare` and the eval library under it: NLL bucketing on hand-made logits, the
// perplexity of a real (tiny) model against a brute-force computation from Model::forward,
// windows and BOS, the attention probe inside a model, the SVG writer, and the CLI end to end.
#include <gtest/gtest.h>


#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/attention_sinks.h"
#include "eval/compare_report.h"
#include "eval/perplexity.h"
#include "eval/svg_plot.h"
#include "cli_runner.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::golden_model;

// ---- NLL and buckets ------------------------------------------------------------------------

// Four rows of logits over a vocabulary of 3, with softmax probabilities chosen by hand:
//   row 0: (0, 0, 0)            → p = 1/3 each;           target 1: NLL = ln 3
//   row 1: (0, ln 2, 0)         → p = (1/4, 1/2, 1/4);    target 0: NLL = ln 4
//   row 2: (ln 3, 0, 0) + 50    → p = (3/5, 1/5, 1/5);    target 0: NLL = ln 5/3 (shift-invariant)
//   row 3: (0, 0, ln 8)         → p = (1/10, 1/10, 8/10); target 2: NLL = ln 10/8
// Row i predicts the target at position i + 1; edges {0, 2, 4} put position 1 in [0, 2),
// positions 2 and 3 in [2, 4), and position 4 outside every bucket (overall only).
TEST(CompareNll, BucketsMatchHandComputedExample) {
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f), ln8 = std::log(8.0f);
  const std::vector<float> logits = {0, 0, 0, 0, ln2, 0, ln3 + 50, 50, 50, 0, 0, ln8};
  const std::vector<std::int32_t> targets = {1, 0, 0, 2};
  PositionPerplexity result = PositionPerplexity::with_edges({0, 2, 4});
  add_next_token_nll(logits, 3, targets, /*first_position=*/0, result);

  const double nll[] = {std::log(3.0), std::log(4.0), std::log(5.0 / 3.0), std::log(10.0 / 8.0)};
  ASSERT_EQ(result.buckets.size(), 2u);
  EXPECT_EQ(result.buckets[0].begin, 0);
  EXPECT_EQ(result.buckets[1].end, 4);
  EXPECT_EQ(result.buckets[0].tokens, 1);
  EXPECT_NEAR(result.buckets[0].nll_sum, nll[0], 1e-6);
  EXPECT_EQ(result.buckets[1].tokens, 2);
  EXPECT_NEAR(result.buckets[1].nll_sum, nll[1] + nll[2], 1e-6);
  EXPECT_EQ(result.tokens, 4);
  EXPECT_NEAR(result.nll_sum, nll[0] + nll[1] + nll[2] + nll[3], 1e-6);
  EXPECT_NEAR(result.buckets[1].perplexity(), std::exp((nll[1] + nll[2]) / 2), 1e-5);
  EXPECT_NEAR(result.perplexity(), std::exp((nll[0] + nll[1] + nll[2] + nll[3]) / 4), 1e-5);

  // Later rows continue at their own positions: a row at position 3 predicts position 4.
  PositionPerplexity shifted = PositionPerplexity::with_edges({0, 2, 4, 8});
  add_next_token_nll(std::span(logits).first(3), 3, std::span(targets).first(1), /*first_position=*/3, shifted);
  EXPECT_EQ(shifted.buckets[2].tokens, 1);
  EXPECT_EQ(shifted.buckets[0].tokens + shifted.buckets[1].tokens, 0);
}

TEST(CompareNll, LogSoftmaxStaysExactForExtremeLogits) {
  const std::vector<float> logits = {1000.0f, 0.0f, -1000.0f};
  EXPECT_NEAR(token_nll(logits, 0), 0.0, 1e-12);
  EXPECT_NEAR(token_nll(logits, 2), 2000.0, 1e-9);
  EXPECT_TRUE(std::isnan(PerplexityBucket{}.perplexity()));  // an empty bucket has no perplexity
}

TEST(CompareNll, BucketEdgesMustIncrease) {
  testing::expect_error([] { PositionPerplexity::with_edges({0, 16, 16}); }, {"buckets", "increase"});
  testing::expect_error([] { PositionPerplexity::with_edges({0}); }, {"buckets", "two edges"});
}

// ---- Windows and BOS ------------------------------------------------------------------------

TEST(CompareWindows, ConsecutiveWindowsStartWithBosAndDropAShortTail) {
  std::vector<std::int32_t> ids(10);
  for (int i = 0; i < 10; ++i) ids[i] = i;
  const Windows with_bos = split_windows(ids, /*context=*/4, /*bos=*/99, /*min_length=*/4);
  const std::vector<std::vector<std::int32_t>> want = {{99, 0, 1, 2}, {99, 3, 4, 5}, {99, 6, 7, 8}};
  EXPECT_EQ(with_bos.windows, want);
  EXPECT_EQ(with_bos.dropped_tokens, 1u);  // [99, 9] is shorter than 4

  const Windows plain = split_windows(ids, 4, std::nullopt, 4);
  const std::vector<std::vector<std::int32_t>> want_plain = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_EQ(plain.windows, want_plain);
  EXPECT_EQ(plain.dropped_tokens, 2u);
  const Windows keep_tail = split_windows(ids, 4, std::nullopt, 2);
  ASSERT_EQ(keep_tail.windows.size(), 3u);
  EXPECT_EQ(keep_tail.windows.back(), (std::vector<std::int32_t>{8, 9}));
  testing::expect_error([&] { split_windows(ids, 1, std::nullopt, 1); }, {"too short"});
}

TEST(CompareWindows, BosComesFromTheTokenizerThenTheModelConfig) {
  const Tokenizer no_bos = Tokenizer::from_dir(golden_model("qwen3_bf16"));
  ModelConfig config = ModelConfig::from_dir(golden_model("qwen3_bf16"));
  ASSERT_FALSE(no_bos.bos_id().has_value());
  EXPECT_EQ(window_bos(no_bos, config), std::nullopt);
  config.bos_token_id = 7;
  EXPECT_EQ(window_bos(no_bos, config), 7);
  const Tokenizer with_bos = Tokenizer::from_dir(testing::golden_dir() / "tokenizers" / "llama3_bytelevel");
  ASSERT_TRUE(with_bos.bos_id().has_value());
  EXPECT_EQ(window_bos(with_bos, config), with_bos.bos_id());
}

// ---- Perplexity of a real model ---------------------------------------------------------------

// Brute force: each window in one forward call with every logit, then −log softmax of each next
// token written out as the definition.
PositionPerplexity brute_force(const Model& model, const std::vector<std::vector<std::int32_t>>& windows,
                               const std::vector<int>& edges) {
  PositionPerplexity result = PositionPerplexity::with_edges(edges);
  const std::size_t vocab = model.config().vocab_size;
  for (const auto& window : windows) {
    Session session = model.new_session(std::int64_t(window.size()));
    std::vector<float> logits(window.size() * vocab);
    model.forward(session, window, logits, /*all_logits=*/true);
    for (std::size_t t = 0; t + 1 < window.size(); ++t) {
      double denominator = 0;
      for (std::size_t j = 0; j < vocab; ++j) denominator += std::exp(double(logits[t * vocab + j]));
      const double probability = std::exp(double(logits[t * vocab + window[t + 1]])) / denominator;
      const std::int64_t position = std::int64_t(t) + 1;
      for (auto& bucket : result.buckets)
        if (position >= bucket.begin && position < bucket.end) {
          bucket.nll_sum -= std::log(probability);
          ++bucket.tokens;
        }
    }
  }
  return result;
}

std::vector<std::vector<std::int32_t>> golden_windows(int context) {
  const auto sequence = testing::GoldenReference::load("qwen3_bf16").full_sequence();
  return split_windows(sequence, context, std::nullopt, context).windows;
}

TEST(ComparePerplexity, FullAttentionEqualsBruteForceFromForwardLogits) {
  const Model model = Model::load(golden_model("qwen3_bf16"), {.mixer = "full"});
  const auto windows = golden_windows(64);
  ASSERT_GE(windows.size(), 2u);
  const std::vector<int> edges = {0, 16, 32, 64};
  std::size_t progress_calls = 0;
  // Slices of 20 tokens: the scoring crosses slice boundaries inside every window.
  const PositionPerplexity got = evaluate_perplexity(model, windows, edges, [&](const PerplexityProgress& p) {
    EXPECT_EQ(p.window, ++progress_calls);
    EXPECT_EQ(p.windows, windows.size());
  }, /*slice=*/20);
  const PositionPerplexity want = brute_force(model, windows, edges);
  EXPECT_EQ(progress_calls, windows.size());
  EXPECT_EQ(got.windows, windows.size());
  ASSERT_EQ(got.buckets.size(), 3u);
  for (std::size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(got.buckets[b].tokens, want.buckets[b].tokens) << b;
    EXPECT_NEAR(got.buckets[b].nll_sum, want.buckets[b].nll_sum, 1e-4 * want.buckets[b].tokens) << b;
    EXPECT_GT(got.buckets[b].perplexity(), 1.0);
  }
  // Positions 1 … 15, 16 … 31 and 32 … 63 of every window.
  EXPECT_EQ(got.buckets[0].tokens, std::int64_t(15 * windows.size()));
  EXPECT_EQ(got.buckets[2].tokens, std::int64_t(32 * windows.size()));
  EXPECT_EQ(got.tokens, std::int64_t(63 * windows.size()));
  EXPECT_EQ(got.cache_bytes, Model::load(golden_model("qwen3_bf16"), {.mixer = "full"})
                                 .accounted_state_bytes(64));
}

// The query at position p sees keys p − 15 … p in a 16-token window, so targets up to position
// 16 (predicted from queries 0 … 15) score exactly as with full attention, and later ones do not.
TEST(ComparePerplexity, WindowMatchesFullUntilKeysLeaveIt) {
  const auto windows = golden_windows(64);
  const std::vector<int> edges = {0, 17, 64};
  auto run = [&](const char* mixer) {
    return evaluate_perplexity(Model::load(golden_model("qwen3_bf16"), {.mixer = mixer}), windows, edges);
  };
  const PositionPerplexity full = run("full"), window = run("swa:window=16,sink=none"), covering = run("swa:window=64,sinks=4");
  EXPECT_NEAR(window.buckets[0].nll_sum, full.buckets[0].nll_sum, 1e-6 * full.buckets[0].nll_sum);
  EXPECT_GT(std::fabs(window.buckets[1].nll_sum - full.buckets[1].nll_sum), 1e-3 * full.buckets[1].nll_sum);
  EXPECT_NEAR(covering.nll_sum, full.nll_sum, 1e-6 * full.nll_sum);  // a 64-token window holds all 64 tokens
  EXPECT_LT(window.cache_bytes, full.cache_bytes);
}

// ---- The attention probe inside a model -------------------------------------------------------

TEST(CompareAttentionProbe, MassIsAProbabilityAndLeavesLogitsUnchanged) {
  const Model model = Model::load(golden_model("qwen3_bf16"), {.mixer = "full"});
  const auto sequence = testing::GoldenReference::load("qwen3_bf16").full_sequence();
  const std::size_t n = sequence.size(), vocab = model.config().vocab_size;
  const int heads = model.config().num_query_heads;
  std::vector<float> plain(n * vocab), probed(n * vocab);
  Session a = model.new_session(std::int64_t(n), 32), b = model.new_session(std::int64_t(n), 32);
  model.forward(a, sequence, plain, true);
  AttentionProbe probe{.first_keys = 4, .mass_per_layer = {}};
  model.forward(b, sequence, probed, true, &probe);
  EXPECT_EQ(plain, probed);
  ASSERT_EQ(probe.mass_per_layer.size(), std::size_t(model.config().num_layers));
  for (const auto& layer : probe.mass_per_layer) {
    ASSERT_EQ(layer.size(), n * heads);
    for (std::size_t t = 0; t < n; ++t)
      for (int h = 0; h < heads; ++h) {
        const float mass = layer[t * heads + h];
        if (t < 4)  // every key such a query sees is one of the first four
          EXPECT_NEAR(mass, 1.0f, 1e-5f) << t;
        else
          EXPECT_TRUE(mass > 0.0f && mass < 1.0f) << t << ": " << mass;
      }
  }
}

// A window with sink tokens keeps them, so its probe sees them at every position; the uniform
// mass is the mean of 4 / (t + 1) over the queries t = 4 … 63 of each 64-token window.
TEST(CompareAttentionProbe, SinkStatisticsOfAWindowWithSinkTokens) {
  const Model swa = Model::load(golden_model("qwen3_bf16"), {.mixer = "swa:window=16,sinks=4"});
  const auto windows = golden_windows(64);
  const AttentionSinkStats stats = measure_attention_sinks(swa, windows, /*first_tokens=*/4, /*min_query_position=*/4);
  double uniform = 0;
  for (int t = 4; t < 64; ++t) uniform += 4.0 / (t + 1);
  uniform /= 60;
  ASSERT_EQ(stats.layers.size(), 2u);
  for (const auto& layer : stats.layers) {
    EXPECT_GT(layer.mass, 0.0);
    EXPECT_LT(layer.mass, 1.0);
    EXPECT_NEAR(layer.uniform, uniform, 1e-12);
    EXPECT_EQ(layer.queries, std::int64_t(60 * windows.size()));
  }
}

// The by-position ranges split the same queries: the query-weighted mean of the ranges past
// min_query_position is the layer mean, and the first query, which sees only the first key, puts
// all of its mass there (exactly 1 under full attention).
TEST(CompareAttentionProbe, MassByPositionSplitsTheLayerMean) {
  const Model model = Model::load(golden_model("qwen3_bf16"));
  const auto windows = golden_windows(64);
  const std::vector<std::int64_t> edges{0, 1, 8, 24, 64};
  const AttentionSinkStats stats = measure_attention_sinks(model, windows, /*first_tokens=*/1, /*min_query_position=*/8, edges);
  ASSERT_EQ(stats.by_position.size(), 4u);
  const auto& first = stats.by_position[0];
  EXPECT_EQ(first.begin, 0);
  EXPECT_EQ(first.end, 1);
  EXPECT_EQ(first.queries, std::int64_t(windows.size()));
  EXPECT_DOUBLE_EQ(first.uniform, 1.0);
  for (const double mass : first.mass_per_layer) EXPECT_NEAR(mass, 1.0, 1e-6);
  const auto& early = stats.by_position[2];
  const auto& late = stats.by_position[3];
  EXPECT_EQ(early.queries + late.queries, stats.layers[0].queries);
  for (std::size_t l = 0; l < stats.layers.size(); ++l) {
    const double mean = (early.mass_per_layer[l] * double(early.queries) + late.mass_per_layer[l] * double(late.queries)) /
                        double(early.queries + late.queries);
    EXPECT_NEAR(mean, stats.layers[l].mass, 1e-9) << l;
  }
  const double uniform = (early.uniform * double(early.queries) + late.uniform * double(late.queries)) /
                         double(early.queries + late.queries);
  EXPECT_NEAR(uniform, stats.layers[0].uniform, 1e-12);
  // A range no window reaches has no queries, and the table says so rather than print a zero.
  const std::vector<std::int64_t> beyond{0, 64, 128};
  const AttentionSinkStats past = measure_attention_sinks(model, windows, 1, 8, beyond);
  EXPECT_EQ(past.by_position[1].queries, 0);
  const std::string table = position_sink_table_markdown(past);
  EXPECT_NE(table.find("| 0–64 | 64–128 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| — |"), std::string::npos) << table;
  EXPECT_NE(table.find("| uniform |"), std::string::npos) << table;
  testing::expect_error([&] { measure_attention_sinks(model, windows, 1, 8, std::vector<std::int64_t>{0, 8, 8}); },
                        {"position edges must increase"});
}

// The strongest head is the argmax of the per-head means, recomputed here from the probe itself;
// the layer mean is the mean of those per-head means.
TEST(CompareAttentionProbe, StrongestHeadIsTheArgmaxOfThePerHeadMeans) {
  const Model model = Model::load(golden_model("qwen3_bf16"));
  const auto windows = golden_windows(64);
  const AttentionSinkStats stats = measure_attention_sinks(model, windows, /*first_tokens=*/1, /*min_query_position=*/8);
  const int heads = model.config().num_query_heads, layers = model.config().num_layers;
  std::vector<std::vector<double>> per_head(layers, std::vector<double>(heads, 0.0));
  std::int64_t queries = 0;
  for (const auto& window : windows) {
    Session session = model.new_session(std::int64_t(window.size()));
    std::vector<float> logits(model.config().vocab_size);
    AttentionProbe probe{.first_keys = 1, .mass_per_layer = {}};
    model.forward(session, window, logits, false, &probe);
    for (std::size_t t = 8; t < window.size(); ++t, ++queries)
      for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) per_head[l][h] += probe.mass_per_layer[l][t * heads + h];
  }
  ASSERT_EQ(stats.layers.size(), std::size_t(layers));
  for (int l = 0; l < layers; ++l) {
    double best = -1, total = 0;
    int best_head = -1;
    for (int h = 0; h < heads; ++h) {
      const double mean = per_head[l][h] / double(queries);
      total += mean;
      if (mean > best) best = mean, best_head = h;
    }
    EXPECT_EQ(stats.layers[l].strongest_head, best_head) << l;
    EXPECT_NEAR(stats.layers[l].strongest_head_mass, best, 1e-9) << l;
    EXPECT_NEAR(stats.layers[l].mass, total / heads, 1e-9) << l;
    EXPECT_GE(stats.layers[l].strongest_head_mass, stats.layers[l].mass) << l;
  }
}

TEST(CompareAttentionProbe, MixersWithoutSoftmaxAttentionAreRefused) {
  const Model model = Model::load(golden_model("qwen3_bf16"), {.mixer = "linear:feature=elu1"});
  Session session = model.new_session(8);
  std::vector<float> logits(model.config().vocab_size);
  AttentionProbe probe{.first_keys = 1, .mass_per_layer = {}};
  const std::vector<std::int32_t> tokens = {1, 2, 3};
  testing::expect_error([&] { model.forward(session, tokens, logits, false, &probe); },
                        {"attention probe", "linear:feature=elu1", "no softmax attention"});
}

// ---- SVG -------------------------------------------------------------------------------------

TEST(CompareSvgPlot, TicksAreNiceNumbers) {
  EXPECT_EQ(axis_ticks(0, 50, false), (std::vector<double>{0, 10, 20, 30, 40, 50}));
  EXPECT_EQ(axis_ticks(1, 1000, true), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(axis_ticks(3, 60, true), (std::vector<double>{5, 10, 20, 50}));
  EXPECT_EQ(axis_ticks(720, 1580, true), (std::vector<double>{800, 1000, 1200, 1400}));
  EXPECT_TRUE(axis_ticks(5, 5, false).empty());
}

TEST(CompareSvgPlot, OnePolylinePerSeriesWithEscapedLegend) {
  LinePlot plot{.title = "t < u", .x_label = "x", .y_label = "y", .log_x = false, .log_y = true, .series = {}};
  plot.series.push_back({.label = "a & b", .x = {1, 2, 3}, .y = {10, 100, NAN}});
  plot.series.push_back({.label = "c", .x = {1, 2, 3}, .y = {20, -1, 30}});  // −1 has no place on a log axis
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find("a &amp; b"), std::string::npos);
  EXPECT_NE(svg.find("t &lt; u"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find("(log scale)"), std::string::npos);
}

// ---- The CLI ---------------------------------------------------------------------------------

using testing::CommandResult;
std::string quote(const std::string& s) { return testing::shell_quote(s); }
// stderr (progress) goes to /dev/null unless merged into the output.
CommandResult run_cli(const std::string& arguments, const std::string& stderr_redirect = "2>&1") {
  return testing::run_cli(arguments, "/dev/null", stderr_redirect);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

const char kText[] =
    "Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker named Elias. "
    "Every morning he opened the shutters of his shop, wound the tall clock by the door, and listened to the ticking "
    "of a hundred small machines. Children came by after school to watch him work; he showed them how a spring "
    "stores energy, how a gear passes it on, and how a pendulum keeps time by swinging back and forth at the same "
    "pace, no matter how wide the swing.\nOne winter the river froze and the mill stopped. The miller came to Elias "
    "and asked whether a clockmaker could fix a water wheel.\n";

const std::string kModel = golden_model("qwen3_bf16").string();
const char* const kDefaultMixers[] = {"full", "swa:window=64,sink=none", "swa:window=64,sinks=4", "swa:window=256,sinks=4"};

// An --out that cannot be a directory (a file is there) fails before any text is scored: the
// error names it, and no windows or table are printed.
TEST(CompareCli, AnUnusableOutDirectoryFailsBeforeTheRun) {
  testing::TempDir dir;
  const auto text = dir.write("text.txt", kText);
  const auto taken = dir.write("taken", "a file, not a directory");
  const auto result = run_cli("compare --model " + quote(kModel) + " --text " + quote(text.string()) +
                              " --context 64 --buckets 0,16,32,64 --out " + quote((taken / "report").string()));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find((taken / "report").string() + ": cannot create the output directory"), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("windows"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("| mixer |"), std::string::npos) << result.output;
}

TEST(CompareCli, TableJsonAndSvgForTheDefaultMixers) {
  testing::TempDir dir;
  const auto text = dir.write("text.txt", kText);
  const auto out = dir.path() / "report";
  const auto result = run_cli("compare --model " + quote(kModel) + " --text " + quote(text.string()) +
                                  " --context 64 --buckets 0,16,32,64 --out " + quote(out.string()),
                              "2>/dev/null");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("| mixer | state | tokens/layer (bf16) | ppl 0–16 | ppl 16–32 | ppl 32–64 | ppl overall |"),
            std::string::npos) << result.output;
  for (const char* mixer : kDefaultMixers)
    EXPECT_NE(result.output.find(std::string("| `") + mixer + "` |"), std::string::npos) << mixer << "\n" << result.output;

  const auto json = nlohmann::json::parse(read_file(out / "compare.json"));
  EXPECT_EQ(json["bucket_edges"], (std::vector<int>{0, 16, 32, 64}));
  ASSERT_EQ(json["mixers"].size(), 4u);
  const std::int64_t windows = json["windows"];
  EXPECT_GE(windows, 1);
  for (const auto& mixer : json["mixers"]) {
    ASSERT_EQ(mixer["buckets"].size(), 3u);
    std::int64_t tokens = 0;
    for (const auto& bucket : mixer["buckets"]) {
      tokens += bucket["tokens"].get<std::int64_t>();
      EXPECT_GT(bucket["perplexity"].get<double>(), 1.0);
      EXPECT_TRUE(bucket.contains("nll_sum"));
    }
    EXPECT_EQ(tokens, 63 * windows);
    EXPECT_GT(mixer["state_bytes"].get<std::int64_t>(), 0);
  }
  EXPECT_EQ(json["mixers"][0]["ratio_to_full_last_bucket"].get<double>(), 1.0);

  const std::string svg = read_file(out / "compare.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 4u);
  for (const char* mixer : kDefaultMixers) EXPECT_NE(svg.find(mixer), std::string::npos) << mixer;
  const std::string md = read_file(out / "compare.md");
  EXPECT_NE(md.find("bifocal compare --model"), std::string::npos);
  EXPECT_NE(md.find("| `swa:window=64,sinks=4` |"), std::string::npos);
}

TEST(CompareCli, AttentionStatsTableHoldsProbabilities) {
  testing::TempDir dir;
  const auto text = dir.write("text.txt", kText);
  const auto result = run_cli("compare --model " + quote(kModel) + " --text " + quote(text.string()) +
                                  " --mixer full --context 64 --buckets 0,32,64 --attention-stats --first-tokens 2",
                              "2>/dev/null");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::size_t table = result.output.find("| layer | mass on first 2 tokens | uniform mass | ratio |");
  ASSERT_NE(table, std::string::npos) << result.output;
  std::istringstream lines(result.output.substr(table));
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);  // the alignment row
  int layers = 0;
  while (std::getline(lines, line) && line.starts_with("|")) {
    int layer = -1;
    double mass = -1, uniform = -1, ratio = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "| %d | %lf | %lf | %lf |", &layer, &mass, &uniform, &ratio), 4) << line;
    EXPECT_EQ(layer, layers++);
    EXPECT_GE(mass, 0.0);
    EXPECT_LE(mass, 1.0);
    EXPECT_GT(uniform, 0.0);
    EXPECT_LE(uniform, 1.0);
    EXPECT_NEAR(ratio, mass / uniform, 0.01 + 1e-3 * ratio);
  }
  EXPECT_EQ(layers, 2);
}

TEST(CompareCli, BadInputIsOneLineErrorWithNonZeroExit) {
  testing::TempDir dir;
  const std::string text = quote(dir.write("text.txt", kText).string());
  const std::string empty = quote(dir.write("empty.txt", "").string());
  const std::string model = "compare --model " + quote(kModel);
  const struct {
    std::string arguments;
    std::string fragment;
  } cases[] = {
      {model + " --text /no/such/text.txt", "/no/such/text.txt: cannot read text file"},
      {model + " --text " + empty, "empty text file"},
      {model + " --text " + text + " --mixer swa:window=64,sinks=x", "mixer 'swa:window=64,sinks=x'"},
      {model + " --text " + text + " --context 64 --buckets 0,32,16,64", "--buckets: edges must increase, but 16 follows 32"},
      {model + " --text " + text + " --context 64 --buckets 0,a,64", "--buckets: 'a' is not an integer"},
      {model + " --text " + text + " --context 64 --buckets 0,128", "--buckets: the last edge 128 is past --context 64"},
      {model + " --text " + text + " --context 1 --buckets 0,1", "--context: must be at least 2 tokens"},
      {model + " --text " + text + " --context 4096 --buckets 0,4096", "make no window of at least 4096 tokens"},
      {"compare --model /no/such/model --text " + text + " --context 64 --buckets 0,64", "/no/such/model"},
  };
  for (const auto& c : cases) {
    const auto result = run_cli(c.arguments);
    EXPECT_NE(result.exit_code, 0) << c.arguments;
    EXPECT_NE(result.output.find(c.fragment), std::string::npos) << c.arguments << " -> " << result.output;
    EXPECT_NE(result.output.find("error"), std::string::npos) << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  }
}

}  // namespace
}  // namespace bifocal
