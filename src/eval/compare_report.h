// The report of `bifocal compare`: perplexity by token position for several mixers side by side
// (Markdown table, JSON with every number, SVG plot), and the attention-sink table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/human_bytes.h"
#include "eval/attention_sinks.h"
#include "eval/perplexity.h"
#include "eval/svg_plot.h"

namespace bifocal {

struct MixerComparison {
  std::string mixer;                         // the spec, canonical text
  PositionPerplexity perplexity;
  std::size_t accounted_state_bytes = 0;     // Model::accounted_state_bytes(context): all layers, CPU fp32 cache
  double token_equivalents_per_layer = 0;    // BF16 KV-token equivalents (DESIGN.md "Memory accounting"), layer mean
};

struct CompareReport {
  std::string command_line;
  std::string model;
  std::vector<std::string> texts;
  int context = 0;
  std::vector<int> bucket_edges;
  std::optional<std::int32_t> bos;
  std::size_t windows = 0;
  std::size_t dropped_tokens = 0;
  std::vector<MixerComparison> mixers;
  std::optional<AttentionSinkStats> attention;
  std::string attention_mixer;  // what the probe ran: the checkpoint's native attention, or full
};

// One row per mixer: mixer, state bytes, token equivalents per layer, perplexity per bucket,
// overall perplexity, and (when `full` is among the mixers) the ratio to full's last bucket.
std::string perplexity_table_markdown(const CompareReport& report);
// One row per layer: mass on the first tokens, the uniform mass, their ratio.
std::string attention_table_markdown(const AttentionSinkStats& stats);
// One row per layer and one column per position range of stats.by_position, then the uniform
// mass; empty when there are no ranges.
std::string position_sink_table_markdown(const AttentionSinkStats& stats);
// compare.md: the command line and the tables.
std::string compare_markdown(const CompareReport& report);
nlohmann::json compare_json(const CompareReport& report);
// Perplexity (log y) against bucket centre, one series per mixer labelled with its state bytes.
// The x axis is logarithmic when the centres span more than a factor of 16 (doubling buckets,
// as the defaults), so the first buckets, where windows diverge, stay visible.
LinePlot compare_plot(const CompareReport& report);

}  // namespace bifocal
