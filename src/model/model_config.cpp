#include "bifocal/model_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bifocal/error.h"
#include "io/json_file.h"

namespace bifocal {

namespace {

struct KnownArchitecture {
  const char* class_name;
  const char* model_type;
  Architecture architecture;
};
constexpr KnownArchitecture kKnown[] = {
    {"LlamaForCausalLM", "llama", Architecture::Llama},
    {"MistralForCausalLM", "mistral", Architecture::Mistral},
    {"Qwen2ForCausalLM", "qwen2", Architecture::Qwen2},
    {"Qwen3ForCausalLM", "qwen3", Architecture::Qwen3},
};

Architecture parse_architecture(const nlohmann::json& config, const std::string& file, std::string& name) {
  std::string supported;
  for (const auto& known : kKnown) supported += std::string(supported.empty() ? "" : ", ") + known.class_name;
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty()) {
    const auto& first = config["architectures"][0];
    if (!first.is_string()) fail(file, "'architectures' must hold strings");
    name = first.get<std::string>();
    for (const auto& known : kKnown)
      if (name == known.class_name) return known.architecture;
    fail(file, "unknown architecture '" + name + "' (supported: " + supported + ")");
  }
  const std::string model_type = json_get_or<std::string>(config, "model_type", "", file);
  for (const auto& known : kKnown)
    if (model_type == known.model_type) {
      name = known.class_name;
      return known.architecture;
    }
  fail(file, model_type.empty() ? "no 'architectures' or 'model_type' entry"
                                : "unknown model_type '" + model_type + "' (supported: " + supported + ")");
}

int positive_int(const nlohmann::json& config, const std::string& key, const std::string& file) {
  const auto value = json_get<std::int64_t>(config, key, file);
  if (value <= 0 || value > (1 << 30)) fail(file, "'" + key + "' must be a positive integer, got " + std::to_string(value));
  return int(value);
}

// transformers >= 5 writes "rope_parameters"; earlier versions and most hub checkpoints write
// "rope_theta" plus an optional "rope_scaling" object ("type" in the oldest files).
RopeConfig parse_rope(const nlohmann::json& config, const std::string& file) {
  RopeConfig rope;
  nlohmann::json scaling = nlohmann::json::object();
  if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) {
    scaling = config["rope_parameters"];
    rope.theta = json_get_or<double>(scaling, "rope_theta", json_get_or<double>(config, "rope_theta", 10000.0, file),
                                     file + " rope_parameters");
  } else {
    rope.theta = json_get_or<double>(config, "rope_theta", 10000.0, file);
    if (config.contains("rope_scaling") && !config["rope_scaling"].is_null()) {
      if (!config["rope_scaling"].is_object()) fail(file, "'rope_scaling' must be an object or null");
      scaling = config["rope_scaling"];
    }
  }
  if (!(rope.theta > 0)) fail(file, "rope theta must be positive");
  const std::string where = file + " rope scaling";
  std::string type = json_get_or<std::string>(scaling, "rope_type", json_get_or<std::string>(scaling, "type", "default", where), where);
  if (type == "default") {
    rope.type = RopeConfig::Type::Default;
  } else if (type == "linear") {
    rope.type = RopeConfig::Type::Linear;
    rope.factor = json_get<double>(scaling, "factor", where);
  } else if (type == "llama3") {
    rope.type = RopeConfig::Type::Llama3;
    rope.factor = json_get<double>(scaling, "factor", where);
    rope.low_freq_factor = json_get<double>(scaling, "low_freq_factor", where);
    rope.high_freq_factor = json_get<double>(scaling, "high_freq_factor", where);
    rope.original_max_position = json_get<double>(scaling, "original_max_position_embeddings", where);
    if (rope.high_freq_factor <= rope.low_freq_factor) fail(where, "high_freq_factor must exceed low_freq_factor");
  } else {
    fail(file, "unsupported rope type '" + type + "' (supported: default, linear, llama3)");
  }
  if (!(rope.factor > 0)) fail(where, "'factor' must be positive");
  return rope;
}

void add_token_ids(const nlohmann::json& value, std::vector<std::int32_t>& out, const std::string& where) {
  if (value.is_null()) return;
  if (value.is_number_integer()) {
    out.push_back(value.get<std::int32_t>());
  } else if (value.is_array()) {
    for (const auto& id : value) {
      if (!id.is_number_integer()) fail(where, "'eos_token_id' must hold integers");
      out.push_back(id.get<std::int32_t>());
    }
  } else {
    fail(where, "'eos_token_id' must be an integer or a list of integers");
  }
}

