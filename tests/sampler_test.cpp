// The CPU Sampler (src/runtime/sampler.cpp): greedy is the first index of the largest logit,
// top-k = 1 is greedy at any temperature, masked (−∞) tokens are never drawn, a seed replays its
// draws, and logits a model should never produce (NaN, +∞) fail naming the token instead of
// giving an arbitrary one (also from a real model's NaN logits; the device sampler's side is
// CudaModel.LogitsWithoutAFiniteValueAreAnErrorNotAToken).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "bifocal/model.h"
#include "bifocal/sampler.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal {
namespace {

TEST(Sampler, GreedyIsTheFirstIndexOfTheLargestLogit) {
  Sampler greedy({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0}, 6);
  EXPECT_EQ(greedy.sample(std::vector<float>{0.5f, 3.0f, -1.0f, 3.0f, -INFINITY, 2.9f}), 1);
  Sampler top1({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .seed = 9}, 6);
  for (int draw = 0; draw < 20; ++draw)
    EXPECT_EQ(top1.sample(std::vector<float>{0.5f, 2.0f, -1.0f, 3.0f, 0.0f, 2.9f}), 3);
}

TEST(Sampler, MaskedTokensAreNeverDrawnAndASeedReplaysItsDraws) {
  const std::vector<float> logits = {1.0f, -INFINITY, 1.0f, -INFINITY, 1.0f};
  Sampler first({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42}, 5);
  Sampler again({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42}, 5);
  std::set<int> drawn;
  for (int draw = 0; draw < 200; ++draw) {
    const int token = first.sample(logits);
    EXPECT_EQ(again.sample(logits), token) << "draw " << draw;
    drawn.insert(token);
  }
  EXPECT_EQ(drawn, (std::set<int>{0, 2, 4}));
}

TEST(Sampler, NonFiniteLogitsAreNamed) {
  for (const float temperature : {0.0f, 0.8f}) {
    Sampler sampler({.temperature = temperature, .top_k = 40, .top_p = 0.95f, .seed = 1}, 4);
    testing::expect_error([&] { sampler.sample(std::vector<float>{0.0f, NAN, 1.0f, 2.0f}); },
                          {"sampler", "token 1", "NaN", "--dtype bf16"});
    testing::expect_error([&] { sampler.sample(std::vector<float>{0.0f, 1.0f, 2.0f, INFINITY}); },
                          {"sampler", "token 3", "+inf"});
  }
}

// A model whose logits are all NaN (its final norm weight is +inf): sampling its prefill fails
// instead of generating token 0 over and over.
TEST(Sampler, AModelsNaNLogitsStopTheGeneration) {
  testing::TempDir dir;
  const Model model = Model::load(testing::golden_qwen3_with_infinite_final_norm(dir.path()));
  Session session = model.new_session(16);
  Sampler sampler({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0}, model.config().vocab_size);
  testing::expect_error([&] { sampler.sample(model.prefill(session, std::vector<std::int32_t>{5, 17, 99})); },
                        {"sampler", "NaN"});
}

}  // namespace
}  // namespace bifocal
