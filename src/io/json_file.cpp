#include "io/json_file.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "bifocal/error.h"

namespace bifocal {

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    fail(where, std::string("malformed JSON (") + e.what() + ")");
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), std::filesystem::exists(path) ? "cannot open file" : "file not found");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_json(buffer.str(), path.string());
}

namespace {
template <typename T>
const char* type_word() {
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a JSON value";
}

template <typename T>
bool holds(const nlohmann::json& value) {
  if constexpr (std::is_same_v<T, bool>) return value.is_boolean();
  else if constexpr (std::is_integral_v<T>) return value.is_number_integer();
  else if constexpr (std::is_floating_point_v<T>) return value.is_number();
  else if constexpr (std::is_same_v<T, std::string>) return value.is_string();
  else return !value.is_null();  // nlohmann::json: any value (object, array, ...)
}
}  // namespace

template <typename T>
T json_get(const nlohmann::json& object, const std::string& key, const std::string& where) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null())
    fail(where, "missing key '" + key + "'");
  const auto& value = object.at(key);
  if (!holds<T>(value)) fail(where, "'" + key + "' must be " + type_word<T>());
  return value.get<T>();
}

template <typename T>
T json_get_or(const nlohmann::json& object, const std::string& key, const T& fallback, const std::string& where) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return fallback;
  return json_get<T>(object, key, where);
}

#define BIFOCAL_INSTANTIATE(T)                                                              \
  template T json_get<T>(const nlohmann::json&, const std::string&, const std::string&); \
  template T json_get_or<T>(const nlohmann::json&, const std::string&, const T&, const std::string&);
BIFOCAL_INSTANTIATE(bool)
BIFOCAL_INSTANTIATE(std::int64_t)
BIFOCAL_INSTANTIATE(int)
BIFOCAL_INSTANTIATE(double)
BIFOCAL_INSTANTIATE(std::string)
BIFOCAL_INSTANTIATE(nlohmann::json)
#undef BIFOCAL_INSTANTIATE

}  // namespace bifocal
