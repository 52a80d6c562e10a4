// The random checkpoint of random_mixer_checkpoint.h as the engine reads it: every mixer tensor a
// mixer needs is read (the model reports none untrained, the golden model some), and the tensors
// move the logits well past the device tests' fp32 bound (relative change 0.019–1.29) — which is what
// lets tests/cuda/cuda_model_test.cpp's RandomMixerTensorsMatchTheCpu see a tensor the device lost,
// misplaced or misread.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bifocal/model.h"
#include "golden_model.h"
#include "numerics.h"
#include "random_mixer_checkpoint.h"

namespace bifocal {
namespace {

using testing::all_token_logits;

TEST(RandomMixerCheckpoint, EveryTensorIsReadAndMovesTheLogits) {
  // A single-file checkpoint, one with a key bias, and a sharded one (its index merged).
  testing::for_each_random_mixer_checkpoint(
      {"qwen3_bf16", "qwen2_fp32_tied", "llama_fp32_sharded"},
      [](const std::string& name, const auto& checkpoint, const auto& tokens, const std::string& mixer) {
        ModelOptions options;
        options.mixer = mixer;
        const Model trained = Model::load(checkpoint, options);
        const Model neutral = Model::load(testing::golden_model(name), options);
        EXPECT_TRUE(trained.untrained_parameters().empty()) << trained.untrained_parameters().front();
        EXPECT_FALSE(neutral.untrained_parameters().empty());
        const double moved =
            testing::relative_error(all_token_logits(trained, tokens), all_token_logits(neutral, tokens));
        EXPECT_GT(moved, 1e-2);
      });
}

}  // namespace
}  // namespace bifocal
