// JSON Lines files (one JSON value per line), as the PIQA, ARC and WinoGrande releases and the
// generic `mc:FILE.jsonl` task use; errors name the file and the line.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bifocal::eval {

struct JsonlRecord {
  nlohmann::json value;  // always an object
  std::size_t line = 0;  // 1-based
  std::string where;     // "FILE:LINE", for error messages about this record
};

// Every non-blank line parsed. Throws Error "<file>: file not found", "<file>:<line>: malformed
// JSON (...)" or "<file>:<line>: expected a JSON object".
std::vector<JsonlRecord> read_jsonl_records(const std::filesystem::path& file);

}  // namespace bifocal::eval
