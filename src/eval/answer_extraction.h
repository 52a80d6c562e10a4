// The final answer of a generated solution, and whether it equals the reference answer: the
// checkable end of the long-generation tasks (GSM8K, AIME, HMMT, the testbed's arithmetic).
//
// Extraction looks, in order, for
//   1. the last complete \boxed{...} (or \fbox{...}) whose braces balance — the convention the
//      math-competition prompt asks for (matharena's instruction; Minerva-style grading);
//   2. the number after the last "####" — GSM8K's own solution format;
//   3. the number after the last "answer is" — the phrase the testbed's worked solutions end
//      with ("The answer is 959.") and a common chain-of-thought ending;
//   4. the last number anywhere in the text.
// Comparison is numeric when both sides read as numbers (thousands commas, "$", "%", trailing
// zeros, leading zeros, \frac{a}{b} and a/b are all accepted), else textual after removing
// whitespace and presentation-only LaTeX (\left, \right, \dfrac → \frac, enclosing $…$).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bifocal::eval {

enum class AnswerSource { boxed, hash_marker, answer_phrase, last_number, none };

// "boxed", "####", "answer is", "last number", "none" (what the details record).
std::string_view answer_source_name(AnswerSource source);

struct ExtractedAnswer {
  std::string text;  // as written: the box's content, or the number (without a trailing period)
  AnswerSource source = AnswerSource::none;
};

// The content of the last \boxed{…} or \fbox{…} whose closing brace is present (nested braces
// balanced); a box cut off by the end of the text is skipped in favour of an earlier one.
std::optional<std::string> last_boxed_content(std::string_view text);

// The first number on the line after the last occurrence of `marker` (e.g. "####").
std::optional<std::string> number_after_marker(std::string_view text, std::string_view marker);

// The last number in `text`: an optional minus sign, digits (thousands commas allowed between
// groups of three), an optional decimal part. "It costs $1,200.50." → "1,200.50".
std::optional<std::string> last_number(std::string_view text);

// The final answer by the order given at the top of this file; source none with empty text
// when the text holds no number and no box.
ExtractedAnswer extract_final_answer(std::string_view text);

// An exact rational value: numerator / denominator, denominator > 0, in lowest terms.
struct ExactNumber {
  std::int64_t numerator = 0;
  std::int64_t denominator = 1;
  friend bool operator==(const ExactNumber&, const ExactNumber&) = default;
};

// The value of an answer that is a number: "1,000", "-3", "18.0", "$18", "50\%", "025",
// "\frac{1}{576}", "-\dfrac{3}{4}", "3/4", "x = 5", "18 dollars", "\text{18}". Nothing when the
// answer is not a plain number (e.g. "8\sqrt{10}") or has more than 18 significant digits.
std::optional<ExactNumber> parse_numeric_answer(std::string_view answer);

// The textual form used when an answer is not a number: whitespace removed, enclosing $…$ or
// \(…\) removed, \dfrac and \tfrac written \frac, \left and \right dropped, a final period
// dropped.
std::string normalize_answer_text(std::string_view answer);

// Whether `predicted` is the same answer as `reference`: numerically equal when both are
// numbers; else equal normalized texts. A reference that is a comma-separated list (HMMT's
// "a, b") matches a prediction with the same elements in any order.
bool answers_match(std::string_view predicted, std::string_view reference);

}  // namespace bifocal::eval
