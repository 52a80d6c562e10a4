#include "model/weights.h"

#include <string>

namespace bifocal {

namespace {
std::vector<float> read(const WeightStore& store, const std::string& name, std::vector<std::int64_t> shape) {
  return store.require(name, shape).to_f32();
}
}  // namespace

ModelWeights ModelWeights::load(const ModelConfig& c, const WeightStore& store) {
  const std::int64_t hidden = c.hidden_size, d = c.head_dim, inter = c.intermediate_size, vocab = c.vocab_size;
  const std::int64_t q_width = std::int64_t(c.num_query_heads) * d, kv_width = std::int64_t(c.num_kv_heads) * d;
  ModelWeights w;
  w.embed_tokens = read(store, "model.embed_tokens.weight", {vocab, hidden});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    LayerWeights layer;
    layer.input_norm = read(store, prefix + "input_layernorm.weight", {hidden});
    layer.q_proj = read(store, prefix + "self_attn.q_proj.weight", {q_width, hidden});
    layer.k_proj = read(store, prefix + "self_attn.k_proj.weight", {kv_width, hidden});
    layer.v_proj = read(store, prefix + "self_attn.v_proj.weight", {kv_width, hidden});
    layer.o_proj = read(store, prefix + "self_attn.o_proj.weight", {hidden, q_width});
    if (c.qkv_bias) {
      layer.q_bias = read(store, prefix + "self_attn.q_proj.bias", {q_width});
      layer.k_bias = read(store, prefix + "self_attn.k_proj.bias", {kv_width});
      layer.v_bias = read(store, prefix + "self_attn.v_proj.bias", {kv_width});
    }
    if (c.qk_norm) {
      layer.q_norm = read(store, prefix + "self_attn.q_norm.weight", {d});
      layer.k_norm = read(store, prefix + "self_attn.k_norm.weight", {d});
    }
    layer.post_attention_norm = read(store, prefix + "post_attention_layernorm.weight", {hidden});
    layer.gate_proj = read(store, prefix + "mlp.gate_proj.weight", {inter, hidden});
    layer.up_proj = read(store, prefix + "mlp.up_proj.weight", {inter, hidden});
    layer.down_proj = read(store, prefix + "mlp.down_proj.weight", {hidden, inter});
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = read(store, "model.norm.weight", {hidden});
  // A tied checkpoint may still carry lm_head.weight (a copy); HF ignores it, so do we.
  if (!c.tie_word_embeddings) w.lm_head = read(store, "lm_head.weight", {vocab, hidden});
  return w;
}

}  // namespace bifocal
