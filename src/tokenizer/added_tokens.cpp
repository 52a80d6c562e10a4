#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

namespace {

char32_t last_code_point(std::string_view text) {
  std::size_t begin = text.size() - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return next_code_point(text, begin);
}

// The helpers of HF's added_vocabulary.rs, which use Rust regex's Unicode \w and \s.
bool ends_with_word(std::string_view text) { return !text.empty() && is_word_character(last_code_point(text)); }
bool starts_with_word(std::string_view text) {
  std::size_t pos = 0;
  return !text.empty() && is_word_character(next_code_point(text, pos));
}
// Where the whitespace run at the end of `text` begins (`\s*$`).
std::size_t trailing_space_start(std::string_view text) {
  std::size_t start = text.size();
  while (start > 0) {
    std::size_t begin = start - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    std::size_t pos = begin;
    if (!is_whitespace(next_code_point(text, pos))) break;
    start = begin;
  }
  return start;
}
// Length of the whitespace run at the start of `text` (`^\s*`).
std::size_t leading_space_length(std::string_view text) {
  std::size_t end = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    if (!is_whitespace(next_code_point(text, pos))) break;
    end = pos;
  }
  return end;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, std::size_t token_index) {
  std::size_t node = 0;
  for (const char byte : pattern) {
    const auto key = static_cast<unsigned char>(byte);
    auto it = nodes_[node].children.find(key);
    if (it == nodes_[node].children.end()) {
      nodes_.push_back(Node{});
      it = nodes_[node].children.emplace(key, nodes_.size() - 1).first;
    }
    node = it->second;
  }
  // The first token with a given pattern wins, as the lower pattern id does in aho-corasick.
  if (!nodes_[node].token_index) nodes_[node].token_index = token_index;
}

std::optional<std::pair<std::size_t, std::size_t>> AddedVocabulary::Matcher::longest_at(std::string_view text,
                                                                                         std::size_t pos) const {
  std::optional<std::pair<std::size_t, std::size_t>> longest;
  std::size_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto it = nodes_[node].children.find(static_cast<unsigned char>(text[i]));
    if (it == nodes_[node].children.end()) break;
    node = it->second;
    if (nodes_[node].token_index) longest = {{i + 1 - pos, *nodes_[node].token_index}};
  }
  return longest;
}

AddedVocabulary AddedVocabulary::from_json(const nlohmann::json& spec, const Normalizer& normalizer,
                                           const std::string& where) {
  AddedVocabulary vocabulary;
  if (spec.is_null()) return vocabulary;
  if (!spec.is_array()) fail(where, "'added_tokens' must be an array");
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const std::string entry_where = where + "[" + std::to_string(i) + "]";
    AddedToken token;
    token.content = json_get<std::string>(spec[i], "content", entry_where);
    const auto id = json_get<std::int64_t>(spec[i], "id", entry_where);
    if (id < 0 || id > INT32_MAX) fail(entry_where, "id " + std::to_string(id) + " is out of range");
    token.id = static_cast<std::int32_t>(id);
    // Defaults are those of HF's AddedToken.
    token.special = json_get_or<bool>(spec[i], "special", false, entry_where);
    token.single_word = json_get_or<bool>(spec[i], "single_word", false, entry_where);
    token.lstrip = json_get_or<bool>(spec[i], "lstrip", false, entry_where);
    token.rstrip = json_get_or<bool>(spec[i], "rstrip", false, entry_where);
    token.normalized = json_get_or<bool>(spec[i], "normalized", true, entry_where);
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    token.decoded_form = token.normalized ? normalizer.normalize(token.content) : token.content;
    if (const auto it = vocabulary.index_of_content_.find(token.content); it != vocabulary.index_of_content_.end()) {
      vocabulary.index_of_id_.erase(vocabulary.tokens_[it->second].id);
      vocabulary.tokens_[it->second] = token;  // a repeated content updates the earlier entry
      vocabulary.index_of_id_[token.id] = it->second;
      continue;
    }
    vocabulary.index_of_content_[token.content] = vocabulary.tokens_.size();
    vocabulary.index_of_id_[token.id] = vocabulary.tokens_.size();
    vocabulary.tokens_.push_back(token);
  }
  // HF builds its tries from the special tokens first, then the others.
  for (const bool special_pass : {true, false}) {
    for (std::size_t i = 0; i < vocabulary.tokens_.size(); ++i) {
      const AddedToken& token = vocabulary.tokens_[i];
      if (token.special != special_pass) continue;
      if (token.normalized) vocabulary.normalized_matcher_.add(normalizer.normalize(token.content), i);
      else vocabulary.raw_matcher_.add(token.content, i);
    }
  }
  return vocabulary;
}

std::vector<AddedVocabulary::Cut> AddedVocabulary::find_cuts(std::string_view text, const Matcher& matcher) const {
  std::vector<Cut> cuts;
  std::size_t covered = 0;  // HF's start_offset: the end of the last cut
  for (std::size_t pos = 0; pos < text.size();) {
    const auto match = matcher.longest_at(text, pos);
    if (!match) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + match->first;
    pos = stop;  // matches never overlap, even when one is discarded below
    const AddedToken& token = tokens_[match->second];
    if (token.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), covered);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (covered < start) cuts.push_back({covered, start, std::nullopt});
    cuts.push_back({start, stop, token.id});
    covered = stop;
  }
  if (covered < text.size()) cuts.push_back({covered, text.size(), std::nullopt});
  return cuts;
}

std::vector<TextSegment> AddedVocabulary::split_and_normalize(std::string_view text, const Normalizer& normalizer) const {
  std::vector<TextSegment> segments;
  const std::vector<Cut> raw_cuts =
      raw_matcher_.empty() ? std::vector<Cut>{{0, text.size(), std::nullopt}} : find_cuts(text, raw_matcher_);
  for (const Cut& cut : raw_cuts) {
    if (cut.id) {
      segments.push_back({"", cut.id, cut.begin == 0});
      continue;
    }
    if (cut.end == cut.begin) continue;
    const std::string normalized = normalizer.normalize(text.substr(cut.begin, cut.end - cut.begin));
    const bool at_text_start = cut.begin == 0;
    if (normalized_matcher_.empty()) {
      if (!normalized.empty()) segments.push_back({normalized, std::nullopt, at_text_start});
      continue;
    }
    for (const Cut& inner : find_cuts(normalized, normalized_matcher_)) {
      if (inner.id) segments.push_back({"", inner.id, false});
      else if (inner.end > inner.begin)
        segments.push_back({normalized.substr(inner.begin, inner.end - inner.begin), std::nullopt,
                            at_text_start && inner.begin == 0});
    }
  }
  return segments;
}

const AddedToken* AddedVocabulary::find(std::int32_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<std::int32_t> AddedVocabulary::id_of(std::string_view content) const {
  const auto it = index_of_content_.find(std::string(content));
  if (it == index_of_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

bool AddedVocabulary::is_special(std::string_view token) const {
  const auto it = index_of_content_.find(std::string(token));
  return it != index_of_content_.end() && tokens_[it->second].special;
}

std::int32_t AddedVocabulary::id_end() const {
  std::int32_t end = 0;
  for (const AddedToken& token : tokens_) end = std::max(end, token.id + 1);
  return end;
}

}  // namespace bifocal::tokenizer
