#include "eval/answer_extraction.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <utility>
#include <vector>

namespace bifocal::eval {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// The length of the number written at text[begin…] (a digit there), or 0: digits, then groups of
// exactly three digits after thousands commas, then an optional decimal part.
std::size_t number_length(std::string_view text, std::size_t begin) {
  std::size_t end = begin;
  while (end < text.size() && is_digit(text[end])) ++end;
  if (end == begin) return 0;
  while (end + 3 < text.size() && text[end] == ',' && is_digit(text[end + 1]) && is_digit(text[end + 2]) &&
         is_digit(text[end + 3]) && (end + 4 == text.size() || !is_digit(text[end + 4])))
    end += 4;
  if (end + 1 < text.size() && text[end] == '.' && is_digit(text[end + 1])) {
    ++end;
    while (end < text.size() && is_digit(text[end])) ++end;
  }
  return end - begin;
}

// Every number of `text` in order, as written (a minus sign kept when it stands right before
// the digits and does not join two words or numbers, as in "3-4").
std::vector<std::string_view> numbers_in(std::string_view text) {
  std::vector<std::string_view> numbers;
  std::size_t at = 0;
  while (at < text.size()) {
    if (!is_digit(text[at])) {
      ++at;
      continue;
    }
    const std::size_t length = number_length(text, at);
    std::size_t begin = at;
    if (begin > 0 && text[begin - 1] == '-' &&
        (begin == 1 || !(is_digit(text[begin - 2]) || is_letter(text[begin - 2]))))
      --begin;
    numbers.push_back(text.substr(begin, at + length - begin));
    at += length;
  }
  return numbers;
}

std::optional<std::string> first_number(std::string_view text) {
  const auto numbers = numbers_in(text);
  if (numbers.empty()) return std::nullopt;
  return std::string(numbers.front());
}

std::string_view rest_of_line(std::string_view text, std::size_t from) {
  const std::string_view rest = text.substr(from);
  return rest.substr(0, rest.find('\n'));
}

// The content of the brace group opening at text[open] ('{'), or nothing when it never closes.
std::optional<std::string_view> brace_group(std::string_view text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(open + 1, i - open - 1);
  }
  return std::nullopt;
}

// The answer of one box command starting at text[at] (its backslash), if complete and not empty.
std::optional<std::string> box_content(std::string_view text, std::size_t at, std::size_t command_length) {
  std::size_t i = at + command_length;
  if (i < text.size() && is_letter(text[i])) return std::nullopt;  // \boxedfoo is another command
  while (i < text.size() && text[i] == ' ') ++i;
  if (i >= text.size()) return std::nullopt;
  if (text[i] == '{') {
    const auto content = brace_group(text, i);
    if (!content || trim(*content).empty()) return std::nullopt;
    return std::string(trim(*content));
  }
  // "\boxed 5$": the argument runs to the closing dollar or the end of the word.
  if (i == at + command_length) return std::nullopt;
  std::size_t end = i;
  while (end < text.size() && text[end] != '$' && !is_space(text[end])) ++end;
  if (end == i) return std::nullopt;
  return std::string(text.substr(i, end - i));
}

// A/B of two exact numbers, reduced; nothing on division by zero or overflow.
std::optional<ExactNumber> make_ratio(__int128 numerator, __int128 denominator) {
  if (denominator == 0) return std::nullopt;
  if (denominator < 0) {
    numerator = -numerator;
    denominator = -denominator;
  }
  __int128 a = numerator < 0 ? -numerator : numerator, b = denominator;
  while (b != 0) a = std::exchange(b, a % b);
  const __int128 divisor = a == 0 ? 1 : a;
  numerator /= divisor;
  denominator /= divisor;
  constexpr __int128 kLimit = std::numeric_limits<std::int64_t>::max();
  if (numerator > kLimit || numerator < -kLimit || denominator > kLimit) return std::nullopt;
  return ExactNumber{std::int64_t(numerator), std::int64_t(denominator)};
}

// "[+-]digits[,ddd…][.digits]" exactly (no other character), at most 18 significant digits.
std::optional<ExactNumber> parse_decimal(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || !is_digit(text.front()) || number_length(text, 0) != text.size()) return std::nullopt;
  __int128 numerator = 0, denominator = 1;
  int significant_digits = 0;
  bool after_point = false;
  for (const char c : text) {
    if (c == ',') continue;
    if (c == '.') {
      after_point = true;
      continue;
    }
    if (numerator != 0 || c != '0') ++significant_digits;
    if (significant_digits > 18) return std::nullopt;
    numerator = numerator * 10 + (c - '0');
    if (after_point) denominator *= 10;
    if (denominator > __int128(1e18)) return std::nullopt;
  }
  return make_ratio(negative ? -numerator : numerator, denominator);
}

