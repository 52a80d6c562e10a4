#include "eval/csv_records.h"

#include "bifocal/error.h"

namespace bifocal::eval {

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& where) {
  std::vector<CsvRecord> records;
  std::size_t line = 1;
  std::size_t i = 0;
  const std::size_t n = text.size();
  auto is_record_end = [&](std::size_t at) { return at >= n || text[at] == '\n' || text[at] == '\r'; };
  while (i < n) {
    CsvRecord record{.fields = {}, .line = line};
    // One record: fields until a line break outside quotes or the end of the text.
    while (true) {
      std::string field;
      if (i < n && text[i] == '"') {
        const std::size_t opened_on = line;
        ++i;
        while (true) {
          if (i >= n) fail(where + ":" + std::to_string(opened_on), "unterminated quoted field");
          const char c = text[i];
          if (c == '"' && i + 1 < n && text[i + 1] == '"') {
            field += '"';
            i += 2;
          } else if (c == '"') {
            ++i;
            break;
          } else {
            if (c == '\n') ++line;
            field += c;
            ++i;
          }
        }
        if (i < n && text[i] != ',' && !is_record_end(i))
          fail(where + ":" + std::to_string(line), "text after the closing quote of a field");
      } else {
        while (i < n && text[i] != ',' && !is_record_end(i)) field += text[i++];
      }
      record.fields.push_back(std::move(field));
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      break;
    }
    // The record's line break: LF, CRLF or a lone CR.
    if (i < n && text[i] == '\r') ++i;
    if (i < n && text[i] == '\n') ++i;
    ++line;
    const bool blank = record.fields.size() == 1 && record.fields[0].empty();
    if (!blank) records.push_back(std::move(record));
  }
  return records;
}

}  // namespace bifocal::eval
