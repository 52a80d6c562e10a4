// lolcats: window softmax over the last w keys plus the linear term of keys that left the
// window, one shared normalizer (DESIGN.md "lolcats"). Ring buffer [w] + linear state per KV head.
#include "backend/cpu/lolcats.h"
#include "mixer/mixers.h"

namespace bifocal {

namespace {
cpu::LinearShape linear_shape(const MixerSpec& spec, const LayerShape& shape) {
  return {shape.query_heads, shape.kv_heads, shape.head_dim,
          spec.feature == MixerSpec::Feature::Hedgehog ? cpu::FeatureMap::Hedgehog : cpu::FeatureMap::Elu1};
}

cpu::LolcatsState lolcats_state(MixerState& state) {
  return {state.keys.data(), state.values.data(), {state.matrix.data(), state.normalizer.data()}, &state.tokens_seen};
}
}  // namespace

LolcatsMixer::LolcatsMixer(MixerSpec spec, LayerShape shape, int hidden, std::vector<float> feature_map,
                           std::vector<float> window_factor)
    : Mixer(spec, shape, hidden), feature_map_(std::move(feature_map)), window_factor_(std::move(window_factor)) {}

MixerState LolcatsMixer::new_state(std::int64_t, int) const {
  const auto linear = linear_shape(spec_, shape_);
  MixerState state;
  state.keys.assign(cpu::lolcats_window_floats(linear, spec_.window), 0.0f);
  state.values.assign(cpu::lolcats_window_floats(linear, spec_.window), 0.0f);
  state.matrix.assign(cpu::linear_matrix_floats(linear), 0.0f);
  state.normalizer.assign(cpu::linear_normalizer_floats(linear), 0.0f);
  return state;
}

void LolcatsMixer::prefill(Backend&, const MixerInput& in, MixerState& state, float* out) const {
  cpu::lolcats_prefill(linear_shape(spec_, shape_), spec_.window, feature_map_.empty() ? nullptr : feature_map_.data(),
                       window_factor_.data(), in.queries, in.keys, in.values, in.n, lolcats_state(state), out);
}

void LolcatsMixer::decode(Backend&, const MixerInput& in, MixerState& state, float* out) const {
  cpu::lolcats_step_by_step(linear_shape(spec_, shape_), spec_.window, feature_map_.empty() ? nullptr : feature_map_.data(),
                            window_factor_.data(), in.queries, in.keys, in.values, in.n, lolcats_state(state), out);
}

}  // namespace bifocal
