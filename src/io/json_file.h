// Reading JSON files (config.json, tokenizer.json, ...) with errors that name the file and key.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace bifocal {

// Parses `text`; throws Error "<where>: malformed JSON (...)" for bad syntax and for a number no
// double holds (nlohmann's out_of_range, e.g. 1e400), never another exception type.
nlohmann::json parse_json(std::string_view text, const std::string& where);

// Parses the whole file; throws Error "<path>: cannot open ..." or "<path>: malformed JSON ...".
nlohmann::json read_json_file(const std::filesystem::path& path);

// `object[key]` as T (T = nlohmann::json takes any non-null value); throws Error "<where>: missing key 'key'" or "... 'key' must be <type>".
template <typename T>
T json_get(const nlohmann::json& object, const std::string& key, const std::string& where);
// Like json_get, but returns `fallback` when the key is absent or null.
template <typename T>
T json_get_or(const nlohmann::json& object, const std::string& key, const T& fallback, const std::string& where);

}  // namespace bifocal
