// Every mixer inside a real (tiny) model: prefill of n tokens then decode equals one prefill of
// n + k; the session's state equals the accounting and stops growing; decoding allocates
// nothing; generation runs far past the window (and, with rolling positions, past
// max_position_embeddings) in constant memory.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "allocation_counter.h"
#include "bifocal/model.h"
#include "bifocal/sampler.h"
#include "golden_model.h"
#include "safetensors_writer.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::golden_model;

const char* const kEveryMixer[] = {
    "full", "swa:window=16,sinks=4", "swa:window=16,sink=learned", "swa:window=16,sink=none",
    "swa:window=16,sinks=4,positions=rolling", "linear:feature=elu1", "linear:feature=hedgehog", "lolcats:window=16",
    "mlstm:state=kv", "mlstm:state=q", "bifocal:window=16,state=kv,sink=learned", "bifocal:window=16,state=q,sink=tokens:4",
    "bifocal:window=16,state=kv,sink=none"};

class EveryMixer : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryMixer, PrefillThenDecodeEqualsOnePrefill) {
  const Model model = Model::load(golden_model("qwen3_bf16"), {.mixer = GetParam()});
  const auto sequence = testing::GoldenReference::load("qwen3_bf16").full_sequence();
  const std::size_t vocab = model.config().vocab_size, total = sequence.size(), prompt = 100;
  Session whole = model.new_session(std::int64_t(total));
  std::vector<float> want(total * vocab);
  model.forward(whole, sequence, want, /*all_logits=*/true);

  Session split = model.new_session(std::int64_t(total), /*chunk=*/48);  // 100 = 48 + 48 + 4
  std::vector<float> got(total * vocab);
  model.forward(split, std::span(sequence).first(prompt), got, true);
  for (std::size_t t = prompt; t < total; ++t) {
    const auto logits = model.decode(split, sequence[t]);
    std::copy(logits.begin(), logits.end(), got.begin() + t * vocab);
  }
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << GetParam();
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  }
  // The split session rounds its state to fp32 after every call (DESIGN.md: fp32 states), the
  // whole one carries it in double through its one call. For mLSTM the output divides by
  // max(|q̂ᵀn|, e^{−m}), and at token 131 of this sequence q̂ᵀn is a sum of terms ~50× its size,
  // so that rounding comes out magnified: 9.4e-5 on one machine's libm, 2.7e-4 on another's, and
  // 2.4e-4 for the same tokens prefilled one per call (4.8e-5 in 48-token calls); every other
  // mixer stays under 1e-5.
  const bool mlstm = std::string_view(GetParam()).starts_with("mlstm");
  EXPECT_LE(worst, mlstm ? 1e-3 : 1e-4) << GetParam();
  EXPECT_EQ(whole.cache_bytes(), split.cache_bytes());
}

TEST_P(EveryMixer, StateEqualsAccountingAndDecodeAllocatesNothing) {
  const Model model = Model::load(golden_model("qwen3_bf16"), {.mixer = GetParam()});
  const std::int64_t capacity = 400;
  Session session = model.new_session(capacity, 32);
  EXPECT_EQ(session.cache_bytes(), model.accounted_state_bytes(capacity)) << GetParam();
  const std::size_t at_start = session.cache_bytes();
  Sampler sampler({.temperature = 0.9f, .top_k = 0, .top_p = 1.0f, .seed = 5}, model.config().vocab_size);
  const std::vector<std::int32_t> prompt(40, 7);
  std::int32_t token = sampler.sample(model.prefill(session, prompt));
  const auto before = testing::allocations_so_far();
  for (int step = 0; step < 300; ++step) token = sampler.sample(model.decode(session, token));
  EXPECT_EQ(testing::allocations_so_far() - before, 0) << GetParam();
  EXPECT_EQ(session.cache_bytes(), at_start);
}

INSTANTIATE_TEST_SUITE_P(Mixers, EveryMixer, ::testing::ValuesIn(kEveryMixer));

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * std::size_t(sysconf(_SC_PAGESIZE));
}

// DESIGN.md "Memory accounting": the state must stay constant once the window is full.
TEST(LongGeneration, ConstantMemoryFromToken1000ToToken100000) {
  const Model model = Model::load(golden_model("qwen2_fp32_tied"), {.mixer = "swa:window=64,sinks=4"});
  Session session = model.new_session(1);  // capacity only bounds full attention
  EXPECT_EQ(session.cache_bytes(), model.accounted_state_bytes(100000));
  Sampler sampler({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 11}, model.config().vocab_size);
  std::int32_t token = 1;
  std::size_t state_at_1000 = 0, resident_at_1000 = 0;
  for (int t = 1; t <= 100000; ++t) {
    token = sampler.sample(model.decode(session, token));
    if (t == 1000) {
      state_at_1000 = session.cache_bytes();
      resident_at_1000 = resident_bytes();
    }
  }
  EXPECT_EQ(session.position(), 100000);
  EXPECT_EQ(session.cache_bytes(), state_at_1000);
  EXPECT_LE(resident_bytes(), resident_at_1000 + 256 * 1024) << "resident memory grew while decoding";
}

TEST(LongGeneration, RollingPositionsRunPastMaxPositionEmbeddings) {
  const Model model = Model::load(golden_model("qwen2_fp32_tied"), {.mixer = "swa:window=32,sinks=4,positions=rolling"});
  const int limit = model.config().max_position_embeddings;
  Session session = model.new_session(1);
  std::int32_t token = 3;
  for (int t = 0; t < 4 * limit; ++t) {
    const auto logits = model.decode(session, token);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << "token " << t;
    token = argmax(logits);
  }
  EXPECT_EQ(session.position(), 4 * limit);
}

