// config.json parsing: both RoPE spellings, sliding-window rules, and every bad input named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bifocal/model.h"
#include "bifocal/model_config.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::expect_error;
using testing::TempDir;

nlohmann::json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 300}, {"hidden_size", 64}, {"intermediate_size", 128},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-5}};
}

TEST(ModelConfig, LegacyRopeSpelling) {
  auto json = llama_config();
  json["rope_theta"] = 500000.0;
  json["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  const auto c = ModelConfig::from_json(json, "config.json");
  EXPECT_EQ(c.rope.type, RopeConfig::Type::Llama3);
  EXPECT_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.factor, 32.0);
  EXPECT_EQ(c.head_dim, 16);
}

TEST(ModelConfig, OldestRopeScalingKeyAndLinear) {
  auto json = llama_config();
  json["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(ModelConfig::from_json(json, "config.json").rope.type, RopeConfig::Type::Linear);
}

TEST(ModelConfig, QwenSlidingWindowFromMaxWindowLayers) {
  auto json = llama_config();
  json["architectures"] = {"Qwen2ForCausalLM"};
  json["num_hidden_layers"] = 4;
  json["use_sliding_window"] = true;
  json["sliding_window"] = 32;
  json["max_window_layers"] = 2;
  EXPECT_EQ(ModelConfig::from_json(json, "c").layer_sliding_window, (std::vector<int>{0, 0, 32, 32}));
  json["use_sliding_window"] = false;
  EXPECT_EQ(ModelConfig::from_json(json, "c").layer_sliding_window, (std::vector<int>{0, 0, 0, 0}));
}

TEST(ModelConfig, ArchitectureFromModelTypeWhenArchitecturesMissing) {
  auto json = llama_config();
  json.erase("architectures");
  json["model_type"] = "qwen3";
  EXPECT_EQ(ModelConfig::from_json(json, "c").architecture, Architecture::Qwen3);
}

TEST(ModelConfigErrors, UnknownArchitecture) {
  auto json = llama_config();
  json["architectures"] = {"GPTNeoXForCausalLM"};
  expect_error([&] { ModelConfig::from_json(json, "/m/config.json"); },
               {"/m/config.json", "unknown architecture 'GPTNeoXForCausalLM'"});
}

TEST(ModelConfigErrors, UnknownRopeType) {
  auto json = llama_config();
  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_error([&] { ModelConfig::from_json(json, "/m/config.json"); }, {"/m/config.json", "unsupported rope type 'yarn'"});
}

TEST(ModelConfigErrors, MissingAndMistypedKeys) {
  auto json = llama_config();
  json.erase("hidden_size");
  expect_error([&] { ModelConfig::from_json(json, "cfg"); }, {"cfg", "missing key 'hidden_size'"});
  json = llama_config();
  json["num_hidden_layers"] = "two";
  expect_error([&] { ModelConfig::from_json(json, "cfg"); }, {"cfg", "'num_hidden_layers' must be an integer"});
  json = llama_config();
  json["vocab_size"] = -3;
  expect_error([&] { ModelConfig::from_json(json, "cfg"); }, {"cfg", "'vocab_size' must be a positive integer"});
}

TEST(ModelConfigErrors, HeadsNotDivisible) {
  auto json = llama_config();
  json["num_key_value_heads"] = 3;
  expect_error([&] { ModelConfig::from_json(json, "cfg"); }, {"cfg", "not a multiple of num_key_value_heads"});
}

TEST(ModelConfigErrors, MalformedJsonAndMissingFile) {
  TempDir dir;
  expect_error([&] { ModelConfig::from_dir(dir.path()); }, {(dir.path() / "config.json").string(), "file not found"});
  dir.write("config.json", "{\"vocab_size\": 3,");
  expect_error([&] { ModelConfig::from_dir(dir.path()); }, {(dir.path() / "config.json").string(), "malformed JSON"});
  expect_error([&] { ModelConfig::from_dir(dir.path() / "nope"); }, {"nope", "model directory not found"});
  // Valid syntax, but a number no double holds: nlohmann's out_of_range, reported like a parse error.
  dir.write("config.json", "{\"vocab_size\": 3, \"rope_theta\": 1e400}");
  expect_error([&] { ModelConfig::from_dir(dir.path()); },
               {(dir.path() / "config.json").string(), "malformed JSON", "number overflow"});
}

// A real checkpoint with its config edited so the weights no longer fit it.
class EditedCheckpoint {
 public:
  explicit EditedCheckpoint(const std::function<void(nlohmann::json&)>& edit) {
    for (const auto& entry : std::filesystem::directory_iterator(testing::golden_model("qwen3_bf16")))
      std::filesystem::copy_file(entry.path(), dir_.path() / entry.path().filename());
    auto config = nlohmann::json::parse(std::ifstream(dir_.path() / "config.json"));
    edit(config);
    dir_.write("config.json", config.dump());
  }
  const std::filesystem::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

TEST(ModelLoadErrors, MissingTensor) {
  EditedCheckpoint checkpoint([](nlohmann::json& c) {
    c["num_hidden_layers"] = 3;
    c["layer_types"] = {"full_attention", "full_attention", "full_attention"};
  });
  expect_error([&] { Model::load(checkpoint.path()); }, {"missing tensor", "model.layers.2."});
}

TEST(ModelLoadErrors, ShapeNotMatchingConfig) {
  EditedCheckpoint checkpoint([](nlohmann::json& c) { c["intermediate_size"] = 200; });
  expect_error([&] { Model::load(checkpoint.path()); }, {"model.safetensors", "mlp.gate_proj.weight", "200", "256"});
}

TEST(ModelLoadErrors, MissingWeightsFile) {
  EditedCheckpoint checkpoint([](nlohmann::json&) {});
  std::filesystem::remove(checkpoint.path() / "model.safetensors");
  expect_error([&] { Model::load(checkpoint.path()); }, {checkpoint.path().string(), "model.safetensors"});
}

}  // namespace
}  // namespace bifocal
