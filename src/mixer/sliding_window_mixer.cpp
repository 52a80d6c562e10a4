// swa: a window of w cached tokens: s sink tokens (the first s of the sequence, kept forever)
// plus a ring buffer of the w − s most recent (DESIGN.md "swa"). With sink=learned or none,
// s = 0 and the ring holds all w; a learned sink adds e^{S_h} to the denominator only.
//
// Slots: token p < s lives in slot p; token p >= s in slot s + (p − s) mod (w − s).
// Each call gathers the cached tokens in position order (sinks, then the ring oldest first) and
// appends the new ones, attends with the window rule on absolute positions, then stores the
// new tokens. Gathering first keeps prefill exact when new tokens evict old ones that earlier
// queries of the same chunk still see.
#include <algorithm>

#include "backend/cpu/rolling_attention.h"
#include "mixer/mixers.h"

namespace bifocal {

SlidingWindowMixer::SlidingWindowMixer(MixerSpec spec, LayerShape shape, int hidden, std::vector<float> learned_sinks,
                                       const std::vector<float>& inv_freq)
    : Mixer(spec, shape, hidden), learned_sinks_(std::move(learned_sinks)), inv_freq_(inv_freq) {
  sink_tokens_ = spec.sink == MixerSpec::Sink::Tokens ? spec.sink_tokens : 0;
}

MixerState SlidingWindowMixer::new_state(std::int64_t, int chunk) const {
  MixerState state;
  const std::size_t row = std::size_t(shape_.kv_heads) * shape_.head_dim;
  const int window = spec_.window;
  state.keys.assign(window * row, 0.0f);
  state.values.assign(window * row, 0.0f);
  state.slot_positions.assign(window, -1);
  state.workspace_keys.assign((window + chunk) * row, 0.0f);
  state.workspace_values.assign((window + chunk) * row, 0.0f);
  state.workspace_positions.assign(window + chunk, 0);
  return state;
}

int SlidingWindowMixer::slot_of(std::int64_t position) const {
  if (position < sink_tokens_) return int(position);
  return sink_tokens_ + int((position - sink_tokens_) % (spec_.window - sink_tokens_));
}

void SlidingWindowMixer::prefill(Backend& backend, const MixerInput& in, MixerState& state, float* out) const {
  const std::size_t row = std::size_t(shape_.kv_heads) * shape_.head_dim;
  // 1. Gather: cached tokens in position order, then the new ones.
  std::int64_t gathered = 0;
  auto append = [&](const float* key, const float* value, std::int64_t position) {
    std::copy_n(key, row, state.workspace_keys.data() + gathered * row);
    std::copy_n(value, row, state.workspace_values.data() + gathered * row);
    state.workspace_positions[gathered++] = position;
  };
  const std::int64_t seen = state.tokens_seen;
  const std::int64_t oldest = std::max<std::int64_t>(std::min<std::int64_t>(seen, sink_tokens_),
                                                     seen - (spec_.window - sink_tokens_));
  for (std::int64_t p = 0; p < std::min<std::int64_t>(seen, sink_tokens_); ++p)
    append(state.keys.data() + p * row, state.values.data() + p * row, p);
  for (std::int64_t p = oldest; p < seen; ++p) {
    const int slot = slot_of(p);
    append(state.keys.data() + slot * row, state.values.data() + slot * row, p);
  }
  for (int i = 0; i < in.n; ++i) append(in.keys + i * row, in.values + i * row, in.positions[i]);

  // 2. Attend.
  const AttentionArgs args{.queries = in.queries, .positions = in.positions, .n = in.n,
                           .keys = state.workspace_keys.data(), .values = state.workspace_values.data(),
                           .key_positions = state.workspace_positions.data(), .num_keys = gathered,
                           .query_heads = shape_.query_heads, .kv_heads = shape_.kv_heads, .head_dim = shape_.head_dim,
                           .window = spec_.window, .sink_tokens = sink_tokens_,
                           .learned_sinks = learned_sinks_.empty() ? nullptr : learned_sinks_.data(), .out = out,
                           .probe_first_keys = in.probe_first_keys, .probe_mass = in.probe_mass};
  if (spec_.positions == MixerSpec::Positions::Rolling)
    cpu::rolling_window_attention(args, inv_freq_.data());
  else
    backend.attention(args);

  // 3. Store the new tokens (only the last w − s of a long chunk survive in the ring).
  for (int i = 0; i < in.n; ++i) {
    const std::int64_t p = in.positions[i];
    const int slot = slot_of(p);
    std::copy_n(in.keys + i * row, row, state.keys.data() + slot * row);
    std::copy_n(in.values + i * row, row, state.values.data() + slot * row);
    state.slot_positions[slot] = p;
  }
  state.tokens_seen += in.n;
}

}  // namespace bifocal
