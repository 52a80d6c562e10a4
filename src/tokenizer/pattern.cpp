#include "tokenizer/pattern.h"

#include <algorithm>
#include <stdexcept>

#include "bifocal/error.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

Pattern Pattern::literal(std::string text) {
  Pattern pattern;
  // HF escapes the string into a regex; an empty one matches between characters, which only
  // the regex path reproduces.
  if (text.empty()) pattern.regex_.emplace(text);
  else pattern.literal_ = std::move(text);
  return pattern;
}

Pattern Pattern::regex(const std::string& expression) {
  Pattern pattern;
  pattern.regex_.emplace(expression);
  return pattern;
}

Pattern Pattern::character(std::function<bool(char32_t)> predicate) {
  Pattern pattern;
  pattern.predicate_ = std::move(predicate);
  return pattern;
}

Pattern Pattern::from_json(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_object() && spec.size() == 1) {
    const std::string kind = spec.begin().key();
    const nlohmann::json& value = spec.begin().value();
    if (value.is_string()) {
      if (kind == "String") return literal(value.get<std::string>());
      if (kind == "Regex") {
        try {
          return regex(value.get<std::string>());
        } catch (const std::invalid_argument& e) {
          fail(where, "invalid regex '" + value.get<std::string>() + "': " + e.what());
        }
      }
    }
  }
  fail(where, "pattern must be {\"String\": ...} or {\"Regex\": ...}, got " + spec.dump());
}

std::vector<PatternMatch> Pattern::find_matches(std::string_view text) const {
  if (text.empty()) return {{0, 0, false}};
  std::vector<PatternMatch> pieces;
  std::size_t previous_end = 0;
  auto add_match = [&](std::size_t begin, std::size_t end) {
    if (previous_end != begin) pieces.push_back({previous_end, begin, false});
    pieces.push_back({begin, end, true});
    previous_end = end;
  };
  if (literal_) {
    for (std::size_t at = text.find(*literal_); at != std::string_view::npos; at = text.find(*literal_, at + literal_->size()))
      add_match(at, at + literal_->size());
  } else if (regex_) {
    for (const auto& [begin, end] : regex_->find_all(text)) add_match(begin, end);
  } else {
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t begin = pos;
      if (predicate_(next_code_point(text, pos))) add_match(begin, pos);
    }
  }
  if (previous_end != text.size()) pieces.push_back({previous_end, text.size(), false});
  return pieces;
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  for (const PatternMatch& piece : find_matches(text)) {
    if (piece.is_match) out.append(content);
    else out.append(text.substr(piece.begin, piece.end - piece.begin));
  }
  return out;
}

SplitBehavior split_behavior_from_json(const nlohmann::json& value, const std::string& where) {
  if (value.is_string()) {
    const auto name = value.get<std::string>();
    if (name == "Removed") return SplitBehavior::kRemoved;
    if (name == "Isolated") return SplitBehavior::kIsolated;
    if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (name == "Contiguous") return SplitBehavior::kContiguous;
  }
  fail(where, "unsupported split behavior " + value.dump() +
                  " (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
}

std::vector<TextSpan> split_spans(std::vector<PatternMatch> pieces, SplitBehavior behavior, bool invert) {
  if (invert)
    for (PatternMatch& piece : pieces) piece.is_match = !piece.is_match;

  // (span, keep) pairs, built exactly as NormalizedString::split folds its matches.
  struct Grouped {
    TextSpan span;
    bool keep;
  };
  std::vector<Grouped> grouped;
  grouped.reserve(pieces.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& piece : pieces) grouped.push_back({{piece.begin, piece.end}, true});
      break;
    case SplitBehavior::kRemoved:
      for (const auto& piece : pieces) grouped.push_back({{piece.begin, piece.end}, !piece.is_match});
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& piece : pieces) {
        if (piece.is_match == previous_match && !grouped.empty()) grouped.back().span.end = piece.end;
        else grouped.push_back({{piece.begin, piece.end}, true});
        previous_match = piece.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& piece : pieces) {
        if (piece.is_match && !previous_match && !grouped.empty()) grouped.back().span.end = piece.end;
        else grouped.push_back({{piece.begin, piece.end}, true});
        previous_match = piece.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // Folded from the right: a match joins the piece after it.
      bool previous_match = false;
      for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
        if (it->is_match && !previous_match && !grouped.empty()) grouped.back().span.begin = it->begin;
        else grouped.push_back({{it->begin, it->end}, true});
        previous_match = it->is_match;
      }
      std::reverse(grouped.begin(), grouped.end());
      break;
    }
  }
  std::vector<TextSpan> spans;
  spans.reserve(grouped.size());
  for (const auto& group : grouped)
    if (group.keep && group.span.end > group.span.begin) spans.push_back(group.span);
  return spans;
}

}  // namespace bifocal::tokenizer
