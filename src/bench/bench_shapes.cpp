#include "bench/bench_shapes.h"

#include "bifocal/budget.h"

namespace bifocal {

ModelConfig synthetic_model_config(const std::string& shape_name) {
  const ModelShape& shape = builtin_shape(shape_name);  // errors name the known shapes
  ModelConfig c;
  c.architecture = Architecture::Qwen3;
  c.architecture_name = "synthetic " + shape.name;
  c.vocab_size = shape.vocab;
  c.hidden_size = shape.hidden;
  c.intermediate_size = shape.intermediate;
  c.num_layers = shape.layers;
  c.num_query_heads = shape.layer.query_heads;
  c.num_kv_heads = shape.layer.kv_heads;
  c.head_dim = shape.layer.head_dim;
  c.max_position_embeddings = 1 << 20;  // the bench runs to 256K and beyond; RoPE is just a table
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true;
  c.qk_norm = true;
  c.rope.theta = 1.0e6;
  c.layer_sliding_window.assign(shape.layers, 0);
  return c;
}

}  // namespace bifocal
