// The engine against HF transformers on the four tiny golden models: every logit of a
// 155-token sequence within 1e-4 of HF's float64 run on the same stored weights, the 16 greedy
// tokens exactly, and decode = prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "allocation_counter.h"
#include "bifocal/model.h"
#include "bifocal/sampler.h"
#include "golden_model.h"

namespace bifocal {
namespace {

using testing::GoldenReference;
using testing::golden_model;

double max_abs_difference(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  }
  return worst;
}

class ModelParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelParity, EveryLogitMatchesHF) {
  const Model model = Model::load(golden_model(GetParam()));
  const auto reference = GoldenReference::load(GetParam());
  ASSERT_EQ(reference.vocab, model.config().vocab_size);
  EXPECT_LE(max_abs_difference(testing::all_token_logits(model, reference.full_sequence()), reference.logits), 1e-4)
      << GetParam();
}

TEST_P(ModelParity, GreedyTokensMatchHF) {
  const Model model = Model::load(golden_model(GetParam()));
  const auto reference = GoldenReference::load(GetParam());
  Session session = model.new_session(std::int64_t(reference.input_ids.size() + reference.greedy_ids.size()));
  std::vector<std::int32_t> generated{argmax(model.prefill(session, reference.input_ids))};
  while (generated.size() < reference.greedy_ids.size())
    generated.push_back(argmax(model.decode(session, generated.back())));
  EXPECT_EQ(generated, reference.greedy_ids);
}

// HF computing in the checkpoint's own dtype (bf16/fp16 arithmetic) differs from the exact
// function of the weights by that dtype's rounding; the engine (float32 arithmetic) must agree
// with it to within a few units of that rounding times the logits' scale.
TEST_P(ModelParity, AgreesWithHFNativePrecisionRun) {
  const Model model = Model::load(golden_model(GetParam()));
  const auto reference = GoldenReference::load(GetParam());
  Session session = model.new_session(std::int64_t(reference.input_ids.size()));
  std::vector<float> logits(reference.input_ids.size() * reference.vocab);
  model.forward(session, reference.input_ids, logits, true);
  double unit_roundoff = 1.0 / (1 << 24);  // float32
  if (GetParam().find("bf16") != std::string::npos) unit_roundoff = 1.0 / 256;
  if (GetParam().find("fp16") != std::string::npos) unit_roundoff = 1.0 / 2048;
  double scale = 0;
  for (float v : reference.logits_native) scale = std::max(scale, double(std::fabs(v)));
  const double tolerance = std::max(1e-4, 8 * unit_roundoff * scale);
  EXPECT_LE(max_abs_difference(logits, reference.logits_native), tolerance) << GetParam() << " scale " << scale;
}

TEST_P(ModelParity, DecodeEqualsPrefill) {
  const Model model = Model::load(golden_model(GetParam()));
  const auto sequence = GoldenReference::load(GetParam()).full_sequence();
  const std::size_t vocab = model.config().vocab_size;
  Session prefill_session = model.new_session(std::int64_t(sequence.size()));
  std::vector<float> prefill_logits(sequence.size() * vocab);
  model.forward(prefill_session, sequence, prefill_logits, true);

  // Token by token, and in odd-sized chunks (7 does not divide the window sizes or lengths).
  Session step_session = model.new_session(std::int64_t(sequence.size()), /*chunk=*/7);
  std::vector<float> stepped(sequence.size() * vocab);
  for (std::size_t t = 0; t < sequence.size(); ++t) {
    auto logits = model.decode(step_session, sequence[t]);
    std::copy(logits.begin(), logits.end(), stepped.begin() + t * vocab);
  }
  EXPECT_LE(max_abs_difference(stepped, prefill_logits), 1e-4);
  Session chunked = model.new_session(std::int64_t(sequence.size()), /*chunk=*/7);
  std::vector<float> chunked_logits(sequence.size() * vocab);
  model.forward(chunked, sequence, chunked_logits, true);
  EXPECT_LE(max_abs_difference(chunked_logits, prefill_logits), 1e-4);
}

TEST_P(ModelParity, DecodeAllocatesNothing) {
  const Model model = Model::load(golden_model(GetParam()));
  const auto reference = GoldenReference::load(GetParam());
  Session session = model.new_session(std::int64_t(reference.input_ids.size()) + 32);
  Sampler sampler({.temperature = 0.7f, .top_k = 20, .top_p = 0.9f, .seed = 3}, model.config().vocab_size);
  std::int32_t token = sampler.sample(model.prefill(session, reference.input_ids));
  const auto before = testing::allocations_so_far();
  for (int step = 0; step < 32; ++step) token = sampler.sample(model.decode(session, token));
  EXPECT_EQ(testing::allocations_so_far() - before, 0);
}

INSTANTIATE_TEST_SUITE_P(Golden, ModelParity, ::testing::ValuesIn(testing::golden_model_names()));

TEST(ModelConfigFromFixtures, ReadsWhatHFWrote) {
  const auto llama = ModelConfig::from_dir(golden_model("llama_fp32_sharded"));
  EXPECT_EQ(llama.architecture, Architecture::Llama);
  EXPECT_EQ(llama.rope.type, RopeConfig::Type::Llama3);
  EXPECT_EQ(llama.num_kv_heads, 2);
  EXPECT_FALSE(llama.tie_word_embeddings);
  const auto mistral = ModelConfig::from_dir(golden_model("mistral_fp16_swa"));
  EXPECT_EQ(mistral.layer_sliding_window, (std::vector<int>{16, 16}));
  const auto qwen2 = ModelConfig::from_dir(golden_model("qwen2_fp32_tied"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_TRUE(qwen2.tie_word_embeddings);
  EXPECT_EQ(qwen2.layer_sliding_window, (std::vector<int>{0, 24, 24}));
  const auto qwen3 = ModelConfig::from_dir(golden_model("qwen3_bf16"));
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_EQ(qwen3.head_dim, 48);
  EXPECT_EQ(qwen3.eos_token_ids, (std::vector<std::int32_t>{0}));
}

}  // namespace
}  // namespace bifocal
