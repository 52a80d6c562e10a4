#include "bench/decode_traffic.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "bifocal/budget.h"
#include "bifocal/error.h"
#include "mixer/mixer_parameters.h"

namespace bifocal {

std::size_t transformer_weight_bytes(const ModelConfig& c, std::size_t element_bytes) {
  const std::size_t hidden = c.hidden_size, q_width = std::size_t(c.num_query_heads) * c.head_dim,
                    kv_width = std::size_t(c.num_kv_heads) * c.head_dim, inter = c.intermediate_size;
  std::size_t per_layer = hidden * (q_width + 2 * kv_width) + q_width * hidden + 3 * hidden * inter + 2 * hidden;
  if (c.qkv_bias) per_layer += q_width + 2 * kv_width;
  if (c.qk_norm) per_layer += 2 * std::size_t(c.head_dim);
  // The LM head reads its whole [vocab, hidden] matrix per token (tied or not); the embedding
  // lookup reads one row, counted with it when tied.
  const std::size_t head = std::size_t(c.vocab_size) * hidden + hidden;
  const std::size_t embedding_row = c.tie_word_embeddings ? 0 : hidden;
  return (per_layer * c.num_layers + head + embedding_row) * element_bytes;
}

namespace {

// Mixer gates read per token: mLSTM input/forget gates (S rows each), Bifocal's mix gate (Hq rows).
std::size_t gate_rows(const MixerSpec& spec, const LayerShape& shape) {
  const int states = spec.state == MixerSpec::StatePlacement::PerKvHead ? shape.kv_heads : shape.query_heads;
  switch (spec.kind) {
    case MixerSpec::Kind::Mlstm: return 2 * std::size_t(states);
    case MixerSpec::Kind::Bifocal: return 2 * std::size_t(states) + shape.query_heads;
    default: return 0;
  }
}

// Mixer parameters the device keeps in fp32 and reads every token (cuda/device_mixer.h): learned
// sinks [Hq], hedgehog feature maps [Hkv, d, 64], LoLCATs' window factors [Hq]. Their neutral
// values have the trained ones' shapes, so the loader with no checkpoint sizes them.
std::size_t fp32_parameter_bytes(const MixerSpec& spec, const LayerShape& shape, int hidden) {
  const MixerParameters neutral = MixerParameters::load(spec, shape, hidden, /*layer=*/0, /*store=*/nullptr);
  return (neutral.sinks.size() + neutral.feature_map.size() + neutral.window_factor.size()) * sizeof(float);
}

}  // namespace

DecodeTraffic decode_traffic(const ModelConfig& c, const std::vector<MixerSpec>& layer_mixers, std::int64_t context,
                             std::size_t element_bytes) {
  if (int(layer_mixers.size()) != c.num_layers) fail("bench", "one mixer per layer expected");
  DecodeTraffic traffic;
  traffic.weight_bytes = transformer_weight_bytes(c, element_bytes);
  const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
  std::vector<std::pair<MixerSpec, std::size_t>> parameter_bytes;  // per distinct spec: layers mostly share one
  for (const MixerSpec& spec : layer_mixers) {
    auto known = std::find_if(parameter_bytes.begin(), parameter_bytes.end(),
                              [&](const auto& entry) { return entry.first == spec; });
    if (known == parameter_bytes.end())
      known = parameter_bytes.insert(parameter_bytes.end(), {spec, fp32_parameter_bytes(spec, shape, c.hidden_size)});
    traffic.weight_bytes += known->second;
    const MixerMemory memory = mixer_memory(spec, shape, context + 1, element_bytes);
    // The new token is written, then every visible cached token (itself included) is read.
    const std::int64_t visible = std::min<std::int64_t>(memory.cached_tokens, context + 1);
    traffic.cache_read_bytes += std::size_t(visible) * memory.kv_token_unit + memory.state_total_bytes;
    traffic.cache_write_bytes += (memory.cached_tokens > 0 ? memory.kv_token_unit : 0) + memory.state_total_bytes;
    traffic.weight_bytes += gate_rows(spec, shape) * (std::size_t(c.hidden_size) + 1) * element_bytes;
  }
  return traffic;
}

}  // namespace bifocal
