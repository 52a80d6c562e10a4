// BOS/EOS for generation, read the way transformers does from a checkpoint directory:
// tokenizer_config.json (bos_token, eos_token, add_bos_token, add_eos_token) and
// generation_config.json (bos_token_id, eos_token_id as an int or a list).
#include <algorithm>

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/tokenizer_impl.h"

namespace bifocal {

namespace {

// bos_token / eos_token: "<s>", {"content": "<s>", ...} (a serialized AddedToken), or null.
std::optional<std::string> token_content(const nlohmann::json& config, const std::string& key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return json_get<std::string>(*it, "content", file + ": " + key);
  fail(file, "'" + key + "' must be a string or an object with 'content', got " + it->dump());
}

std::vector<std::int32_t> id_list(const nlohmann::json& config, const std::string& key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  auto as_id = [&](const nlohmann::json& value) {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > INT32_MAX)
      fail(file, "'" + key + "' must be a non-negative integer or a list of them, got " + it->dump());
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  };
  if (!it->is_array()) return {as_id(*it)};
  std::vector<std::int32_t> ids;
  for (const auto& value : *it) ids.push_back(as_id(value));
  return ids;
}

void add_unique(std::vector<std::int32_t>& ids, std::int32_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

}  // namespace

void Tokenizer::Impl::load_special_token_config(const std::filesystem::path& dir) {
  auto resolve = [&](const std::string& token, const std::string& key, const std::string& file) {
    std::optional<std::int32_t> id = added.id_of(token);
    if (!id) id = model.token_id(token);
    if (!id) fail(file, "'" + key + "' '" + token + "' is not in the tokenizer's vocabulary");
    return *id;
  };

  std::optional<std::int32_t> config_bos, config_eos;
  bool add_bos = false, add_eos = false;
  const std::filesystem::path tokenizer_config = dir / "tokenizer_config.json";
  if (std::filesystem::exists(tokenizer_config)) {
    const nlohmann::json config = read_json_file(tokenizer_config);
    const std::string file = tokenizer_config.string();
    if (!config.is_object()) fail(file, "expected a JSON object");
    if (const auto bos = token_content(config, "bos_token", file)) config_bos = resolve(*bos, "bos_token", file);
    if (const auto eos = token_content(config, "eos_token", file)) config_eos = resolve(*eos, "eos_token", file);
    add_bos = json_get_or<bool>(config, "add_bos_token", false, file);
    add_eos = json_get_or<bool>(config, "add_eos_token", false, file);
  }

  std::vector<std::int32_t> generation_eos;
  std::optional<std::int32_t> generation_bos;
  const std::filesystem::path generation_config = dir / "generation_config.json";
  if (std::filesystem::exists(generation_config)) {
    const nlohmann::json config = read_json_file(generation_config);
    const std::string file = generation_config.string();
    if (!config.is_object()) fail(file, "expected a JSON object");
    generation_eos = id_list(config, "eos_token_id", file);
    const std::vector<std::int32_t> bos = id_list(config, "bos_token_id", file);
    if (bos.size() > 1) fail(file, "'bos_token_id' must be a single id");
    if (!bos.empty()) generation_bos = bos.front();
  }

  bos_id = config_bos ? config_bos : generation_bos;
  eos_ids.clear();
  if (config_eos) add_unique(eos_ids, *config_eos);
  for (const std::int32_t id : generation_eos) add_unique(eos_ids, id);

  // add_bos_token / add_eos_token ask for BOS first / EOS last; a template that already adds
  // them (as Llama-3's and our fixtures' TemplateProcessing do) must not get a second copy.
  const std::vector<std::int32_t> template_only = post_processor.process({});
  if (add_bos && config_bos && (template_only.empty() || template_only.front() != *config_bos))
    prepend_on_special = config_bos;
  if (add_eos && config_eos && (template_only.empty() || template_only.back() != *config_eos))
    append_on_special = config_eos;
}

}  // namespace bifocal
