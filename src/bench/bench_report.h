// `bifocal bench` results: one row per mixer and context, as a Markdown table, JSON, and an SVG
// of throughput and memory against context side by side (the layout of the paper's Figure 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/device_model.h"

namespace bifocal {

struct BenchRow {
  std::string mixer;
  std::int64_t context = 0;             // tokens in the cache when decoding starts
  double decode_tokens_per_second = 0;  // median over repeats of the mean step time
  std::optional<double> prefill_tokens_per_second;  // absent when the prefill was not run (--max-prefill)
  std::optional<double> time_to_first_token_seconds;
  std::size_t weight_bytes = 0;         // device allocation of the weights
  std::size_t cache_bytes = 0;          // device allocation of the session's caches and states
  std::size_t accounted_cache_bytes = 0;  // the accounting (include/bifocal/budget.h)
  std::size_t workspace_bytes = 0;      // the session's scratch
  std::size_t peak_device_bytes = 0;    // device memory in use after decoding (all allocations)
  std::size_t bytes_per_token = 0;      // the fewest bytes one decode step must move
  double bandwidth = 0;                 // measured copy bandwidth, bytes per second
  std::vector<DecodeAblation> ablations;  // --ablate: the step with some kernels emptied (a diagnosis)

  double achieved_bandwidth() const { return double(bytes_per_token) * decode_tokens_per_second; }
  double roofline_tokens_per_second() const { return bytes_per_token ? bandwidth / double(bytes_per_token) : 0.0; }
  double roofline_ratio() const { return bandwidth > 0 ? achieved_bandwidth() / bandwidth : 0.0; }
};

struct BenchReport {
  std::string command_line;
  std::string date;
  std::string device;
  std::string model;   // the shape name or the model directory
  std::string dtype;
  int generated_tokens = 0;
  int repeats = 0;
  int prefill_chunk = 0;  // tokens a prefill pass takes (--prefill-chunk)
  std::vector<BenchRow> rows;
};

std::string bench_markdown(const BenchReport& report);
nlohmann::json bench_json(const BenchReport& report);
// Two plots in one SVG: decode tokens/s against context, and cache memory against context.
std::string bench_svg(const BenchReport& report);

// Per mixer: (slowest context's decode tok/s) / (fastest's) − 1, the "spread" the issue bounds.
double decode_spread(const BenchReport& report, const std::string& mixer);

}  // namespace bifocal
