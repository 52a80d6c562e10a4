// StreamingDecoder: pieces are valid UTF-8, never split a character, and add up to decode(ids),
// on every fixture of every variant (with special tokens kept and skipped), including random id
// sequences with broken byte runs.
#include <gtest/gtest.h>

#include <algorithm>

#include "bifocal/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_cases.h"

namespace bifocal {
namespace {

using testing::escaped;
using testing::ids_text;

struct Stream {
  std::vector<std::string> pieces;  // one per pushed id, then the piece finish() returned
  std::string text;
};

Stream stream(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids, bool skip_special_tokens) {
  StreamingDecoder decoder(tokenizer, skip_special_tokens);
  Stream result;
  for (const std::int32_t id : ids) result.pieces.push_back(decoder.push(id));
  result.pieces.push_back(decoder.finish());
  for (const auto& piece : result.pieces) result.text += piece;
  return result;
}

void expect_stream_matches_decode(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids) {
  for (const bool skip : {false, true}) {
    const Stream result = stream(tokenizer, ids, skip);
    for (const auto& piece : result.pieces)
      EXPECT_TRUE(tokenizer::is_valid_utf8(piece)) << "piece " << escaped(piece) << " of ids " << ids_text(ids);
    EXPECT_EQ(escaped(result.text), escaped(tokenizer.decode(ids, skip))) << "ids " << ids_text(ids) << " skip " << skip;
  }
}

std::filesystem::path tokenizer_json_of(const std::string& variant) {
  const auto main_dir = testing::golden_tokenizer_dir(variant);
  return std::filesystem::exists(main_dir) ? main_dir / "tokenizer.json"
                                           : testing::golden_tokenizer_dir("features") / variant / "tokenizer.json";
}

std::vector<std::string> all_variants() {
  std::vector<std::string> variants = testing::tokenizer_variants();
  for (const auto& name : testing::tokenizer_feature_variants()) variants.push_back(name);
  return variants;
}

class TokenizerStreaming : public ::testing::TestWithParam<std::string> {
 protected:
  Tokenizer tokenizer_ = Tokenizer::from_file(tokenizer_json_of(GetParam()));
};

TEST_P(TokenizerStreaming, PiecesAddUpToDecodeOfFixtureIds) {
  const auto cases = testing::load_tokenizer_cases(tokenizer_json_of(GetParam()).parent_path() / "cases.jsonl");
  for (const auto& c : cases) {
    expect_stream_matches_decode(tokenizer_, c.ids);
    expect_stream_matches_decode(tokenizer_, c.ids_special);
  }
}

TEST_P(TokenizerStreaming, PiecesAddUpToDecodeOfRandomIds) {
  const auto features = testing::golden_tokenizer_dir("features");
  const auto path = std::filesystem::exists(features / GetParam()) ? features / GetParam() / "decode_cases.jsonl"
                                                                   : features / ("decode_" + GetParam() + ".jsonl");
  for (const auto& c : testing::load_decode_cases(path)) expect_stream_matches_decode(tokenizer_, c.ids);
}

TEST_P(TokenizerStreaming, LongStreamsAddUpToDecode) {
  // All fixture and random id sequences back to back: thousands of tokens, so the decoder's
  // window moves many times, across special tokens, byte runs and broken UTF-8.
  const auto dir = tokenizer_json_of(GetParam()).parent_path();
  const auto features = testing::golden_tokenizer_dir("features");
  const auto random_path = std::filesystem::exists(features / GetParam()) ? dir / "decode_cases.jsonl"
                                                                          : features / ("decode_" + GetParam() + ".jsonl");
  std::vector<std::int32_t> fixture_ids, random_ids, mixed_ids;
  for (const auto& c : testing::load_tokenizer_cases(dir / "cases.jsonl"))
    fixture_ids.insert(fixture_ids.end(), c.ids_special.begin(), c.ids_special.end());
  for (const auto& c : testing::load_decode_cases(random_path)) random_ids.insert(random_ids.end(), c.ids.begin(), c.ids.end());
  for (std::size_t i = 0; i < std::max(fixture_ids.size(), random_ids.size()); i += 7) {
    mixed_ids.insert(mixed_ids.end(), fixture_ids.begin() + std::min(i, fixture_ids.size()),
                     fixture_ids.begin() + std::min(i + 7, fixture_ids.size()));
    mixed_ids.insert(mixed_ids.end(), random_ids.begin() + std::min(i, random_ids.size()),
                     random_ids.begin() + std::min(i + 3, random_ids.size()));
  }
  ASSERT_GT(fixture_ids.size(), 1000u);
  expect_stream_matches_decode(tokenizer_, fixture_ids);
  expect_stream_matches_decode(tokenizer_, random_ids);
  expect_stream_matches_decode(tokenizer_, mixed_ids);
}

INSTANTIATE_TEST_SUITE_P(TokenizerVariants, TokenizerStreaming, ::testing::ValuesIn(all_variants()),
                         [](const auto& info) { return info.param; });

const std::string kGrinning = "\xF0\x9F\x98\x80", kSmiley = "\xF0\x9F\x98\x83";

TEST(TokenizerStreamingByteLevel, EmojiAppearsWhenItsLastByteArrives) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json_of("gpt2_bytelevel"));
  const auto ids = tokenizer.encode(kGrinning + kSmiley);
  ASSERT_EQ(ids.size(), 8u);  // one byte token per UTF-8 byte in this small vocabulary
  const Stream result = stream(tokenizer, ids, false);
  const std::vector<std::string> expected = {"", "", "", kGrinning, "", "", "", kSmiley, ""};
  EXPECT_EQ(result.pieces, expected);
}

