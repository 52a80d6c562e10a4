// A layer's sequence mixer: given q, k, v of n new tokens, produce the attention output,
// reading and updating a per-session state whose size is fixed when the session starts
// (DESIGN.md "Core interfaces"). One file per mixer in this folder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bifocal/budget.h"
#include "bifocal/mixer_spec.h"
#include "mixer/mixer_parameters.h"

namespace bifocal {

struct MixerInput {
  const float* x;                  // [n, hidden] the layer's normalised input (gates read it)
  float* queries;                  // [n, Hq, d] after q/k-norm, and after RoPE unless rotates_keys_itself()
  float* keys;                     // [n, Hkv, d] likewise
  const float* values;             // [n, Hkv, d]
  const std::int64_t* positions;   // [n] absolute positions
  int n = 0;
  // Optional attention probe (AttentionArgs): mass on keys at positions < probe_first_keys,
  // [n, Hq]; only mixers whose supports_attention_probe() is true are given one.
  int probe_first_keys = 0;
  float* probe_mass = nullptr;
};

// Everything one layer keeps for one sequence. The state proper (counted by the accounting):
// cached keys/values and the fp32 recurrent state. The workspace is scratch sized once for the
// session's prefill chunk, so that no call allocates.
struct MixerState {
  std::vector<float> keys, values;             // [slots, Hkv, d]
  std::vector<std::int64_t> slot_positions;    // absolute position held by each slot, −1 if empty
  std::vector<float> matrix, normalizer, stabilizer;
  std::int64_t tokens_seen = 0;

  std::vector<float> workspace_keys, workspace_values, workspace_gates, workspace_branch;
  std::vector<std::int64_t> workspace_positions;

  std::size_t state_bytes() const {
    return (keys.size() + values.size() + matrix.size() + normalizer.size() + stabilizer.size()) * sizeof(float);
  }
};

class Mixer {
 public:
  Mixer(MixerSpec spec, LayerShape shape, int hidden) : spec_(spec), shape_(shape), hidden_(hidden) {}
  virtual ~Mixer() = default;

  const MixerSpec& spec() const { return spec_; }
  const LayerShape& shape() const { return shape_; }
  // The accounting for this layer with the CPU backend's fp32 cache (kv_element_bytes = 4).
  MixerMemory memory(std::int64_t context_tokens) const { return mixer_memory(spec_, shape_, context_tokens, sizeof(float)); }

  // A state for one sequence; `capacity` bounds full attention's cache, `chunk` the tokens per call.
  virtual MixerState new_state(std::int64_t capacity, int chunk) const = 0;
  // Positions=rolling re-rotates cached keys at every step, so it wants q, k before RoPE.
  virtual bool rotates_keys_itself() const { return false; }
  // Softmax attention over absolute positions, which can report the attention probe.
  virtual bool supports_attention_probe() const { return false; }
  // n tokens (a prompt chunk): the parallel/chunked form.
  virtual void prefill(Backend& backend, const MixerInput& input, MixerState& state, float* out) const = 0;
  // One token: the recurrent form; allocates nothing.
  virtual void decode(Backend& backend, const MixerInput& input, MixerState& state, float* out) const {
    prefill(backend, input, state, out);
  }

 protected:
  MixerSpec spec_;
  LayerShape shape_;
  int hidden_;
};

// Builds the mixer for one layer. `inv_freq` is the model's RoPE table (rolling positions use it).
std::unique_ptr<Mixer> make_mixer(const MixerSpec& spec, const LayerShape& shape, int hidden, MixerParameters parameters,
                                  const std::vector<float>& inv_freq);

}  // namespace bifocal
