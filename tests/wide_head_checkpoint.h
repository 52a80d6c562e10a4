// A random Qwen3-like checkpoint whose heads are 128 wide, as Qwen3-4B's are: the golden models'
// heads are 24–48 wide, so no model test reaches the device paths that only d = 128 takes (the
// tensor-core attention's d = 128 kernel, the mLSTM's and Bifocal's d = 128 prefill). Two layers of
// hidden 256, 4 query and 2 KV heads, vocabulary 512, in fp32; the base weights are random with
// the spreads a freshly initialised model has (projections ~ N(0, 1/fan_in), norms 1 ± 0.1), and
// the mixer tensors as golden_with_random_mixer_tensors writes them (learned sinks, the mLSTM's
// gates for one state per KV head, Bifocal's mix gate), all in one model.safetensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "safetensors_writer.h"

namespace bifocal::testing {

inline constexpr int kWideHeadVocab = 512;

// Writes config.json and model.safetensors into `dir`; returns dir.
inline std::filesystem::path wide_head_checkpoint(const std::filesystem::path& dir, std::uint32_t seed) {
  constexpr int kLayers = 2, kHidden = 256, kQueryHeads = 4, kKvHeads = 2, kHeadDim = 128, kIntermediate = 512;
  const nlohmann::json config = {{"architectures", {"Qwen3ForCausalLM"}},
                                 {"model_type", "qwen3"},
                                 {"hidden_size", kHidden},
                                 {"intermediate_size", kIntermediate},
                                 {"num_hidden_layers", kLayers},
                                 {"num_attention_heads", kQueryHeads},
                                 {"num_key_value_heads", kKvHeads},
                                 {"head_dim", kHeadDim},
                                 {"vocab_size", kWideHeadVocab},
                                 {"max_position_embeddings", 4096},
                                 {"rms_norm_eps", 1e-6},
                                 {"hidden_act", "silu"},
                                 {"attention_bias", false},
                                 {"tie_word_embeddings", false},
                                 {"rope_parameters", {{"rope_theta", 1000000.0}, {"rope_type", "default"}}},
                                 {"eos_token_id", 0}};
  std::ofstream(dir / "config.json") << config.dump(2);

  std::mt19937 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  std::vector<F32Tensor> tensors;
  const auto add = [&](const std::string& name, std::vector<std::int64_t> shape, auto&& value) {
    tensors.push_back(filled_f32_tensor(name, std::move(shape), value));
  };
  // A projection [out, in] ~ N(0, 1/in): unit-variance inputs give unit-variance outputs.
  const auto projection = [&](const std::string& name, int out, int in) {
    const float spread = 1.0f / std::sqrt(float(in));
    add(name, {out, in}, [&] { return spread * unit(rng); });
  };
  const auto norm = [&](const std::string& name, int width) { add(name, {width}, [&] { return 1.0f + 0.1f * unit(rng); }); };
  const auto small = [&] { return 0.02f * unit(rng); };  // the mixer gates' weights (random_mixer_checkpoint.h)

  add("model.embed_tokens.weight", {kWideHeadVocab, kHidden}, [&] { return unit(rng); });
  for (int layer = 0; layer < kLayers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    norm(prefix + "input_layernorm.weight", kHidden);
    projection(prefix + "self_attn.q_proj.weight", kQueryHeads * kHeadDim, kHidden);
    projection(prefix + "self_attn.k_proj.weight", kKvHeads * kHeadDim, kHidden);
    projection(prefix + "self_attn.v_proj.weight", kKvHeads * kHeadDim, kHidden);
    projection(prefix + "self_attn.o_proj.weight", kHidden, kQueryHeads * kHeadDim);
    norm(prefix + "self_attn.q_norm.weight", kHeadDim);
    norm(prefix + "self_attn.k_norm.weight", kHeadDim);
    norm(prefix + "post_attention_layernorm.weight", kHidden);
    projection(prefix + "mlp.gate_proj.weight", kIntermediate, kHidden);
    projection(prefix + "mlp.up_proj.weight", kIntermediate, kHidden);
    projection(prefix + "mlp.down_proj.weight", kHidden, kIntermediate);
    add_mixer_gate_tensors(add, prefix + "self_attn.", kQueryHeads, kKvHeads, kHidden, [&] { return unit(rng); },
                           small);
  }
  norm("model.norm.weight", kHidden);
  projection("lm_head.weight", kWideHeadVocab, kHidden);
  write_f32_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

}  // namespace bifocal::testing
