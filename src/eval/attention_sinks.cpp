#include "eval/attention_sinks.h"

#include <algorithm>

#include "bifocal/error.h"
#include "bifocal/model.h"

namespace bifocal {

std::int64_t sink_query_start(std::size_t shortest_window, int first_tokens) {
  constexpr std::int64_t kPastTheStart = 128;
  return std::int64_t(shortest_window) > kPastTheStart ? kPastTheStart : first_tokens;
}

namespace {

// What a uniform distribution over the t + 1 visible keys puts on the first `first_tokens` of them.
double uniform_mass_at(std::int64_t t, int first_tokens) {
  return double(std::min<std::int64_t>(first_tokens, t + 1)) / double(t + 1);
}

}  // namespace

AttentionSinkStats measure_attention_sinks(const Model& model, const std::vector<std::vector<std::int32_t>>& windows,
                                           int first_tokens, std::int64_t min_query_position,
                                           std::span<const std::int64_t> position_edges) {
  if (first_tokens < 1) fail("attention stats", "first tokens must be at least 1");
  for (std::size_t i = 1; i < position_edges.size(); ++i)
    if (position_edges[i] <= position_edges[i - 1]) fail("attention stats", "position edges must increase");
  const int layers = model.config().num_layers, heads = model.config().num_query_heads;
  AttentionSinkStats stats{.first_tokens = first_tokens, .min_query_position = min_query_position, .layers = {},
                           .by_position = {}};
  std::vector<std::vector<double>> mass_sum(layers, std::vector<double>(heads, 0.0));  // [layer][head]
  double uniform_sum = 0;
  std::int64_t queries = 0;
  std::vector<float> last_logits(model.config().vocab_size);
  AttentionProbe probe{.first_keys = first_tokens, .mass_per_layer = {}};
  for (std::size_t i = 0; i + 1 < position_edges.size(); ++i)
    stats.by_position.push_back({.begin = position_edges[i], .end = position_edges[i + 1], .queries = 0,
                                 .uniform = 0, .mass_per_layer = std::vector<double>(layers, 0.0)});
  for (const auto& window : windows) {
    Session session = model.new_session(std::int64_t(window.size()));
    model.forward(session, window, last_logits, /*all_logits=*/false, &probe);
    for (PositionSinkMass& range : stats.by_position)  // sums here, means below
      for (std::int64_t t = range.begin; t < std::min(range.end, std::int64_t(window.size())); ++t) {
        range.uniform += uniform_mass_at(t, first_tokens);
        ++range.queries;
        for (int l = 0; l < layers; ++l)
          for (int h = 0; h < heads; ++h) range.mass_per_layer[l] += probe.mass_per_layer[l][std::size_t(t) * heads + h];
      }
    for (std::int64_t t = min_query_position; t < std::int64_t(window.size()); ++t) {
      uniform_sum += uniform_mass_at(t, first_tokens);
      ++queries;
      for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) mass_sum[l][h] += probe.mass_per_layer[l][std::size_t(t) * heads + h];
    }
  }
  for (int l = 0; l < layers; ++l) {
    const auto& per_head = mass_sum[l];
    const int strongest = int(std::max_element(per_head.begin(), per_head.end()) - per_head.begin());
    double total = 0;
    for (const double m : per_head) total += m;
    stats.layers.push_back({.layer = l,
                            .mass = queries ? total / (double(queries) * heads) : 0.0,
                            .strongest_head = strongest,
                            .strongest_head_mass = queries ? per_head[strongest] / double(queries) : 0.0,
                            .uniform = queries ? uniform_sum / double(queries) : 0.0,
                            .queries = queries});
  }
  for (PositionSinkMass& range : stats.by_position) {
    if (range.queries == 0) continue;
    range.uniform /= double(range.queries);
    for (double& mass : range.mass_per_layer) mass /= double(range.queries) * heads;
  }
  return stats;
}

}  // namespace bifocal
