// full: causal softmax attention over every cached token (DESIGN.md "full"). The cache has one
// row per position, allocated for the session's capacity; memory grows with the context.
#include <algorithm>

#include "bifocal/error.h"
#include "mixer/mixers.h"

namespace bifocal {

MixerState FullAttentionMixer::new_state(std::int64_t capacity, int) const {
  MixerState state;
  const std::size_t row = std::size_t(shape_.kv_heads) * shape_.head_dim;
  state.keys.assign(capacity * row, 0.0f);
  state.values.assign(capacity * row, 0.0f);
  return state;
}

void FullAttentionMixer::prefill(Backend& backend, const MixerInput& in, MixerState& state, float* out) const {
  const std::size_t row = std::size_t(shape_.kv_heads) * shape_.head_dim;
  const std::int64_t capacity = std::int64_t(state.keys.size() / row);
  if (state.tokens_seen + in.n > capacity)
    fail("session", "context full: full attention holds " + std::to_string(capacity) + " tokens");
  std::copy_n(in.keys, in.n * row, state.keys.data() + state.tokens_seen * row);
  std::copy_n(in.values, in.n * row, state.values.data() + state.tokens_seen * row);
  state.tokens_seen += in.n;
  backend.attention({.queries = in.queries, .positions = in.positions, .n = in.n, .keys = state.keys.data(),
                     .values = state.values.data(), .key_positions = nullptr, .num_keys = state.tokens_seen,
                     .query_heads = shape_.query_heads, .kv_heads = shape_.kv_heads, .head_dim = shape_.head_dim,
                     .window = 0, .sink_tokens = 0, .learned_sinks = nullptr, .out = out,
                     .probe_first_keys = in.probe_first_keys, .probe_mass = in.probe_mass});
}

}  // namespace bifocal
