// tokenizer.json "pre_tokenizer": cuts each normalized stretch of text into the words that BPE
// encodes one by one (ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence).
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/pattern.h"

namespace bifocal::tokenizer {

// One piece of pre-tokenized text. `at_text_start` says whether the piece begins at offset 0 of
// the original input (HF: offsets_original().0 == 0), which Metaspace's prepend_scheme "first"
// consults.
struct PreToken {
  std::string text;
  bool at_text_start;
};

// Metaspace's prepend_scheme, shared with the Metaspace decoder.
enum class PrependScheme { kAlways, kFirst, kNever };
PrependScheme prepend_scheme_from_json(const nlohmann::json& spec, const std::string& where);

class PreTokenizer {
 public:
  // `spec` may be null (the whole stretch is one word). Throws Error "<where>: ..." for an
  // unsupported type.
  static PreTokenizer from_json(const nlohmann::json& spec, const std::string& where);

  // Replaces `pieces` by their pre-tokenized sub-pieces, in order; empty pieces are dropped.
  void pre_tokenize(std::vector<PreToken>& pieces) const;

 private:
  struct ByteLevel { bool add_prefix_space; bool use_regex; };
  struct Split { Pattern pattern; SplitBehavior behavior; bool invert; };
  struct Metaspace {
    std::string replacement;
    PrependScheme prepend_scheme;
    std::optional<Pattern> split_on;  // the replacement character, when split is true
  };
  using Step = std::variant<ByteLevel, Split, Metaspace>;

  static void append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps);
  std::vector<Step> steps_;  // a Sequence is flattened: its members run in order
};

}  // namespace bifocal::tokenizer