std::optional<ExactNumber> divide(const ExactNumber& a, const ExactNumber& b) {
  return make_ratio(__int128(a.numerator) * b.denominator, __int128(a.denominator) * b.numerator);
}

// "\frac{A}{B}" or "\frac12" (one digit each), A and B decimals: the whole text, nothing else.
std::optional<ExactNumber> parse_frac(std::string_view text) {
  constexpr std::string_view kFrac = "\\frac";
  if (!text.starts_with(kFrac)) return std::nullopt;
  text.remove_prefix(kFrac.size());
  if (text.size() == 2 && is_digit(text[0]) && is_digit(text[1]))
    return make_ratio(text[0] - '0', text[1] - '0');
  if (text.empty() || text.front() != '{') return std::nullopt;
  const auto top = brace_group(text, 0);
  if (!top) return std::nullopt;
  const std::string_view after = text.substr(top->size() + 2);
  if (after.empty() || after.front() != '{') return std::nullopt;
  const auto bottom = brace_group(after, 0);
  if (!bottom || bottom->size() + 2 != after.size()) return std::nullopt;
  const auto a = parse_decimal(*top), b = parse_decimal(*bottom);
  if (!a || !b) return std::nullopt;
  return divide(*a, *b);
}

// Replaces \text{X}, \textbf{X}, \mathrm{X}, \mbox{X} by X (units and words written in math).
std::string unwrap_text_commands(std::string text) {
  for (const std::string_view command : {"\\text", "\\textbf", "\\mathrm", "\\mbox"}) {
    for (std::size_t at = text.find(command); at != std::string::npos; at = text.find(command, at)) {
      const std::size_t open = at + command.size();
      const auto content = open < text.size() && text[open] == '{' ? brace_group(text, open) : std::nullopt;
      if (!content) {
        at = open;
        continue;
      }
      const std::string inner(*content);
      text.replace(at, inner.size() + 2 + command.size(), inner);
    }
  }
  return text;
}

// Also drops a sentence's final period after the math ("$18$.").
std::string_view strip_math_delimiters(std::string_view text) {
  text = trim(text);
  if (text.ends_with('.')) text = trim(text.substr(0, text.size() - 1));
  for (const auto& [open, close] : std::array<std::pair<std::string_view, std::string_view>, 3>{
           {{"$$", "$$"}, {"$", "$"}, {"\\(", "\\)"}}})
    if (text.size() >= open.size() + close.size() && text.starts_with(open) && text.ends_with(close))
      return trim(text.substr(open.size(), text.size() - open.size() - close.size()));
  return text;
}

// Splits at commas outside braces, brackets and parentheses.
std::vector<std::string_view> split_top_level_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' || c == '(' || c == '[') ++depth;
    if (c == '}' || c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(trim(text.substr(begin, i - begin)));
      begin = i + 1;
    }
  }
  parts.push_back(trim(text.substr(begin)));
  return parts;
}

bool single_answers_match(std::string_view predicted, std::string_view reference) {
  const auto a = parse_numeric_answer(predicted), b = parse_numeric_answer(reference);
  if (a && b) return *a == *b;
  return normalize_answer_text(predicted) == normalize_answer_text(reference);
}

}  // namespace

std::string_view answer_source_name(AnswerSource source) {
  switch (source) {
    case AnswerSource::boxed: return "boxed";
    case AnswerSource::hash_marker: return "####";
    case AnswerSource::answer_phrase: return "answer is";
    case AnswerSource::last_number: return "last number";
    case AnswerSource::none: return "none";
  }
  return "none";
}

std::optional<std::string> last_boxed_content(std::string_view text) {
  std::optional<std::string> best;
  std::size_t best_at = 0;
  for (const std::string_view command : {"\\boxed", "\\fbox"}) {
    for (std::size_t at = text.rfind(command); at != std::string::npos; at = at == 0 ? std::string::npos : text.rfind(command, at - 1)) {
      if (best && at < best_at) break;
      if (auto content = box_content(text, at, command.size())) {
        best = std::move(content);
        best_at = at;
        break;
      }
    }
  }
  return best;
}

std::optional<std::string> number_after_marker(std::string_view text, std::string_view marker) {
  const std::size_t at = text.rfind(marker);
  if (at == std::string_view::npos) return std::nullopt;
  return first_number(rest_of_line(text, at + marker.size()));
}

std::optional<std::string> last_number(std::string_view text) {
  const auto numbers = numbers_in(text);
  if (numbers.empty()) return std::nullopt;
  return std::string(numbers.back());
}

