// JSON access the tokenizer loaders need beyond io/json_file.h: array members (json_get's
// nlohmann::json form accepts only objects).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bifocal/error.h"

namespace bifocal::tokenizer {

// `object[key]`, which must be an array; throws Error "<where>: missing key 'key'" or
// "<where>: 'key' must be an array".
inline const nlohmann::json& json_array(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) fail(where, "missing key '" + key + "'");
  if (!it->is_array()) fail(where, "'" + key + "' must be an array");
  return *it;
}

}  // namespace bifocal::tokenizer
