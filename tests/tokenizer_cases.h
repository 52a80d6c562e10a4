// Shared helpers for the tokenizer tests: the HF-made fixtures under tests/golden/tokenizers and
// a readable rendering of strings and ids for failure messages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bifocal::testing {

inline std::filesystem::path golden_tokenizer_dir(const std::string& variant) {
  return std::filesystem::path(BIFOCAL_GOLDEN_DIR) / "tokenizers" / variant;
}

// The five trained variants (tools/golden/make_tokenizers.py).
inline const std::vector<std::string>& tokenizer_variants() {
  static const std::vector<std::string> variants = {"qwen2_bytelevel", "gpt2_bytelevel", "llama3_bytelevel", "sp_legacy",
                                                    "sp_metaspace"};
  return variants;
}

// The variants of tools/golden/make_tokenizer_features.py, under tokenizers/features/<name>.
inline std::vector<std::string> tokenizer_feature_variants() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(golden_tokenizer_dir("features")))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One line of cases.jsonl: HF's encode without and with special tokens, and HF's decode (with
// special tokens kept, and skipped where the fixture records it).
struct TokenizerCase {
  std::string text;
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> ids_special;
  std::string decoded;
  std::optional<std::string> decoded_skip;
};

inline std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

inline std::vector<TokenizerCase> load_tokenizer_cases(const std::filesystem::path& cases_jsonl) {
  std::vector<TokenizerCase> cases;
  for (const auto& record : read_json_lines(cases_jsonl)) {
    cases.push_back({record.at("text").get<std::string>(), record.at("ids").get<std::vector<std::int32_t>>(),
                     record.at("ids_special").get<std::vector<std::int32_t>>(), record.at("decoded").get<std::string>(),
                     std::nullopt});
    if (record.contains("decoded_skip")) cases.back().decoded_skip = record.at("decoded_skip").get<std::string>();
  }
  return cases;
}

inline std::vector<TokenizerCase> load_tokenizer_cases(const std::string& variant) {
  return load_tokenizer_cases(golden_tokenizer_dir(variant) / "cases.jsonl");
}

// One line of a decode_cases file: arbitrary ids and HF's decode of them.
struct DecodeCase {
  std::vector<std::int32_t> ids;
  std::string decoded;
  std::string decoded_skip;
};

inline std::vector<DecodeCase> load_decode_cases(const std::filesystem::path& path) {
  std::vector<DecodeCase> cases;
  for (const auto& record : read_json_lines(path))
    cases.push_back({record.at("ids").get<std::vector<std::int32_t>>(), record.at("decoded").get<std::string>(),
                     record.at("decoded_skip").get<std::string>()});
  return cases;
}

// The string as a JSON literal with every non-ASCII character escaped, e.g. "caf\u00e9\n".
inline std::string escaped(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

inline std::string ids_text(const std::vector<std::int32_t>& ids) { return nlohmann::json(ids).dump(); }

}  // namespace bifocal::testing
