// What HF tokenizers calls a Pattern (a literal string, a regex, or a character predicate) and
// NormalizedString::split's delimiter behaviours. Split pre-tokenizers, Replace normalizers and
// Replace decoders all cut text through here.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"

namespace bifocal::tokenizer {

// A piece of the searched text: [begin, end) in bytes, and whether the pattern matched it.
struct PatternMatch {
  std::size_t begin;
  std::size_t end;
  bool is_match;
};

class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(const std::string& expression);  // throws std::invalid_argument
  static Pattern character(std::function<bool(char32_t)> predicate);
  // {"String": "..."} or {"Regex": "..."} as tokenizer.json writes SplitPattern / ReplacePattern.
  static Pattern from_json(const nlohmann::json& spec, const std::string& where);

  // Pattern::find_matches: consecutive pieces covering all of `text` (one empty non-match for
  // empty text). Each regex/literal match and each matching character is its own piece.
  std::vector<PatternMatch> find_matches(std::string_view text) const;
  // Every match replaced by `content`, as NormalizedString::replace and str::replace do.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::optional<std::string> literal_;
  std::optional<Regex> regex_;
  std::function<bool(char32_t)> predicate_;
};

// SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
SplitBehavior split_behavior_from_json(const nlohmann::json& value, const std::string& where);

struct TextSpan {
  std::size_t begin;
  std::size_t end;
};
// NormalizedString::split: groups the pieces by `behavior`; `invert` swaps match and non-match
// first (Split's `invert`, HF's Invert pattern). Empty spans are dropped, as
// PreTokenizedString::split drops empty splits.
std::vector<TextSpan> split_spans(std::vector<PatternMatch> pieces, SplitBehavior behavior, bool invert = false);

}  // namespace bifocal::tokenizer