TEST(TokenizerStreamingByteLevel, BrokenByteIsReleasedAsReplacementOnceItCannotComplete) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json_of("gpt2_bytelevel"));
  const auto lead = tokenizer.encode(kGrinning).front();  // the 0xF0 byte alone
  const auto letter = tokenizer.encode("a").front();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(lead), "");
  EXPECT_EQ(decoder.push(letter), "\xEF\xBF\xBD" "a");  // U+FFFD, as from_utf8_lossy gives
  EXPECT_EQ(decoder.finish(), "");
}

TEST(TokenizerStreamingByteFallback, ByteRunIsHeldUntilItEnds) {
  // A run of <0xNN> tokens decodes as one group (all of it U+FFFD if any byte is wrong), so
  // nothing of it is final before a non-byte token or the end of the stream.
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json_of("sp_legacy"));
  std::vector<std::int32_t> ids = tokenizer.encode(kGrinning + kSmiley);
  ASSERT_EQ(ids.size(), 9u);  // "▁" and eight byte tokens
  ids.push_back(*tokenizer.token_id("a"));
  const Stream result = stream(tokenizer, ids, false);
  for (std::size_t i = 0; i + 2 < result.pieces.size(); ++i) EXPECT_EQ(result.pieces[i], "") << "piece " << i;
  EXPECT_EQ(result.pieces[ids.size() - 1], kGrinning + kSmiley + "a");
  EXPECT_EQ(result.text, tokenizer.decode(ids));
}

TEST(TokenizerStreamingByteFallback, FinishReleasesAnOpenRunAndStartsAFreshStream) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json_of("sp_legacy"));
  StreamingDecoder decoder(tokenizer);
  for (const std::int32_t id : tokenizer.encode(kGrinning)) EXPECT_EQ(decoder.push(id), "");
  EXPECT_EQ(decoder.finish(), kGrinning);
  // The next stream decodes from scratch: its leading "▁" is stripped again.
  std::string second;
  for (const std::int32_t id : tokenizer.encode("hi")) second += decoder.push(id);
  second += decoder.finish();
  EXPECT_EQ(second, "hi");
}

TEST(TokenizerStreamingByteFallback, BrokenRunBecomesOneReplacementPerByte) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json_of("sp_legacy"));
  const std::vector<std::int32_t> ids = {*tokenizer.token_id("<0xF0>"), *tokenizer.token_id("<0x9F>"),
                                         *tokenizer.token_id("a")};
  const Stream result = stream(tokenizer, ids, false);
  EXPECT_EQ(result.pieces, (std::vector<std::string>{"", "", "\xEF\xBF\xBD\xEF\xBF\xBD" "a", ""}));
}

TEST(TokenizerStreamingSpecialTokens, SkippedSpecialTokensLeaveNoTrace) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json_of("qwen2_bytelevel"));
  std::vector<std::int32_t> ids = tokenizer.encode("<|im_start|>hello<|im_end|>");
  StreamingDecoder decoder(tokenizer, /*skip_special_tokens=*/true);
  std::string text;
  for (const std::int32_t id : ids) text += decoder.push(id);
  text += decoder.finish();
  EXPECT_EQ(text, "hello");
}

}  // namespace
}  // namespace bifocal
