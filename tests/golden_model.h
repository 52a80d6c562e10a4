// Access to the HF-made model fixtures under tests/golden/models/ (tools/golden/make_models.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "io/safetensors.h"

namespace bifocal::testing {

inline std::filesystem::path golden_dir() { return BIFOCAL_GOLDEN_DIR; }
inline std::filesystem::path golden_model(const std::string& name) { return golden_dir() / "models" / name; }
// The embedded testbed model (models/testbed, tools/testbed/).
inline std::filesystem::path testbed_model() { return golden_dir() / ".." / ".." / "models" / "testbed"; }

inline const std::vector<std::string>& golden_model_names() {
  static const std::vector<std::string> names{"llama_fp32_sharded", "mistral_fp16_swa", "qwen2_fp32_tied", "qwen3_bf16"};
  return names;
}

// A suite sharing one loaded testbed model and its tokenizer (loaded once per suite).
class TestbedSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_dir(testbed_model()));
    model_ = std::make_unique<Model>(Model::load(testbed_model()));
  }
  static void TearDownTestSuite() {
    model_.reset();
    tokenizer_.reset();
  }
  static inline std::unique_ptr<Tokenizer> tokenizer_;
  static inline std::unique_ptr<Model> model_;
};

// A copy of the golden Qwen3 checkpoint in `dir` whose final norm weight is +inf in bf16: every
// logit is then NaN (∞ · x summed over both signs in the LM head), as after an fp16 overflow.
inline std::filesystem::path golden_qwen3_with_infinite_final_norm(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(golden_model("qwen3_bf16")))
    std::filesystem::copy_file(entry.path(), dir / entry.path().filename());
  const auto path = dir / "model.safetensors";
  std::uint64_t offset = 0, bytes = 0;
  {  // where the tensor lies, from the project's reader (the mapping closes before the write)
    const auto checkpoint = SafetensorsFile::open(path);
    const TensorView* norm = checkpoint->find("model.norm.weight");
    EXPECT_TRUE(norm != nullptr && norm->dtype == DType::BF16);
    if (norm == nullptr) return dir;
    offset = norm->file_offset, bytes = norm->bytes.size();
  }
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(std::streamoff(offset));
  for (std::uint64_t at = 0; at < bytes; at += 2) file.write("\x80\x7f", 2);  // bf16 +inf
  return dir;
}

// Logits of every token of `tokens`, prefilled from a fresh session in chunks of `chunk`. The
// session has a few positions to spare, as one that decodes on would.
inline std::vector<float> all_token_logits(const Model& model, std::span<const std::int32_t> tokens, int chunk = 64) {
  Session session = model.new_session(std::int64_t(tokens.size()) + 8, chunk);
  std::vector<float> logits(tokens.size() * std::size_t(model.config().vocab_size));
  model.forward(session, tokens, logits, /*all_logits=*/true);
  return logits;
}

// HF's outputs for one fixture: prompt ids, 16 greedy ids, float64-exact logits of the whole
// sequence, and the prompt logits computed in the checkpoint's own dtype.
struct GoldenReference {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> greedy_ids;
  std::vector<float> logits;         // [input + greedy, vocab]
  std::vector<float> logits_native;  // [input, vocab]
  std::int64_t vocab = 0;

  static GoldenReference load(const std::string& model_name) {
    auto file = SafetensorsFile::open(golden_model(model_name) / "reference.safetensors");
    GoldenReference r;
    for (auto id : file->find("input_ids")->to_i64()) r.input_ids.push_back(std::int32_t(id));
    for (auto id : file->find("greedy_ids")->to_i64()) r.greedy_ids.push_back(std::int32_t(id));
    r.logits = file->find("logits")->to_f32();
    r.logits_native = file->find("logits_native")->to_f32();
    r.vocab = file->find("logits")->shape.at(1);
    return r;
  }
  std::vector<std::int32_t> full_sequence() const {
    auto all = input_ids;
    all.insert(all.end(), greedy_ids.begin(), greedy_ids.end());
    return all;
  }
};

}  // namespace bifocal::testing
