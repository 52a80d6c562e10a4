// The architecture of a Hugging Face checkpoint, read from its config.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace bifocal {

enum class Architecture { Llama, Mistral, Qwen2, Qwen3 };

// Rotary position embedding: inv_freq[i] = theta^(-2i/d), optionally rescaled.
struct RopeConfig {
  enum class Type { Default, Linear, Llama3 };
  Type type = Type::Default;
  double theta = 10000.0;
  double factor = 1.0;                  // linear, llama3
  double low_freq_factor = 1.0;         // llama3
  double high_freq_factor = 4.0;        // llama3
  double original_max_position = 8192;  // llama3
};

struct ModelConfig {
  Architecture architecture = Architecture::Llama;
  std::string architecture_name;  // as written in config.json, e.g. "Qwen3ForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_query_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2; Llama's attention_bias
  bool qk_norm = false;   // Qwen3: RMSNorm over each head of q and k before RoPE
  RopeConfig rope;
  // Per layer: 0 = full causal attention, w > 0 = HF sliding window (query t sees keys t-w+1 … t).
  std::vector<int> layer_sliding_window;
  std::vector<std::int32_t> eos_token_ids;
  std::optional<std::int32_t> bos_token_id;

  int group_size() const { return num_query_heads / num_kv_heads; }

  // Reads DIR/config.json (and eos/bos from DIR/generation_config.json when present).
  static ModelConfig from_dir(const std::filesystem::path& dir);
  // Parses an already-read config.json; `file` names it in error messages.
  static ModelConfig from_json(const nlohmann::json& config, const std::string& file);
};

const char* architecture_name(Architecture architecture);

}  // namespace bifocal