ExtractedAnswer extract_final_answer(std::string_view text) {
  if (auto boxed = last_boxed_content(text)) return {std::move(*boxed), AnswerSource::boxed};
  if (auto marked = number_after_marker(text, "####")) return {std::move(*marked), AnswerSource::hash_marker};
  const std::string lower = lowercase(text);
  constexpr std::string_view kPhrase = "answer is";
  if (const std::size_t at = lower.rfind(kPhrase); at != std::string::npos)
    if (auto stated = first_number(rest_of_line(text, at + kPhrase.size())))
      return {std::move(*stated), AnswerSource::answer_phrase};
  if (auto number = last_number(text)) return {std::move(*number), AnswerSource::last_number};
  return {};
}

std::optional<ExactNumber> parse_numeric_answer(std::string_view answer) {
  std::string text = unwrap_text_commands(std::string(strip_math_delimiters(answer)));
  replace_all(text, "{,}", ",");  // LaTeX's thousands separator: 10{,}000
  for (const std::string_view noise : {"\\$", "$", "\\%", "%", "\\!", "\\,", "\\;", "\\ "}) replace_all(text, noise, "");
  replace_all(text, "\\dfrac", "\\frac");
  replace_all(text, "\\tfrac", "\\frac");
  std::string_view value = trim(text);
  // "x = 5": a name and one equals sign before the value.
  if (const std::size_t equals = value.find('='); equals != std::string_view::npos && value.find('=', equals + 1) == std::string_view::npos) {
    const std::string_view name = trim(value.substr(0, equals));
    if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return is_letter(c) || c == '_'; }))
      value = trim(value.substr(equals + 1));
  }
  if (value.ends_with('.')) value.remove_suffix(1);
  // "18 dollars": words after the value are a unit.
  if (const std::size_t space = value.find(' '); space != std::string_view::npos) {
    const std::string_view words = value.substr(space);
    if (std::all_of(words.begin(), words.end(), [](char c) { return is_letter(c) || c == ' '; })) value = value.substr(0, space);
  }
  std::string compact;
  for (const char c : value)
    if (!is_space(c)) compact += c;
  std::string_view number = compact;
  bool negative = false;
  if (!number.empty() && (number.front() == '-' || number.front() == '+') && number.substr(1).starts_with("\\frac")) {
    negative = number.front() == '-';
    number.remove_prefix(1);
  }
  std::optional<ExactNumber> parsed;
  if (number.starts_with("\\frac")) {
    parsed = parse_frac(number);
  } else if (const std::size_t slash = number.find('/'); slash != std::string_view::npos) {
    const auto a = parse_decimal(number.substr(0, slash)), b = parse_decimal(number.substr(slash + 1));
    if (a && b) parsed = divide(*a, *b);
  } else {
    parsed = parse_decimal(number);
  }
  if (parsed && negative) parsed->numerator = -parsed->numerator;
  return parsed;
}

std::string normalize_answer_text(std::string_view answer) {
  std::string text(strip_math_delimiters(answer));
  replace_all(text, "\\dfrac", "\\frac");
  replace_all(text, "\\tfrac", "\\frac");
  for (const std::string_view spacing : {"\\!", "\\,", "\\;", "\\ "}) replace_all(text, spacing, "");
  // \left( and \right) size a delimiter; \leftarrow is another command and stays.
  for (const std::string_view sizing : {"\\left", "\\right"})
    for (std::size_t at = text.find(sizing); at != std::string::npos; at = text.find(sizing, at + 1))
      if (at + sizing.size() >= text.size() || !is_letter(text[at + sizing.size()])) text.erase(at, sizing.size());
  std::string compact;
  for (const char c : text)
    if (!is_space(c)) compact += c;
  if (compact.ends_with('.')) compact.pop_back();
  return compact;
}

bool answers_match(std::string_view predicted, std::string_view reference) {
  if (single_answers_match(predicted, reference)) return true;
  if (parse_numeric_answer(reference)) return false;
  const auto wanted = split_top_level_commas(strip_math_delimiters(reference));
  if (wanted.size() < 2) return false;
  const auto given = split_top_level_commas(strip_math_delimiters(predicted));
  if (given.size() != wanted.size()) return false;
  std::vector<bool> used(given.size(), false);
  for (const auto& part : wanted) {
    bool found = false;
    for (std::size_t i = 0; i < given.size() && !found; ++i)
      if (!used[i] && single_answers_match(given[i], part)) used[i] = found = true;
    if (!found) return false;
  }
  return true;
}

}  // namespace bifocal::eval
