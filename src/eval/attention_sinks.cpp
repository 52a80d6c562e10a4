#include "eval/attention_sinks.h"

#include <algorithm>

#include "bifocal/error.h"
#include "bifocal/model.h"

namespace bifocal {

std::int64_t sink_query_start(std::size_t shortest_window, int first_tokens) {
  constexpr std::int64_t kPastTheStart = 128;
  return std::int64_t(shortest_window) > kPastTheStart ? kPastTheStart : first_tokens;
}

AttentionSinkStats measure_attention_sinks(const Model& model, const std::vector<std::vector<std::int32_t>>& windows,
                                           int first_tokens, std::int64_t min_query_position) {
  if (first_tokens < 1) fail("attention stats", "first tokens must be at least 1");
  const int layers = model.config().num_layers, heads = model.config().num_query_heads;
  AttentionSinkStats stats{.first_tokens = first_tokens, .min_query_position = min_query_position, .layers = {}};
  std::vector<std::vector<double>> mass_sum(layers, std::vector<double>(heads, 0.0));  // [layer][head]
  double uniform_sum = 0;
  std::int64_t queries = 0;
  std::vector<float> last_logits(model.config().vocab_size);
  AttentionProbe probe{.first_keys = first_tokens, .mass_per_layer = {}};
  for (const auto& window : windows) {
    Session session = model.new_session(std::int64_t(window.size()));
    model.forward(session, window, last_logits, /*all_logits=*/false, &probe);
    for (std::int64_t t = min_query_position; t < std::int64_t(window.size()); ++t) {
      uniform_sum += double(std::min<std::int64_t>(first_tokens, t + 1)) / double(t + 1);
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
  return stats;
}

}  // namespace bifocal
