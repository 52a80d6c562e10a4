// The concrete mixers (one .cpp each in this folder); make_mixer() in mixer_factory.cpp picks one.
#pragma once

#include <vector>

#include "mixer/mixer.h"

namespace bifocal {

class FullAttentionMixer final : public Mixer {
 public:
  using Mixer::Mixer;
  MixerState new_state(std::int64_t capacity, int chunk) const override;
  bool supports_attention_probe() const override { return true; }
  void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;
};

class SlidingWindowMixer final : public Mixer {
 public:
  SlidingWindowMixer(MixerSpec spec, LayerShape shape, int hidden, std::vector<float> learned_sinks,
                     const std::vector<float>& inv_freq);
  MixerState new_state(std::int64_t capacity, int chunk) const override;
  bool rotates_keys_itself() const override { return spec_.positions == MixerSpec::Positions::Rolling; }
  bool supports_attention_probe() const override { return spec_.positions == MixerSpec::Positions::Absolute; }
  void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;

 private:
  int slot_of(std::int64_t position) const;
  std::vector<float> learned_sinks_;
  std::vector<float> inv_freq_;
  int sink_tokens_ = 0;
};

class LinearAttentionMixer final : public Mixer {
 public:
  LinearAttentionMixer(MixerSpec spec, LayerShape shape, int hidden, std::vector<float> feature_map);
  MixerState new_state(std::int64_t capacity, int chunk) const override;
  void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;
  void decode(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;

 private:
  std::vector<float> feature_map_;
};

class LolcatsMixer final : public Mixer {
 public:
  LolcatsMixer(MixerSpec spec, LayerShape shape, int hidden, std::vector<float> feature_map, std::vector<float> window_factor);
  MixerState new_state(std::int64_t capacity, int chunk) const override;
  void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;
  void decode(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;

 private:
  std::vector<float> feature_map_;
  std::vector<float> window_factor_;
};

// The mLSTM branch on its own; BifocalMixer reuses it.
class MlstmMixer final : public Mixer {
 public:
  MlstmMixer(MixerSpec spec, LayerShape shape, int hidden, MixerParameters parameters);
  int states() const;
  MixerState new_state(std::int64_t capacity, int chunk) const override;
  void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;
  void decode(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;

 private:
  void run(Backend& backend, const MixerInput& input, MixerState& state, float* out, bool chunkwise) const;
  MixerParameters parameters_;
};

// bifocal: the SWA branch and the mLSTM branch on the same q, k, v, mixed per query head by
// o = sigmoid(W_o x + b_o): out = o · mLSTM + (1 − o) · SWA (DESIGN.md "bifocal").
class BifocalMixer final : public Mixer {
 public:
  BifocalMixer(MixerSpec spec, LayerShape shape, int hidden, MixerParameters parameters, const std::vector<float>& inv_freq);
  MixerState new_state(std::int64_t capacity, int chunk) const override;
  void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;
  void decode(Backend& backend, const MixerInput& input, MixerState& state, float* out) const override;

 private:
  void run(Backend& backend, const MixerInput& input, MixerState& state, float* out, bool decoding) const;
  SlidingWindowMixer window_;
  MlstmMixer memory_;
  std::vector<float> mix_gate_weight_, mix_gate_bias_;
};

}  // namespace bifocal
