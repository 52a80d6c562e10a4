#include "mixer/mixer_parameters.h"

#include <algorithm>

#include "io/safetensors.h"

namespace bifocal {

namespace {

class ParameterReader {
 public:
  ParameterReader(const WeightStore* store, int layer, MixerParameters& out)
      : store_(store), prefix_("model.layers." + std::to_string(layer) + ".self_attn."), out_(out) {}

  // The tensor if the checkpoint has it (shape checked), else `fill` repeated, noted as untrained.
  std::vector<float> read(const std::string& name, const std::vector<std::int64_t>& shape, float fill) {
    const std::string full = prefix_ + name;
    if (store_ != nullptr && store_->find(full) != nullptr) return store_->require(full, shape).to_f32();
    out_.untrained.push_back(full);
    std::int64_t count = 1;
    for (auto dim : shape) count *= dim;
    return std::vector<float>(count, fill);
  }
  bool has(const std::string& name) const { return store_ != nullptr && store_->find(prefix_ + name) != nullptr; }

 private:
  const WeightStore* store_;
  std::string prefix_;
  MixerParameters& out_;
};

}  // namespace

MixerParameters MixerParameters::load(const MixerSpec& spec, const LayerShape& shape, int hidden, int layer,
                                      const WeightStore* store) {
  using Kind = MixerSpec::Kind;
  MixerParameters p;
  ParameterReader reader(store, layer, p);
  const std::int64_t hq = shape.query_heads, hkv = shape.kv_heads, d = shape.head_dim;
  const bool window_branch = spec.kind == Kind::SlidingWindow || spec.kind == Kind::Bifocal;
  if (window_branch && spec.sink == MixerSpec::Sink::Learned) p.sinks = reader.read("sinks", {hq}, kNeutralLearnedSink);
  if (spec.kind == Kind::Mlstm || spec.kind == Kind::Bifocal) {
    const std::int64_t states = spec.state == MixerSpec::StatePlacement::PerKvHead ? hkv : hq;
    p.input_gate_weight = reader.read("mlstm.igate.weight", {states, hidden}, 0.0f);
    p.input_gate_bias = reader.read("mlstm.igate.bias", {states}, kNeutralInputGateBias);
    p.forget_gate_weight = reader.read("mlstm.fgate.weight", {states, hidden}, 0.0f);
    p.forget_gate_bias = reader.read("mlstm.fgate.bias", {states}, kNeutralForgetGateBias);
  }
  if (spec.kind == Kind::Bifocal) {
    p.mix_gate_weight = reader.read("mix_gate.weight", {hq, hidden}, 0.0f);
    p.mix_gate_bias = reader.read("mix_gate.bias", {hq}, kNeutralMixGateBias);
  }
  const bool hedgehog = (spec.kind == Kind::Linear || spec.kind == Kind::Lolcats) && spec.feature == MixerSpec::Feature::Hedgehog;
  if (hedgehog) {
    const bool trained = reader.has("feature_map.weight");
    p.feature_map = reader.read("feature_map.weight", {hkv, d, 64}, 0.0f);
    if (!trained)
      for (std::int64_t head = 0; head < hkv; ++head)
        for (std::int64_t i = 0; i < std::min<std::int64_t>(d, 64); ++i) p.feature_map[(head * d + i) * 64 + i] = 1.0f;
  }
  if (spec.kind == Kind::Lolcats) p.window_factor = reader.read("window_factor", {hq}, kNeutralWindowFactor);
  return p;
}

}  // namespace bifocal
