// linear: o_t = φ(q_t)ᵀ S_t / (φ(q_t)ᵀ z_t + ε), S_t = Σ_{j≤t} φ(k_j) v_jᵀ, z_t = Σ φ(k_j), one fp32
// state per KV head (DESIGN.md "linear"). Prefill is chunkwise, decode the recurrence.
#include "backend/cpu/linear_attention.h"
#include "mixer/mixers.h"

namespace bifocal {

namespace {
constexpr int kPrefillChunk = 64;

cpu::LinearShape linear_shape(const MixerSpec& spec, const LayerShape& shape) {
  return {shape.query_heads, shape.kv_heads, shape.head_dim,
          spec.feature == MixerSpec::Feature::Hedgehog ? cpu::FeatureMap::Hedgehog : cpu::FeatureMap::Elu1};
}
}  // namespace

LinearAttentionMixer::LinearAttentionMixer(MixerSpec spec, LayerShape shape, int hidden, std::vector<float> feature_map)
    : Mixer(spec, shape, hidden), feature_map_(std::move(feature_map)) {}

MixerState LinearAttentionMixer::new_state(std::int64_t, int) const {
  const auto linear = linear_shape(spec_, shape_);
  MixerState state;
  state.matrix.assign(cpu::linear_matrix_floats(linear), 0.0f);
  state.normalizer.assign(cpu::linear_normalizer_floats(linear), 0.0f);
  return state;
}

void LinearAttentionMixer::prefill(Backend&, const MixerInput& in, MixerState& state, float* out) const {
  cpu::linear_attention_chunkwise(linear_shape(spec_, shape_), feature_map_.empty() ? nullptr : feature_map_.data(),
                                  in.queries, in.keys, in.values, in.n, kPrefillChunk,
                                  {state.matrix.data(), state.normalizer.data()}, out);
  state.tokens_seen += in.n;
}

void LinearAttentionMixer::decode(Backend&, const MixerInput& in, MixerState& state, float* out) const {
  cpu::linear_attention_recurrent(linear_shape(spec_, shape_), feature_map_.empty() ? nullptr : feature_map_.data(),
                                  in.queries, in.keys, in.values, in.n, {state.matrix.data(), state.normalizer.data()}, out);
  state.tokens_seen += in.n;
}

}  // namespace bifocal
