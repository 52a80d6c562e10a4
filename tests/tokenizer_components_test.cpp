// The tokenizer's building blocks against documented behaviour: UTF-8 handling as Rust's
// from_utf8_lossy, GPT-2's byte alphabet, and NormalizedString::split's delimiter behaviours
// (the worked example of HF's Split pre-tokenizer documentation).
#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {
namespace {

std::vector<std::string> split_text(const std::string& text, const Pattern& pattern, SplitBehavior behavior,
                                    bool invert = false) {
  std::vector<std::string> pieces;
  for (const TextSpan& span : split_spans(pattern.find_matches(text), behavior, invert))
    pieces.push_back(text.substr(span.begin, span.end - span.begin));
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerSplit, DelimiterBehavioursOfHfDocumentation) {
  const std::string text = "the-final--countdown";
  const Pattern dash = Pattern::literal("-");
  EXPECT_EQ(split_text(text, dash, SplitBehavior::kRemoved), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(split_text(text, dash, SplitBehavior::kIsolated), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_text(text, dash, SplitBehavior::kMergedWithPrevious), (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_text(text, dash, SplitBehavior::kMergedWithNext), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_text(text, dash, SplitBehavior::kContiguous), (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(TokenizerSplit, InvertKeepsWhatThePatternDoesNotMatch) {
  EXPECT_EQ(split_text("ab12cd3", Pattern::regex(R"(\d+)"), SplitBehavior::kRemoved, /*invert=*/true),
            (Pieces{"12", "3"}));
  EXPECT_EQ(split_text("", Pattern::regex(R"(\d+)"), SplitBehavior::kIsolated), Pieces{});
}

TEST(TokenizerSplit, RegexIsUnicodeAwareLikeOniguruma) {
  // \s matches U+00A0 and U+3000 (White_Space) and \p{L} matches any script, as in Oniguruma.
  const Pattern words = Pattern::regex(R"(\p{L}+|\s+)");
  EXPECT_EQ(split_text("caf\u00e9\u00a0\u65e5\u672c\u3000x", words, SplitBehavior::kIsolated),
            (Pieces{"caf\u00e9", "\u00a0", "\u65e5\u672c", "\u3000", "x"}));
  // (?i:'s) matches 'S, and (?!\S) leaves the last space for the next word, as GPT-2's regex wants.
  EXPECT_EQ(split_text("IT'S  ok", Pattern::regex(R"((?i:'s)|\p{L}+|\s+(?!\S)|\s+)"), SplitBehavior::kIsolated),
            (Pieces{"IT", "'S", " ", " ", "ok"}));
}

TEST(TokenizerSplit, EmptyMatchesAreSkippedLikeOnigurumasFindIter) {
  const auto matches = Pattern::regex("x*").find_matches("axb");
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const auto& m : matches)
    if (m.is_match) spans.emplace_back(m.begin, m.end);
  // An empty match at 0, "x" at 1..2, then the empty match at 2 (where "x" ended) is dropped.
  EXPECT_EQ(spans, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {1, 2}, {3, 3}}));
}

TEST(TokenizerUtf8, LossyDecodingReplacesEachMaximalBrokenSequence) {
  // Examples from Rust's String::from_utf8_lossy documentation and the Unicode "maximal subpart"
  // practice it follows.
  EXPECT_EQ(utf8_lossy("Hello \xF0\x90\x80World"), "Hello \xEF\xBF\xBDWorld");
  EXPECT_EQ(utf8_lossy("\xC3"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("a\x80\x80" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_lossy("\xE0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: 3 bytes, 3 errors
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // > U+10FFFF
  EXPECT_EQ(utf8_lossy("\xE4\xB8" "a"), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(utf8_lossy("\xE4\xB8\xAD"), "\xE4\xB8\xAD");
}

TEST(TokenizerUtf8, UnfinishedTailIsOnlyAValidPrefixAtTheEnd) {
  EXPECT_EQ(unfinished_utf8_tail(""), 0u);
  EXPECT_EQ(unfinished_utf8_tail("abc"), 0u);
  EXPECT_EQ(unfinished_utf8_tail("a\xE4"), 1u);
  EXPECT_EQ(unfinished_utf8_tail("a\xE4\xB8"), 2u);
  EXPECT_EQ(unfinished_utf8_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(unfinished_utf8_tail("a\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(unfinished_utf8_tail("\xFF"), 0u);      // can never start a character
  EXPECT_EQ(unfinished_utf8_tail("\xE0\x80"), 0u);  // already broken (overlong)
  EXPECT_EQ(unfinished_utf8_tail("\x80"), 0u);
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9"));
  EXPECT_FALSE(is_valid_utf8("caf\xC3"));
}

TEST(TokenizerByteLevel, Gpt2AlphabetIsPrintableAndReversible) {
  EXPECT_EQ(bytes_to_alphabet(" "), "\u0120");   // 'Ġ'
  EXPECT_EQ(bytes_to_alphabet("\n"), "\u010a");  // 'Ċ'
  EXPECT_EQ(bytes_to_alphabet(std::string(1, '\0')), "\u0100");
  EXPECT_EQ(bytes_to_alphabet("a!~"), "a!~");
  EXPECT_EQ(bytes_to_alphabet("\xAD"), "\u0143");  // soft hyphen is not printable: 256 + 67
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    EXPECT_EQ(token_bytes(bytes_to_alphabet(byte)), byte) << b;
  }
  // A token with a character outside the alphabet is kept as written.
  EXPECT_EQ(token_bytes("<|im start|>"), "<|im start|>");
}

TEST(TokenizerUnicode, RustCharacterPredicates) {
  EXPECT_TRUE(is_whitespace(U'\u00a0'));
  EXPECT_TRUE(is_whitespace(U'\u3000'));
  EXPECT_FALSE(is_whitespace(U'\u200b'));  // zero width space is not White_Space
  EXPECT_TRUE(is_numeric(U'\u0663'));      // Arabic-Indic three (Nd)
  EXPECT_TRUE(is_numeric(U'\u2460'));      // circled one (No)
  EXPECT_FALSE(is_numeric(U'x'));
  std::string lowered;
  append_lowercase(lowered, U'\u0130');
  EXPECT_EQ(lowered, "i\u0307");
}

}  // namespace
}  // namespace bifocal::tokenizer
