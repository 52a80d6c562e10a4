// Attention-sink statistics (the observation behind SWA(w, s), DESIGN.md "swa"): how much
// softmax mass each layer's queries put on the first few key positions, against the mass a
// uniform distribution over the visible keys would give them. A ratio far above 1 is why
// dropping those keys from a window breaks a pretrained model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bifocal {

class Model;

struct LayerSinkMass {
  int layer = 0;
  double mass = 0;     // mean over heads and queries of the mass on keys < first_tokens
  // A sink often lives in a few heads only, which the mean over heads dilutes: the head with
  // the largest mean mass over the same queries, and that mass.
  int strongest_head = 0;
  double strongest_head_mass = 0;
  double uniform = 0;  // mean over the same queries of min(first_tokens, t + 1) / (t + 1)
  std::int64_t queries = 0;
  double ratio() const { return uniform > 0 ? mass / uniform : 0.0; }
};

// The mass on the first tokens of the queries at positions [begin, end) only, per layer (mean
// over heads and those queries): whether a sink holds at every distance or only near the start,
// which is what decides between a window with sink tokens and one without.
struct PositionSinkMass {
  std::int64_t begin = 0, end = 0;
  std::int64_t queries = 0;             // over all windows; 0 when no window reaches `begin`
  double uniform = 0;                   // mean of min(first_tokens, t + 1) / (t + 1) over them
  std::vector<double> mass_per_layer;   // [layer]
};

struct AttentionSinkStats {
  int first_tokens = 1;
  std::int64_t min_query_position = 0;  // queries at positions >= this are averaged in `layers`
  std::vector<LayerSinkMass> layers;
  std::vector<PositionSinkMass> by_position;  // one per range of position_edges (every query)
};

// The query positions to average: from 128 on, past the start where every key is near the first
// ones; windows too short for that use every query from first_tokens on.
std::int64_t sink_query_start(std::size_t shortest_window, int first_tokens);

// Runs each window from a fresh session with Model's attention probe. Every layer of `model`
// must run softmax attention over absolute positions (Model::forward's probe says which not).
// position_edges (increasing, e.g. compare's bucket edges) split the query positions into the
// ranges of `by_position`; empty: none.
AttentionSinkStats measure_attention_sinks(const Model& model, const std::vector<std::vector<std::int32_t>>& windows,
                                           int first_tokens, std::int64_t min_query_position,
                                           std::span<const std::int64_t> position_edges = {});

}  // namespace bifocal
