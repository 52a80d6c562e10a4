// tokenizer.json "added_tokens": tokens matched verbatim in the input before normalization and
// pre-tokenization (special tokens such as <|im_start|>, and user-added ones), with HF's
// single_word / lstrip / rstrip / normalized rules (AddedVocabulary::extract_and_normalize).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/normalizer.h"

namespace bifocal::tokenizer {

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  // What decode shows for this id: the normalizer's output for a normalized token, the content
  // otherwise (HF's AddedVocabulary::simple_id_to_token and its normalized_cache).
  std::string decoded_form;
};

// A stretch of the input after added tokens are cut out: either an added token's id, or
// normalized text still to be pre-tokenized. `at_text_start`: the stretch begins at offset 0 of
// the input (Metaspace's prepend_scheme "first" looks at this).
struct TextSegment {
  std::string text;
  std::optional<std::int32_t> added_id;
  bool at_text_start = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `spec` is the "added_tokens" array (or null). Normalized tokens are matched against their
  // normalized form, so the normalizer is needed here.
  static AddedVocabulary from_json(const nlohmann::json& spec, const Normalizer& normalizer, const std::string& where);

  // Splits `text` on non-normalized tokens, normalizes the text between them, then splits that
  // on normalized tokens. Empty stretches are dropped.
  std::vector<TextSegment> split_and_normalize(std::string_view text, const Normalizer& normalizer) const;

  const AddedToken* find(std::int32_t id) const;
  std::optional<std::int32_t> id_of(std::string_view content) const;
  // HF decides "special" by the token string, compared with the contents of special tokens.
  bool is_special(std::string_view token) const;
  std::int32_t id_end() const;                      // largest added id + 1 (0 when none)

 private:
  // Byte trie over token contents with aho-corasick's LeftmostLongest semantics.
  class Matcher {
   public:
    void add(std::string_view pattern, std::size_t token_index);
    bool empty() const { return nodes_.size() <= 1; }
    // The longest pattern that starts at `pos`: {length, token index}, or nothing.
    std::optional<std::pair<std::size_t, std::size_t>> longest_at(std::string_view text, std::size_t pos) const;

   private:
    struct Node {
      std::map<unsigned char, std::size_t> children;
      std::optional<std::size_t> token_index;
    };
    std::vector<Node> nodes_{Node{}};
  };

  struct Cut {
    std::size_t begin, end;
    std::optional<std::int32_t> id;
  };
  std::vector<Cut> find_cuts(std::string_view text, const Matcher& matcher) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::int32_t, std::size_t> index_of_id_;
  std::unordered_map<std::string, std::size_t> index_of_content_;
  Matcher raw_matcher_;         // tokens with normalized = false, matched in the raw input
  Matcher normalized_matcher_;  // tokens with normalized = true, matched in normalized text
};

}  // namespace bifocal::tokenizer
