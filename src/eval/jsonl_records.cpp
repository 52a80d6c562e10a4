#include "eval/jsonl_records.h"

#include <fstream>

#include "bifocal/error.h"
#include "io/json_file.h"

namespace bifocal::eval {

std::vector<JsonlRecord> read_jsonl_records(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), std::filesystem::exists(file) ? "cannot open file" : "file not found");
  std::vector<JsonlRecord> records;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    JsonlRecord record{.value = {}, .line = number, .where = file.string() + ":" + std::to_string(number)};
    record.value = parse_json(line, record.where);
    if (!record.value.is_object()) fail(record.where, "expected a JSON object");
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace bifocal::eval
