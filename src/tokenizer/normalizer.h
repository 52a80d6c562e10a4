// tokenizer.json "normalizer": applied to each stretch of input text between added tokens before
// pre-tokenization (NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip, StripAccents, Sequence).
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/pattern.h"

namespace bifocal::tokenizer {

class Normalizer {
 public:
  // `spec` may be null (no normalizer). Throws Error "<where>: ..." for an unsupported type.
  static Normalizer from_json(const nlohmann::json& spec, const std::string& where);

  std::string normalize(std::string_view text) const;

 private:
  struct UnicodeForm { int utf8proc_options; };
  struct Lowercase {};
  struct Prepend { std::string prefix; };
  struct Replace { Pattern pattern; std::string content; };
  struct Strip { bool left, right; };
  struct StripAccents {};
  using Step = std::variant<UnicodeForm, Lowercase, Prepend, Replace, Strip, StripAccents>;

  static void append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps);
  std::vector<Step> steps_;  // a Sequence is flattened: its members run in order
};

}  // namespace bifocal::tokenizer
