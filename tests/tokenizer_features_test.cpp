// Parity with HF tokenizers 0.23.2 on the pipeline pieces the trained variants do not use:
// tokenizers/features/<variant> (tools/golden/make_tokenizer_features.py) swaps normalizers,
// pre-tokenizers, added-token options, post-processors and decoders on the fixture vocabularies,
// and decode_*.jsonl pins decode on random id sequences (broken UTF-8, stray special tokens).
#include <gtest/gtest.h>

#include "bifocal/tokenizer.h"
#include "tokenizer_cases.h"

namespace bifocal {
namespace {

using testing::escaped;
using testing::ids_text;

std::filesystem::path feature_dir(const std::string& variant) {
  return testing::golden_tokenizer_dir("features") / variant;
}

class TokenizerFeatureParity : public ::testing::TestWithParam<std::string> {
 protected:
  Tokenizer tokenizer_ = Tokenizer::from_file(feature_dir(GetParam()) / "tokenizer.json");
  std::vector<testing::TokenizerCase> cases_ = testing::load_tokenizer_cases(feature_dir(GetParam()) / "cases.jsonl");
};

TEST_P(TokenizerFeatureParity, EncodeMatchesHf) {
  ASSERT_GT(cases_.size(), 150u);
  for (const auto& c : cases_) {
    EXPECT_EQ(ids_text(tokenizer_.encode(c.text)), ids_text(c.ids)) << "text " << escaped(c.text);
    EXPECT_EQ(ids_text(tokenizer_.encode(c.text, true)), ids_text(c.ids_special)) << "text " << escaped(c.text);
  }
}

TEST_P(TokenizerFeatureParity, DecodeMatchesHf) {
  for (const auto& c : cases_) {
    EXPECT_EQ(escaped(tokenizer_.decode(c.ids)), escaped(c.decoded)) << "ids " << ids_text(c.ids);
    EXPECT_EQ(escaped(tokenizer_.decode(c.ids, true)), escaped(*c.decoded_skip)) << "ids " << ids_text(c.ids);
  }
}

TEST_P(TokenizerFeatureParity, DecodeOfRandomIdsMatchesHf) {
  const auto cases = testing::load_decode_cases(feature_dir(GetParam()) / "decode_cases.jsonl");
  ASSERT_EQ(cases.size(), 150u);
  for (const auto& c : cases) {
    EXPECT_EQ(escaped(tokenizer_.decode(c.ids)), escaped(c.decoded)) << "ids " << ids_text(c.ids);
    EXPECT_EQ(escaped(tokenizer_.decode(c.ids, true)), escaped(c.decoded_skip)) << "ids " << ids_text(c.ids);
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerFeatures, TokenizerFeatureParity, ::testing::ValuesIn(testing::tokenizer_feature_variants()),
                         [](const auto& info) { return info.param; });

class TokenizerRandomDecodeParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerRandomDecodeParity, DecodeOfRandomIdsMatchesHf) {
  const Tokenizer tokenizer = Tokenizer::from_file(testing::golden_tokenizer_dir(GetParam()) / "tokenizer.json");
  const auto cases =
      testing::load_decode_cases(testing::golden_tokenizer_dir("features") / ("decode_" + GetParam() + ".jsonl"));
  ASSERT_EQ(cases.size(), 150u);
  for (const auto& c : cases) {
    EXPECT_EQ(escaped(tokenizer.decode(c.ids)), escaped(c.decoded)) << "ids " << ids_text(c.ids);
    EXPECT_EQ(escaped(tokenizer.decode(c.ids, true)), escaped(c.decoded_skip)) << "ids " << ids_text(c.ids);
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerVariants, TokenizerRandomDecodeParity, ::testing::ValuesIn(testing::tokenizer_variants()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace bifocal
