// Shared helpers for the tokenizer tests: the HF-made fixtures under tests/golden/tokenizers and
// a readable rendering of strings and ids for failure messages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bifocal::testing {

inline std::filesystem::path golden_tokenizer_dir(const std::string& variant) {
  return std::filesystem::path(BIFOCAL_GOLDEN_DIR) / "tokenizers" / variant;
}

inline const std::vector<std::string>& tokenizer_variants() {
  static const std::vector<std::string> variants = {"qwen2_bytelevel", "gpt2_bytelevel", "llama3_bytelevel", "sp_legacy",
                                                    "sp_metaspace"};
  return variants;
}

// One line of cases.jsonl: HF's encode without and with special tokens, and HF's decode.
struct TokenizerCase {
  std::string text;
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> ids_special;
  std::string decoded;
};

inline std::vector<TokenizerCase> load_tokenizer_cases(const std::string& variant) {
  std::ifstream in(golden_tokenizer_dir(variant) / "cases.jsonl");
  std::vector<TokenizerCase> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    cases.push_back({record.at("text").get<std::string>(), record.at("ids").get<std::vector<std::int32_t>>(),
                     record.at("ids_special").get<std::vector<std::int32_t>>(), record.at("decoded").get<std::string>()});
  }
  return cases;
}

// The string as a JSON literal with every non-ASCII character escaped, e.g. "caf\u00e9\n".
inline std::string escaped(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

inline std::string ids_text(const std::vector<std::int32_t>& ids) { return nlohmann::json(ids).dump(); }

}  // namespace bifocal::testing