// Which layers use a sliding window, in the order transformers decides it: an explicit
// "layer_types" list wins; Qwen2/Qwen3 slide from layer max_window_layers on when
// use_sliding_window is set; Mistral slides on every layer when sliding_window is not null.
std::vector<int> parse_sliding_windows(const nlohmann::json& config, Architecture architecture, int num_layers,
                                       const std::string& file) {
  std::vector<int> windows(num_layers, 0);
  const int window = int(json_get_or<std::int64_t>(config, "sliding_window", 0, file));
  if (window < 0) fail(file, "'sliding_window' must be positive or null");
  if (config.contains("layer_types") && config["layer_types"].is_array()) {
    const auto& types = config["layer_types"];
    if (int(types.size()) != num_layers)
      fail(file, "'layer_types' has " + std::to_string(types.size()) + " entries for " + std::to_string(num_layers) + " layers");
    for (int i = 0; i < num_layers; ++i) {
      const std::string type = types[i].is_string() ? types[i].get<std::string>() : "";
      if (type == "sliding_attention") {
        if (window == 0) fail(file, "layer " + std::to_string(i) + " is sliding_attention but 'sliding_window' is null");
        windows[i] = window;
      } else if (type != "full_attention") {
        fail(file, "unknown layer type '" + type + "' at layer " + std::to_string(i));
      }
    }
    return windows;
  }
  if (window == 0) return windows;
  if (architecture == Architecture::Mistral) {
    std::fill(windows.begin(), windows.end(), window);
  } else if (architecture == Architecture::Qwen2 || architecture == Architecture::Qwen3) {
    if (json_get_or<bool>(config, "use_sliding_window", false, file)) {
      const int first = int(json_get_or<std::int64_t>(config, "max_window_layers", num_layers, file));
      for (int i = std::max(first, 0); i < num_layers; ++i) windows[i] = window;
    }
  }
  return windows;
}

}  // namespace

const char* architecture_name(Architecture architecture) {
  for (const auto& known : kKnown)
    if (known.architecture == architecture) return known.class_name;
  return "?";
}

ModelConfig ModelConfig::from_json(const nlohmann::json& config, const std::string& file) {
  if (!config.is_object()) fail(file, "config must be a JSON object");
  ModelConfig c;
  c.architecture = parse_architecture(config, file, c.architecture_name);
  c.vocab_size = positive_int(config, "vocab_size", file);
  c.hidden_size = positive_int(config, "hidden_size", file);
  c.intermediate_size = positive_int(config, "intermediate_size", file);
  c.num_layers = positive_int(config, "num_hidden_layers", file);
  c.num_query_heads = positive_int(config, "num_attention_heads", file);
  c.num_kv_heads = config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null()
                       ? positive_int(config, "num_key_value_heads", file)
                       : c.num_query_heads;
  if (c.num_query_heads % c.num_kv_heads != 0)
    fail(file, "num_attention_heads (" + std::to_string(c.num_query_heads) + ") is not a multiple of num_key_value_heads (" +
                   std::to_string(c.num_kv_heads) + ")");
  if (config.contains("head_dim") && !config["head_dim"].is_null()) {
    c.head_dim = positive_int(config, "head_dim", file);
  } else {
    if (c.hidden_size % c.num_query_heads != 0) fail(file, "hidden_size is not a multiple of num_attention_heads");
    c.head_dim = c.hidden_size / c.num_query_heads;
  }
  if (c.head_dim % 2 != 0) fail(file, "head_dim must be even for rotary embeddings");
  c.max_position_embeddings = int(json_get_or<std::int64_t>(config, "max_position_embeddings", 4096, file));
  c.rms_norm_eps = json_get_or<double>(config, "rms_norm_eps", 1e-6, file);
  c.tie_word_embeddings = json_get_or<bool>(config, "tie_word_embeddings", false, file);
  const std::string activation = json_get_or<std::string>(config, "hidden_act", "silu", file);
  if (activation != "silu") fail(file, "unsupported hidden_act '" + activation + "' (supported: silu)");
  c.qkv_bias = c.architecture == Architecture::Qwen2 || json_get_or<bool>(config, "attention_bias", false, file);
  if (json_get_or<bool>(config, "mlp_bias", false, file)) fail(file, "mlp_bias=true is not supported");
  c.qk_norm = c.architecture == Architecture::Qwen3;
  c.rope = parse_rope(config, file);
  c.layer_sliding_window = parse_sliding_windows(config, c.architecture, c.num_layers, file);
  if (config.contains("eos_token_id")) add_token_ids(config["eos_token_id"], c.eos_token_ids, file);
  if (config.contains("bos_token_id") && config["bos_token_id"].is_number_integer())
    c.bos_token_id = config["bos_token_id"].get<std::int32_t>();
  return c;
}

ModelConfig ModelConfig::from_dir(const std::filesystem::path& dir) {
  const auto config_path = dir / "config.json";
  if (!std::filesystem::is_directory(dir)) fail(dir.string(), "model directory not found");
  ModelConfig c = from_json(read_json_file(config_path), config_path.string());
  const auto generation_path = dir / "generation_config.json";
  if (std::filesystem::exists(generation_path)) {
    const auto generation = read_json_file(generation_path);
    if (generation.contains("eos_token_id"))
      add_token_ids(generation["eos_token_id"], c.eos_token_ids, generation_path.string());
    if (generation.contains("bos_token_id") && generation["bos_token_id"].is_number_integer())
      c.bos_token_id = generation["bos_token_id"].get<std::int32_t>();
  }
  std::sort(c.eos_token_ids.begin(), c.eos_token_ids.end());
  c.eos_token_ids.erase(std::unique(c.eos_token_ids.begin(), c.eos_token_ids.end()), c.eos_token_ids.end());
  return c;
}

}  // namespace bifocal
