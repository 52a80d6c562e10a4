// Parity with HF tokenizers 0.23.2 on every fixture string of every tokenizer variant
// (tools/golden/make_tokenizers.py made tests/golden/tokenizers/*).
#include <gtest/gtest.h>

#include "bifocal/tokenizer.h"
#include "tokenizer_cases.h"

namespace bifocal {
namespace {

using testing::escaped;
using testing::ids_text;

class TokenizerParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    cases_ = testing::load_tokenizer_cases(GetParam());
    ASSERT_GT(cases_.size(), 200u) << "fixture cases missing for " << GetParam();
  }
  Tokenizer tokenizer_ = Tokenizer::from_file(testing::golden_tokenizer_dir(GetParam()) / "tokenizer.json");
  std::vector<testing::TokenizerCase> cases_;
};

TEST_P(TokenizerParity, EncodeMatchesHf) {
  for (const auto& c : cases_)
    EXPECT_EQ(ids_text(tokenizer_.encode(c.text)), ids_text(c.ids)) << "text " << escaped(c.text);
}

TEST_P(TokenizerParity, EncodeWithSpecialTokensMatchesHf) {
  for (const auto& c : cases_)
    EXPECT_EQ(ids_text(tokenizer_.encode(c.text, /*add_special_tokens=*/true)), ids_text(c.ids_special))
        << "text " << escaped(c.text);
}

TEST_P(TokenizerParity, DecodeMatchesHf) {
  for (const auto& c : cases_)
    EXPECT_EQ(escaped(tokenizer_.decode(c.ids)), escaped(c.decoded)) << "ids " << ids_text(c.ids);
}

TEST_P(TokenizerParity, RoundTripsWhereHfDoes) {
  int round_trips = 0;
  for (const auto& c : cases_) {
    if (c.decoded != c.text) continue;
    ++round_trips;
    EXPECT_EQ(escaped(tokenizer_.decode(tokenizer_.encode(c.text))), escaped(c.text));
  }
  EXPECT_GT(round_trips, 190);
}

INSTANTIATE_TEST_SUITE_P(TokenizerVariants, TokenizerParity, ::testing::ValuesIn(testing::tokenizer_variants()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace bifocal
