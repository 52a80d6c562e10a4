// mlstm: the stabilized xLSTM mLSTM cell on the layer's q, k, v (DESIGN.md "mlstm"), with the
// input and forget gate pre-activations linear in the layer input: ĩ, f̃ = x·Wᵀ + b, one per
// state head. Prefill is chunkwise, decode the recurrence.
#include "backend/cpu/mlstm.h"
#include "mixer/mixers.h"

namespace bifocal {

namespace {
constexpr int kPrefillChunk = 64;
}

MlstmMixer::MlstmMixer(MixerSpec spec, LayerShape shape, int hidden, MixerParameters parameters)
    : Mixer(spec, shape, hidden), parameters_(std::move(parameters)) {}

int MlstmMixer::states() const {
  return spec_.state == MixerSpec::StatePlacement::PerKvHead ? shape_.kv_heads : shape_.query_heads;
}

MixerState MlstmMixer::new_state(std::int64_t, int chunk) const {
  const cpu::MlstmShape mlstm{shape_.query_heads, shape_.kv_heads, states(), shape_.head_dim};
  MixerState state;
  state.matrix.assign(cpu::mlstm_matrix_floats(mlstm), 0.0f);
  state.normalizer.assign(cpu::mlstm_normalizer_floats(mlstm), 0.0f);
  state.stabilizer.assign(cpu::mlstm_stabilizer_floats(mlstm), 0.0f);
  state.workspace_gates.assign(std::size_t(2) * chunk * states(), 0.0f);
  return state;
}

void MlstmMixer::run(Backend& backend, const MixerInput& in, MixerState& state, float* out, bool chunkwise) const {
  const int s = states();
  float* input_gate = state.workspace_gates.data();
  float* forget_gate = input_gate + std::size_t(in.n) * s;
  backend.matmul(in.x, parameters_.input_gate_weight.data(), parameters_.input_gate_bias.data(), in.n, hidden_, s, input_gate);
  backend.matmul(in.x, parameters_.forget_gate_weight.data(), parameters_.forget_gate_bias.data(), in.n, hidden_, s, forget_gate);
  const cpu::MlstmShape mlstm{shape_.query_heads, shape_.kv_heads, s, shape_.head_dim};
  const cpu::MlstmState cell{state.matrix.data(), state.normalizer.data(), state.stabilizer.data()};
  if (chunkwise)
    cpu::mlstm_chunkwise(mlstm, in.queries, in.keys, in.values, input_gate, forget_gate, in.n, kPrefillChunk, cell, out);
  else
    cpu::mlstm_recurrent(mlstm, in.queries, in.keys, in.values, input_gate, forget_gate, in.n, cell, out);
  state.tokens_seen += in.n;
}

void MlstmMixer::prefill(Backend& backend, const MixerInput& in, MixerState& state, float* out) const {
  run(backend, in, state, out, /*chunkwise=*/true);
}

void MlstmMixer::decode(Backend& backend, const MixerInput& in, MixerState& state, float* out) const {
  run(backend, in, state, out, /*chunkwise=*/false);
}

}  // namespace bifocal
