// The extra parameters some mixers need (DESIGN.md "Checkpoint conventions for mixer
// parameters"), read from the checkpoint when present, otherwise set to documented neutral
// values so that every mixer runs on any model (and the CLI warns that it is untrained).
#pragma once

#include <string>
#include <vector>

#include "bifocal/budget.h"
#include "bifocal/mixer_spec.h"

namespace bifocal {

class WeightStore;

// Neutral values: chosen so that a retrofitted mixer starts as its window branch alone.
inline constexpr float kNeutralLearnedSink = -1.0e4f;    // e^{S−m} = 0: no sink mass (= sink=none)
inline constexpr float kNeutralForgetGateBias = 10.0f;   // logsigmoid(10) ≈ −4.5e-5: remember almost all
inline constexpr float kNeutralInputGateBias = 0.0f;     // gate weights are zero
inline constexpr float kNeutralMixGateBias = -30.0f;     // sigmoid(−30) ≈ 1e-13: SWA branch alone
inline constexpr float kNeutralWindowFactor = 10.0f;     // γ = sigmoid(10) ≈ 1
// Hedgehog W: the identity on the first min(d, 64) features, zero elsewhere.

struct MixerParameters {
  std::vector<float> sinks;                                  // [Hq]        self_attn.sinks
  std::vector<float> input_gate_weight, input_gate_bias;     // [S, hidden], [S]   mlstm.igate
  std::vector<float> forget_gate_weight, forget_gate_bias;   // [S, hidden], [S]   mlstm.fgate
  std::vector<float> mix_gate_weight, mix_gate_bias;         // [Hq, hidden], [Hq] mix_gate
  std::vector<float> feature_map;                            // [Hkv, d, 64] feature_map.weight
  std::vector<float> window_factor;                          // [Hq]        window_factor
  std::vector<std::string> untrained;                        // tensors that got neutral values

  // Reads layer `layer`'s tensors for `spec` from `store` (shapes checked, errors name the file);
  // a null store gives neutral values for everything.
  static MixerParameters load(const MixerSpec& spec, const LayerShape& shape, int hidden, int layer, const WeightStore* store);
};

}  // namespace bifocal
