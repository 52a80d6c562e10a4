// bifocal: an SWA branch and an mLSTM branch on the same q, k, v (after q/k-norm and RoPE), mixed
// per query head by o = sigmoid(W_o x + b_o):  out = o · mLSTM + (1 − o) · SWA  (DESIGN.md).
// The two branches share one MixerState: the window in keys/values, the mLSTM in
// matrix/normalizer/stabilizer.
#include <cmath>

#include "mixer/mixers.h"

namespace bifocal {

namespace {
MixerSpec window_branch(MixerSpec spec) {
  spec.kind = MixerSpec::Kind::SlidingWindow;
  return spec;
}
MixerSpec memory_branch(MixerSpec spec) {
  spec.kind = MixerSpec::Kind::Mlstm;
  return spec;
}
}  // namespace

BifocalMixer::BifocalMixer(MixerSpec spec, LayerShape shape, int hidden, MixerParameters parameters,
                           const std::vector<float>& inv_freq)
    : Mixer(spec, shape, hidden),
      window_(window_branch(spec), shape, hidden, parameters.sinks, inv_freq),
      memory_(memory_branch(spec), shape, hidden, parameters),
      mix_gate_weight_(std::move(parameters.mix_gate_weight)),
      mix_gate_bias_(std::move(parameters.mix_gate_bias)) {}

MixerState BifocalMixer::new_state(std::int64_t capacity, int chunk) const {
  MixerState state = window_.new_state(capacity, chunk);
  MixerState memory = memory_.new_state(capacity, chunk);
  state.matrix = std::move(memory.matrix);
  state.normalizer = std::move(memory.normalizer);
  state.stabilizer = std::move(memory.stabilizer);
  state.workspace_gates.assign(memory.workspace_gates.size() + std::size_t(chunk) * shape_.query_heads, 0.0f);
  state.workspace_branch.assign(std::size_t(chunk) * shape_.query_heads * shape_.head_dim, 0.0f);
  return state;
}

void BifocalMixer::run(Backend& backend, const MixerInput& in, MixerState& state, float* out, bool decoding) const {
  const std::int64_t tokens_before = state.tokens_seen;
  float* mlstm_out = state.workspace_branch.data();
  window_.prefill(backend, in, state, out);  // out = SWA
  state.tokens_seen = tokens_before;         // both branches advance the one counter
  if (decoding)
    memory_.decode(backend, in, state, mlstm_out);
  else
    memory_.prefill(backend, in, state, mlstm_out);
  // The mix gate: one scalar per query head from the layer input. It goes after the mLSTM's
  // gates in the workspace, which the mLSTM no longer needs.
  const int hq = shape_.query_heads, d = shape_.head_dim;
  float* gate = state.workspace_gates.data() + (state.workspace_gates.size() - std::size_t(in.n) * 0) - std::size_t(in.n) * hq;
  backend.matmul(in.x, mix_gate_weight_.data(), mix_gate_bias_.data(), in.n, hidden_, hq, gate);
  for (int i = 0; i < in.n; ++i)
    for (int h = 0; h < hq; ++h) {
      const float o = 1.0f / (1.0f + std::exp(-gate[i * hq + h]));
      float* swa = out + (std::size_t(i) * hq + h) * d;
      const float* memory = mlstm_out + (std::size_t(i) * hq + h) * d;
      for (int c = 0; c < d; ++c) swa[c] = o * memory[c] + (1.0f - o) * swa[c];
    }
}

void BifocalMixer::prefill(Backend& backend, const MixerInput& in, MixerState& state, float* out) const {
  run(backend, in, state, out, false);
}

void BifocalMixer::decode(Backend& backend, const MixerInput& in, MixerState& state, float* out) const {
  run(backend, in, state, out, true);
}

}  // namespace bifocal