TEST(MixerSelection, ConfigSectionPerLayerOverridesAndBudget) {
  testing::TempDir dir;
  for (const auto& entry : std::filesystem::directory_iterator(golden_model("qwen3_bf16")))
    std::filesystem::copy_file(entry.path(), dir.path() / entry.path().filename());
  auto config = nlohmann::json::parse(std::ifstream(dir.path() / "config.json"));
  config["bifocal"] = {{"mixer", "bifocal:window=24,state=kv"}, {"layers", {{"0", "full"}}}, {"budget", 72}};
  dir.write("config.json", config.dump());
  const Model model = Model::load(dir.path());
  EXPECT_EQ(model.layer_mixer(0).kind, MixerSpec::Kind::Full);
  EXPECT_EQ(model.layer_mixer(1).to_string(), "bifocal:window=24,sink=learned,state=kv");
  EXPECT_FALSE(model.untrained_parameters().empty());
  // --mixer replaces the default but keeps the per-layer override.
  const Model swapped = Model::load(dir.path(), {.mixer = "swa:window=32,sinks=4"});
  EXPECT_EQ(swapped.layer_mixer(0).kind, MixerSpec::Kind::Full);
  EXPECT_EQ(swapped.layer_mixer(1).window, 32);
  // The states of 2 KV heads × 48² fp32 = 18 KiB = 48 bf16 token equivalents (unit 2·2·48·2 =
  // 384 B): bifocal with a window of 24 needs 24 + 48 = 72, exactly the budget in config.json.
  testing::expect_error([&] { Model::load(dir.path(), {.mixer = "swa:window=80,sinks=4"}); },
                        {"mixer 'swa:window=80,sinks=4'", "needs 80 token equivalents", "over the budget of 72"});
  testing::expect_error([&] { Model::load(dir.path(), {.mixer = "bifocal:window=24", .budget_tokens = 48}); },
                        {"needs 72 token equivalents", "over the budget of 48"});
  // A pattern: every second layer full, the others the window (layer overrides still win).
  config["bifocal"] = {{"pattern", {"swa:window=8,sinks=2", "full"}}};
  dir.write("config.json", config.dump());
  const Model patterned = Model::load(dir.path());
  EXPECT_EQ(patterned.layer_mixer(0).to_string(), "swa:window=8,sinks=2");
  EXPECT_EQ(patterned.layer_mixer(1).kind, MixerSpec::Kind::Full);
  testing::expect_error([&] { Model::load(golden_model("qwen3_bf16"), {.mixer = "swa:window=8,sinks=9"}); },
                        {"sink tokens must leave room"});
}

}  // namespace
}  // namespace bifocal

namespace bifocal {
namespace {

using testing::F32Tensor;
using testing::write_f32_safetensors;

// DESIGN.md: a learned sink's value comes from the checkpoint (`model.layers.i.self_attn.sinks`,
// gpt-oss's name); here as a second shard next to the model's own weights.
TEST(MixerParametersFromCheckpoint, LearnedSinksAreReadAndUsed) {
  testing::TempDir dir;
  for (const auto& entry : std::filesystem::directory_iterator(golden_model("qwen3_bf16"))) {
    const std::string name = entry.path().filename().string();
    std::filesystem::copy_file(entry.path(), dir.path() / (name == "model.safetensors" ? "model-00001-of-00002.safetensors" : name));
  }
  const auto original = SafetensorsFile::open(golden_model("qwen3_bf16") / "model.safetensors");
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& tensor : original->tensors()) weight_map[tensor.name] = "model-00001-of-00002.safetensors";
  std::vector<F32Tensor> sinks;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string name = "model.layers." + std::to_string(layer) + ".self_attn.sinks";
    sinks.push_back({name, {4}, {2.0f, -1.0f, 0.5f, 3.0f}});
    weight_map[name] = "model-00002-of-00002.safetensors";
  }
  write_f32_safetensors(dir.path() / "model-00002-of-00002.safetensors", sinks);
  dir.write("model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());

  const Model trained = Model::load(dir.path(), {.mixer = "swa:window=16,sink=learned"});
  EXPECT_TRUE(trained.untrained_parameters().empty());
  const Model neutral = Model::load(golden_model("qwen3_bf16"), {.mixer = "swa:window=16,sink=learned"});
  EXPECT_EQ(neutral.untrained_parameters().size(), 2u);
  // The neutral sink (−1e4) is no sink at all: the same as sink=none, unlike the trained one.
  const Model none = Model::load(golden_model("qwen3_bf16"), {.mixer = "swa:window=16,sink=none"});
  const auto prompt = testing::GoldenReference::load("qwen3_bf16").input_ids;
  auto last_logits = [&](const Model& model) {
    Session session = model.new_session(std::int64_t(prompt.size()));
    const auto logits = model.prefill(session, prompt);
    return std::vector<float>(logits.begin(), logits.end());
  };
  EXPECT_EQ(last_logits(neutral), last_logits(none));
  EXPECT_NE(last_logits(trained), last_logits(none));
  // A sinks tensor of the wrong shape is named.
  write_f32_safetensors(dir.path() / "model-00002-of-00002.safetensors",
                        {{"model.layers.0.self_attn.sinks", {3}, {1, 2, 3}}, {"model.layers.1.self_attn.sinks", {3}, {1, 2, 3}}});
  testing::expect_error([&] { Model::load(dir.path(), {.mixer = "swa:window=16,sink=learned"}); },
                        {"model.layers.0.self_attn.sinks", "[3]", "[4]"});
}

}  // namespace
}  // namespace bifocal
