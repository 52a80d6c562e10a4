// A compiled PCRE2 regular expression that finds matches the way HF tokenizers' Oniguruma
// wrapper (SysRegex::find_iter) does, so Split and Replace patterns cut text identically.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bifocal::tokenizer {

class Regex {
 public:
  // Compiles with PCRE2_UTF | PCRE2_UCP, so \s, \w, \d and \p{..} are Unicode-aware as in
  // Oniguruma. Throws std::invalid_argument with PCRE2's message on a bad pattern.
  explicit Regex(const std::string& pattern);

  // Non-overlapping matches, left to right, as byte ranges [begin, end). Like Oniguruma's
  // find_iter, an empty match right where the previous match ended is skipped.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

}  // namespace bifocal::tokenizer
