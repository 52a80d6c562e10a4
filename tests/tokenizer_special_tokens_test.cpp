// BOS/EOS from tokenizer_config.json and generation_config.json, and the vocabulary queries.
#include <gtest/gtest.h>

#include <fstream>

#include "bifocal/tokenizer.h"
#include "tokenizer_cases.h"

namespace bifocal {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::int32_t>;

fs::path golden_model_dir(const std::string& name) { return fs::path(BIFOCAL_GOLDEN_DIR) / "models" / name; }

TEST(TokenizerSpecialTokens, QwenModelEndsAtEndOfText) {
  const Tokenizer tokenizer = Tokenizer::from_dir(golden_model_dir("qwen2_fp32_tied"));
  EXPECT_EQ(tokenizer.eos_ids(), Ids{0});
  EXPECT_EQ(tokenizer.token_text(0), "<|endoftext|>");
  EXPECT_FALSE(tokenizer.bos_id().has_value());
  EXPECT_EQ(tokenizer.vocab_size(), 769);
  EXPECT_TRUE(tokenizer.is_special(0));
  EXPECT_TRUE(tokenizer.is_special(2));
  EXPECT_FALSE(tokenizer.is_special(768));  // [NEWTOK] is added but not special
  EXPECT_FALSE(tokenizer.is_special(300));
  EXPECT_EQ(tokenizer.token_id("<|im_start|>"), 1);
  EXPECT_EQ(tokenizer.token_id("[NEWTOK]"), 768);
  EXPECT_FALSE(tokenizer.token_id("not a token").has_value());
  // No template: add_special_tokens adds nothing.
  EXPECT_EQ(tokenizer.encode("hello", true), tokenizer.encode("hello", false));
}

TEST(TokenizerSpecialTokens, EveryGoldenModelLoadsItsTokenizer) {
  const Tokenizer reference = Tokenizer::from_file(testing::golden_tokenizer_dir("qwen2_bytelevel") / "tokenizer.json");
  for (const auto& entry : fs::directory_iterator(fs::path(BIFOCAL_GOLDEN_DIR) / "models")) {
    const Tokenizer tokenizer = Tokenizer::from_dir(entry.path());
    EXPECT_EQ(tokenizer.eos_ids(), Ids{0}) << entry.path();
    EXPECT_EQ(tokenizer.encode("Hello, world!"), reference.encode("Hello, world!")) << entry.path();
  }
}

TEST(TokenizerSpecialTokens, SentencePieceStyleBosAndEos) {
  const Tokenizer tokenizer = Tokenizer::from_dir(testing::golden_tokenizer_dir("sp_legacy"));
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_EQ(tokenizer.eos_ids(), Ids{2});
  EXPECT_EQ(tokenizer.token_text(1), "<s>");
  EXPECT_EQ(tokenizer.token_text(2), "</s>");
  Ids expected = {1};
  for (const std::int32_t id : tokenizer.encode("hi there")) expected.push_back(id);
  EXPECT_EQ(tokenizer.encode("hi there", true), expected);
}

TEST(TokenizerSpecialTokens, FromFileReadsNoConfiguration) {
  const Tokenizer tokenizer = Tokenizer::from_file(testing::golden_tokenizer_dir("sp_legacy") / "tokenizer.json");
  EXPECT_FALSE(tokenizer.bos_id().has_value());
  EXPECT_TRUE(tokenizer.eos_ids().empty());
}

class TokenizerConfigDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("bifocal_tokenizer_config_") + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void use(const std::string& variant, const std::string& tokenizer_config, const std::string& generation_config = "") {
    fs::copy_file(testing::golden_tokenizer_dir(variant) / "tokenizer.json", dir_ / "tokenizer.json");
    std::ofstream(dir_ / "tokenizer_config.json") << tokenizer_config;
    if (!generation_config.empty()) std::ofstream(dir_ / "generation_config.json") << generation_config;
  }
  fs::path dir_;
};

TEST_F(TokenizerConfigDir, AddBosTokenDoesNotDoubleTheTemplatesBos) {
  use("sp_legacy", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
                       "add_bos_token": true, "add_eos_token": true})");
  const Tokenizer tokenizer = Tokenizer::from_dir(dir_);
  Ids expected = {1};
  for (const std::int32_t id : tokenizer.encode("hi")) expected.push_back(id);
  expected.push_back(2);
  EXPECT_EQ(tokenizer.encode("hi", true), expected);
  EXPECT_EQ(tokenizer.encode("hi", false).front(), expected[1]);
}

TEST_F(TokenizerConfigDir, AddBosTokenWithoutTemplate) {
  use("qwen2_bytelevel", R"({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": true})");
  const Tokenizer tokenizer = Tokenizer::from_dir(dir_);
  EXPECT_EQ(tokenizer.bos_id(), 1);
  Ids expected = {1};
  for (const std::int32_t id : tokenizer.encode("hi")) expected.push_back(id);
  EXPECT_EQ(tokenizer.encode("hi", true), expected);
}

TEST_F(TokenizerConfigDir, EosIdsAreTheUnionOfBothFiles) {
  use("qwen2_bytelevel", R"({"eos_token": "<|im_end|>", "bos_token": null})",
      R"({"eos_token_id": [0, 2], "bos_token_id": 1})");
  const Tokenizer tokenizer = Tokenizer::from_dir(dir_);
  EXPECT_EQ(tokenizer.eos_ids(), (Ids{2, 0}));
  EXPECT_EQ(tokenizer.bos_id(), 1);  // from generation_config.json when tokenizer_config has none
}

TEST_F(TokenizerConfigDir, SingleEosIdInGenerationConfig) {
  use("qwen2_bytelevel", R"({})", R"({"eos_token_id": 2})");
  EXPECT_EQ(Tokenizer::from_dir(dir_).eos_ids(), Ids{2});
}

}  // namespace
}  // namespace bifocal
