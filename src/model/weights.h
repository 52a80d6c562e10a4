// The parameters of a Llama-family checkpoint, widened to float32 for the CPU backend.
#pragma once

#include <vector>

#include "bifocal/model_config.h"
#include "io/safetensors.h"

namespace bifocal {

struct LayerWeights {
  std::vector<float> input_norm;                     // [hidden]
  std::vector<float> q_proj, k_proj, v_proj, o_proj; // [Hq·d, hidden], [Hkv·d, hidden] ×2, [hidden, Hq·d]
  std::vector<float> q_bias, k_bias, v_bias;         // Qwen2 only
  std::vector<float> q_norm, k_norm;                 // Qwen3 only, [d]
  std::vector<float> post_attention_norm;            // [hidden]
  std::vector<float> gate_proj, up_proj, down_proj;  // [inter, hidden] ×2, [hidden, inter]
};

struct ModelWeights {
  std::vector<float> embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;    // [hidden]
  std::vector<float> lm_head;       // [vocab, hidden]; empty when tied to embed_tokens

  const float* output_projection() const { return lm_head.empty() ? embed_tokens.data() : lm_head.data(); }

  // Reads every tensor the config calls for, checking names and shapes (errors name the file).
  static ModelWeights load(const ModelConfig& config, const WeightStore& store);
};

}  // namespace bifocal
