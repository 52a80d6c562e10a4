#include "bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/human_bytes.h"
#include "eval/svg_plot.h"

namespace bifocal {

namespace {

std::string context_label(std::int64_t tokens) {
  if (tokens >= 1024 && tokens % 1024 == 0) return fmt::format("{}K", tokens / 1024);
  return std::to_string(tokens);
}

std::string optional_number(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string("—");
}

// Mixers in the order they first appear.
std::vector<std::string> mixers_of(const BenchReport& report) {
  std::vector<std::string> mixers;
  for (const auto& row : report.rows)
    if (std::find(mixers.begin(), mixers.end(), row.mixer) == mixers.end()) mixers.push_back(row.mixer);
  return mixers;
}

}  // namespace

double decode_spread(const BenchReport& report, const std::string& mixer) {
  double slowest = INFINITY, fastest = 0;
  for (const auto& row : report.rows)
    if (row.mixer == mixer) {
      slowest = std::min(slowest, row.decode_tokens_per_second);
      fastest = std::max(fastest, row.decode_tokens_per_second);
    }
  return fastest > 0 && std::isfinite(slowest) ? fastest / slowest - 1.0 : 0.0;
}

namespace {

// --ablate's table: what the named kernels cost inside the step (DecodeAblation).
std::string ablation_markdown(const BenchReport& report) {
  std::string md;
  for (const auto& r : report.rows)
    for (const auto& a : r.ablations) {
      if (md.empty())
        md = "\n## Decode step with kernels emptied (`--ablate`, a diagnosis)\n\n"
             "Each named kernel keeps its launch shape, its place in the step and its blocks per multiprocessor (an "
             "empty stand-in holding about as many registers) but does nothing; the step's "
             "sampled id does not feed the next step in either timing (its outputs are garbage). Saved: what "
             "those kernels cost where they run, overlap and warm caches included.\n\n"
             "| mixer | context | kernels named | launches per step | step µs | step µs without them | saved µs "
             "per step | saved µs per launch |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n";
      if (a.launches == 0) {
        md += fmt::format("| `{}` | {} | `{}` | 0: not in this step | — | — | — | — |\n", r.mixer,
                          context_label(r.context), a.kernel);
        continue;
      }
      md += fmt::format("| `{}` | {} | `{}` | {} | {:.1f} | {:.1f} | {:.1f} | {:.2f} |\n", r.mixer,
                        context_label(r.context), a.kernel, a.launches, 1e6 * a.reference_seconds,
                        1e6 * a.ablated_seconds, 1e6 * a.saved_seconds(),
                        a.launches > 0 ? 1e6 * a.saved_seconds() / a.launches : 0.0);
    }
  return md;
}

}  // namespace

std::string bench_markdown(const BenchReport& report) {
  std::string md = fmt::format("# bifocal bench: {} ({}), {}\n\n", report.model, report.dtype, report.device);
  md += fmt::format("```\n{}\n```\n\n", report.command_line);
  md += fmt::format("{}; batch 1; decode: median over {} repeats of {} greedy steps (CUDA graph replays, device events). "
                    "Roofline: the fewest bytes a decode step moves (weights + cache/state read and written) at the "
                    "measured copy bandwidth; ratio = achieved / measured bandwidth. Prefill and TTFT: the whole context "
                    "prefilled at once (passes of {} tokens), median over {} timed prefills after an untimed "
                    "warm-up prefill of up to {} tokens. Each mixer runs in a fresh CUDA context, as if alone in "
                    "its process.\n\n",
                    report.date, report.repeats, report.generated_tokens, report.prefill_chunk,
                    report.repeats, report.prefill_chunk);
  md += "| mixer | context | decode tok/s | roofline tok/s | ratio | prefill tok/s | TTFT s | weights | cache (measured) "
        "| cache (accounting) | workspace | peak device | bytes / token |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : report.rows)
    md += fmt::format("| `{}` | {} | {:.1f} | {:.1f} | {:.3f} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.mixer,
                      context_label(r.context), r.decode_tokens_per_second, r.roofline_tokens_per_second(),
                      r.roofline_ratio(), optional_number(r.prefill_tokens_per_second, "{:.0f}"),
                      optional_number(r.time_to_first_token_seconds, "{:.3f}"), human_bytes(r.weight_bytes),
                      human_bytes(r.cache_bytes), human_bytes(r.accounted_cache_bytes), human_bytes(r.workspace_bytes),
                      human_bytes(r.peak_device_bytes), human_bytes(r.bytes_per_token));
  md += "\nDecode spread per mixer (fastest / slowest context − 1):";
  for (const auto& mixer : mixers_of(report)) md += fmt::format(" `{}` {:.1f}%;", mixer, 100.0 * decode_spread(report, mixer));
  md += "\n";
  md += ablation_markdown(report);
  return md;
}

nlohmann::json bench_json(const BenchReport& report) {
  nlohmann::json out = {{"command", report.command_line}, {"date", report.date}, {"device", report.device},
                        {"model", report.model}, {"dtype", report.dtype}, {"generated_tokens", report.generated_tokens},
                        {"repeats", report.repeats}, {"prefill_chunk", report.prefill_chunk},
                        {"rows", nlohmann::json::array()}};
  for (const auto& r : report.rows) {
    nlohmann::json row = {{"mixer", r.mixer}, {"context", r.context},
                          {"decode_tokens_per_second", r.decode_tokens_per_second},
                          {"roofline_tokens_per_second", r.roofline_tokens_per_second()},
                          {"roofline_ratio", r.roofline_ratio()}, {"weight_bytes", r.weight_bytes},
                          {"cache_bytes", r.cache_bytes}, {"accounted_cache_bytes", r.accounted_cache_bytes},
                          {"workspace_bytes", r.workspace_bytes}, {"peak_device_bytes", r.peak_device_bytes},
                          {"bytes_per_token", r.bytes_per_token}, {"bandwidth", r.bandwidth}};
    row["prefill_tokens_per_second"] = r.prefill_tokens_per_second ? nlohmann::json(*r.prefill_tokens_per_second) : nullptr;
    row["time_to_first_token_seconds"] =
        r.time_to_first_token_seconds ? nlohmann::json(*r.time_to_first_token_seconds) : nullptr;
    if (!r.ablations.empty()) {
      row["ablations"] = nlohmann::json::array();
      for (const auto& a : r.ablations) {
        if (a.launches == 0) {  // not in this mixer's step: nothing was timed
          row["ablations"].push_back({{"kernel", a.kernel}, {"launches", 0}, {"reference_step_seconds", nullptr},
                                      {"ablated_step_seconds", nullptr}, {"saved_seconds", nullptr},
                                      {"step_kernels", a.step_kernels}});
          continue;
        }
        row["ablations"].push_back({{"kernel", a.kernel}, {"launches", a.launches},
                                    {"reference_step_seconds", a.reference_seconds},
                                    {"ablated_step_seconds", a.ablated_seconds}, {"saved_seconds", a.saved_seconds()}});
      }
    }
    out["rows"].push_back(row);
  }
  return out;
}

std::string bench_svg(const BenchReport& report) {
  LinePlot throughput{.title = "Decode throughput, " + report.model, .x_label = "context (tokens)",
                      .y_label = "tokens / s", .log_x = true, .log_y = false, .width = 560, .height = 400, .series = {}};
  LinePlot memory{.title = "Cache and state memory", .x_label = "context (tokens)", .y_label = "MiB",
                  .log_x = true, .log_y = true, .width = 560, .height = 400, .series = {}};
  for (const auto& mixer : mixers_of(report)) {
    PlotSeries speed{.label = mixer, .x = {}, .y = {}}, bytes{.label = mixer, .x = {}, .y = {}};
    for (const auto& r : report.rows)
      if (r.mixer == mixer) {
        speed.x.push_back(double(r.context));
        speed.y.push_back(r.decode_tokens_per_second);
        bytes.x.push_back(double(r.context));
        bytes.y.push_back(double(r.cache_bytes) / (1024.0 * 1024.0));
      }
    throughput.series.push_back(std::move(speed));
    memory.series.push_back(std::move(bytes));
  }
  // Each plot is a complete <svg>; nested side by side in one document.
  const std::string left = render_line_plot_svg(throughput), right = render_line_plot_svg(memory);
  auto width_of = [](const std::string& svg) {
    const auto at = svg.find("width=\"");
    return at == std::string::npos ? 900.0 : std::stod(svg.substr(at + 7));
  };
  auto height_of = [](const std::string& svg) {
    const auto at = svg.find("height=\"");
    return at == std::string::npos ? 500.0 : std::stod(svg.substr(at + 8));
  };
  const double left_width = width_of(left);
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\">\n<g>{}</g>\n"
      "<g transform=\"translate({:.0f},0)\">{}</g>\n</svg>\n",
      left_width + width_of(right), std::max(height_of(left), height_of(right)), left, left_width, right);
}

}  // namespace bifocal
