// Bad tokenizer files: each load fails with a bifocal::Error that names the file and the problem.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "bifocal/error.h"
#include "bifocal/tokenizer.h"
#include "tokenizer_cases.h"

namespace bifocal {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed when the test ends.
class TokenizerErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("bifocal_tokenizer_errors_") + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& contents) const {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
    return dir_ / name;
  }
  // The qwen2 fixture's tokenizer.json after `edit`, written into the temp dir.
  template <typename Edit>
  fs::path write_edited_tokenizer(Edit edit) const {
    std::ifstream in(testing::golden_tokenizer_dir("qwen2_bytelevel") / "tokenizer.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    edit(spec);
    return write("tokenizer.json", spec.dump());
  }
  void copy_tokenizer_json(const std::string& variant) const {
    fs::copy_file(testing::golden_tokenizer_dir(variant) / "tokenizer.json", dir_ / "tokenizer.json");
  }

  fs::path dir_;
};

// Runs `load`, expecting an Error whose message contains `file` and every one of `parts`.
template <typename Load>
void expect_error(Load load, const fs::path& file, std::initializer_list<std::string> parts) {
  try {
    load();
    ADD_FAILURE() << "no error; expected one naming " << file;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(file.string()), std::string::npos) << "message does not name the file: " << message;
    for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST_F(TokenizerErrors, MissingTokenizerJson) {
  expect_error([&] { Tokenizer::from_dir(dir_); }, dir_ / "tokenizer.json", {"file not found"});
  expect_error([&] { Tokenizer::from_file(dir_ / "nope.json"); }, dir_ / "nope.json", {"file not found"});
}

TEST_F(TokenizerErrors, MalformedJson) {
  const auto path = write("tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  expect_error([&] { Tokenizer::from_file(path); }, path, {"malformed JSON"});
}

TEST_F(TokenizerErrors, UnsupportedModelTypes) {
  for (const std::string type : {"WordPiece", "Unigram", "WordLevel"}) {
    const auto path = write_edited_tokenizer([&](nlohmann::json& spec) { spec["model"]["type"] = type; });
    expect_error([&] { Tokenizer::from_file(path); }, path, {"unsupported model type '" + type + "'"});
  }
}

TEST_F(TokenizerErrors, UnsupportedPipelineTypes) {
  struct Case {
    const char* part;
    nlohmann::json spec;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}, "unsupported pre-tokenizer type 'BertPreTokenizer'"},
      {"pre_tokenizer",
       {{"type", "Sequence"}, {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "UnicodeScripts"}}}}},
       "unsupported pre-tokenizer type 'UnicodeScripts'"},
      {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}}, "unsupported normalizer type 'Precompiled'"},
      {"decoder", {{"type", "WordPiece"}}, "unsupported decoder type 'WordPiece'"},
      {"post_processor", {{"type", "Frobnicate"}}, "unsupported post-processor type 'Frobnicate'"},
  };
  for (const auto& c : cases) {
    const auto path = write_edited_tokenizer([&](nlohmann::json& spec) { spec[c.part] = c.spec; });
    expect_error([&] { Tokenizer::from_file(path); }, path, {c.part, c.expected});
  }
}

TEST_F(TokenizerErrors, MergeWithTokenMissingFromVocabulary) {
  const auto path = write_edited_tokenizer([](nlohmann::json& spec) {
    spec["model"]["merges"].push_back({"zzz", "qqq"});
  });
  expect_error([&] { Tokenizer::from_file(path); }, path, {"'zzz'", "not in the vocabulary"});
}

TEST_F(TokenizerErrors, MergeWhoseResultIsMissingFromVocabulary) {
  const auto path = write_edited_tokenizer([](nlohmann::json& spec) { spec["model"]["merges"].push_back({"x", "q"}); });
  expect_error([&] { Tokenizer::from_file(path); }, path, {"'xq'", "not in the vocabulary"});
}

TEST_F(TokenizerErrors, MalformedMerge) {
  const auto path = write_edited_tokenizer([](nlohmann::json& spec) { spec["model"]["merges"].push_back("a b c"); });
  expect_error([&] { Tokenizer::from_file(path); }, path, {"merge #", "\"a b c\""});
}

TEST_F(TokenizerErrors, InvalidSplitRegex) {
  const auto path = write_edited_tokenizer([](nlohmann::json& spec) {
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}};
  });
  expect_error([&] { Tokenizer::from_file(path); }, path, {"invalid regex '(unclosed'"});
}

TEST_F(TokenizerErrors, MalformedTokenizerConfig) {
  copy_tokenizer_json("qwen2_bytelevel");
  const auto config = write("tokenizer_config.json", "{\"eos_token\": ");
  expect_error([&] { Tokenizer::from_dir(dir_); }, config, {"malformed JSON"});
}

TEST_F(TokenizerErrors, TokenizerConfigTokenNotInVocabulary) {
  copy_tokenizer_json("qwen2_bytelevel");
  const auto config = write("tokenizer_config.json", R"({"eos_token": {"content": "<|nope|>"}})");
  expect_error([&] { Tokenizer::from_dir(dir_); }, config, {"eos_token", "'<|nope|>'", "not in the tokenizer's vocabulary"});
}

TEST_F(TokenizerErrors, MalformedGenerationConfig) {
  copy_tokenizer_json("qwen2_bytelevel");
  const auto config = write("generation_config.json", R"({"eos_token_id": "endoftext"})");
  expect_error([&] { Tokenizer::from_dir(dir_); }, config, {"'eos_token_id' must be"});
  write("generation_config.json", "[1, 2");
  expect_error([&] { Tokenizer::from_dir(dir_); }, config, {"malformed JSON"});
}

TEST_F(TokenizerErrors, InvalidUtf8Input) {
  const Tokenizer tokenizer = Tokenizer::from_file(testing::golden_tokenizer_dir("qwen2_bytelevel") / "tokenizer.json");
  EXPECT_THROW(tokenizer.encode("abc\xC3"), Error);
  EXPECT_THROW(tokenizer.token_text(100000), Error);
}

}  // namespace
}  // namespace bifocal
