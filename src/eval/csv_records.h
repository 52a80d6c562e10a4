// Comma-separated values as RFC 4180 defines them (the MMLU files of ../shared/data are written
// that way): fields separated by commas, records by LF or CRLF, a field in double quotes may
// hold commas, line breaks and doubled quotes ("" for one "). Blank lines are skipped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bifocal::eval {

struct CsvRecord {
  std::vector<std::string> fields;
  std::size_t line = 0;  // 1-based line on which the record starts
};

// Throws Error "<where>:<line>: ..." for an unterminated quoted field or text after a closing quote.
std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& where);

}  // namespace bifocal::eval
