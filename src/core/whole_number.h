// Whole numbers typed by users (flag values, task options): decimal digits and nothing else — no
// sign, no space, no trailing text — so that "12abc", " 12" or "+12" are refused where they are
// parsed rather than read as 12. Each caller checks its own range and names itself in the error.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace bifocal {

// The value of `text` when it is one or more decimal digits that fit an int64, else nothing.
inline std::optional<std::int64_t> parse_whole_number(std::string_view text) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The same, when the value also fits an int (counts the engine keeps in int).
inline std::optional<int> parse_whole_int(std::string_view text) {
  const auto value = parse_whole_number(text);
  if (!value || *value > std::numeric_limits<int>::max()) return std::nullopt;
  return int(*value);
}

}  // namespace bifocal
