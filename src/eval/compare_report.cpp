#include "eval/compare_report.h"

#include <cmath>

#include <fmt/format.h>

#include "bifocal/mixer_spec.h"

namespace bifocal {

namespace {

std::string perplexity_text(double value) {
  if (!std::isfinite(value)) return "—";
  return value >= 1000 ? fmt::format("{:.0f}", value) : fmt::format("{:.2f}", value);
}

std::string token_equivalents_text(double value) {
  return value == std::floor(value) ? fmt::format("{:.0f}", value) : fmt::format("{:.2f}", value);
}

// The row of the mixer `full`, if it was compared: the reference of the last column.
const MixerComparison* full_attention(const CompareReport& report) {
  for (const auto& m : report.mixers)
    if (MixerSpec::parse(m.mixer).kind == MixerSpec::Kind::Full) return &m;
  return nullptr;
}

double last_bucket_ratio(const MixerComparison& m, const MixerComparison& full) {
  return m.perplexity.buckets.back().perplexity() / full.perplexity.buckets.back().perplexity();
}

nlohmann::json number_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(); }

}  // namespace

std::string perplexity_table_markdown(const CompareReport& report) {
  const MixerComparison* full = full_attention(report);
  std::string header = "| mixer | state | tokens/layer (bf16) |", rule = "| --- | ---: | ---: |";
  for (std::size_t b = 0; b + 1 < report.bucket_edges.size(); ++b) {
    header += fmt::format(" ppl {}–{} |", report.bucket_edges[b], report.bucket_edges[b + 1]);
    rule += " ---: |";
  }
  header += " ppl overall |";
  rule += " ---: |";
  if (full != nullptr) {
    header += " ÷ full (last bucket) |";
    rule += " ---: |";
  }
  std::string table = header + "\n" + rule + "\n";
  for (const auto& m : report.mixers) {
    std::string row = fmt::format("| `{}` | {} | {} |", m.mixer, human_bytes(double(m.perplexity.cache_bytes)),
                                  token_equivalents_text(m.token_equivalents_per_layer));
    for (const auto& bucket : m.perplexity.buckets) row += " " + perplexity_text(bucket.perplexity()) + " |";
    row += " " + perplexity_text(m.perplexity.perplexity()) + " |";
    if (full != nullptr) {
      const double ratio = last_bucket_ratio(m, *full);
      row += std::isfinite(ratio) ? fmt::format(" {:.3f} |", ratio) : " — |";
    }
    table += row + "\n";
  }
  return table;
}

std::string attention_table_markdown(const AttentionSinkStats& stats) {
  std::string table = fmt::format(
      "| layer | mass on first {} | uniform mass | ratio | strongest head | its mass |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n",
      stats.first_tokens == 1 ? std::string("token") : fmt::format("{} tokens", stats.first_tokens));
  for (const auto& layer : stats.layers)
    table += fmt::format("| {} | {:.4f} | {:.4f} | {:.2f} | {} | {:.4f} |\n", layer.layer, layer.mass, layer.uniform,
                         layer.ratio(), layer.strongest_head, layer.strongest_head_mass);
  return table;
}

std::string position_sink_table_markdown(const AttentionSinkStats& stats) {
  if (stats.by_position.empty()) return {};
  std::string header = "| layer |", rule = "| ---: |";
  for (const auto& range : stats.by_position) {
    header += fmt::format(" {}–{} |", range.begin, range.end);
    rule += " ---: |";
  }
  std::string table = header + "\n" + rule + "\n";
  auto cell = [](const PositionSinkMass& range, double value) {
    return range.queries ? fmt::format(" {:.4f} |", value) : std::string(" — |");
  };
  for (std::size_t l = 0; l < stats.layers.size(); ++l) {
    table += fmt::format("| {} |", l);
    for (const auto& range : stats.by_position) table += cell(range, range.mass_per_layer[l]);
    table += "\n";
  }
  table += "| uniform |";
  for (const auto& range : stats.by_position) table += cell(range, range.uniform);
  return table + "\n";
}

std::string compare_markdown(const CompareReport& report) {
  std::string md = "# Perplexity by token position\n\n";
  md += fmt::format("```\n{}\n```\n\n", report.command_line);
  md += fmt::format("Model `{}`; {} windows of up to {} tokens{}; {} text tokens dropped at the ends of texts (a last window shorter than the last bucket edge). Each window is "
                    "scored from a fresh session; a bucket [a, b) holds the targets at positions a … b−1. State is the "
                    "session's cache at the end of a window (fp32 on the CPU); token equivalents per layer count BF16 "
                    "KV tokens (DESIGN.md \"Memory accounting\").\n\n",
                    report.model, report.windows, report.context,
                    report.bos ? fmt::format(", each starting with BOS id {}", *report.bos) : std::string(),
                    report.dropped_tokens);
  md += perplexity_table_markdown(report);
  if (report.attention) {
    md += fmt::format("\n## Attention on the first tokens ({})\n\nQueries at positions ≥ {}, averaged over heads; uniform "
                      "= the mass a uniform distribution over the visible keys would give them.\n\n",
                      report.attention_mixer, report.attention->min_query_position);
    md += attention_table_markdown(*report.attention);
    if (!report.attention->by_position.empty())
      md += "\n### By query position\n\nThe mass on the first tokens of the queries in each position bucket (every "
            "query, averaged over heads): a sink that holds at every distance keeps its mass far above the "
            "uniform row in the late buckets, one that lives near the start does not.\n\n" +
            position_sink_table_markdown(*report.attention);
  }
  return md;
}

nlohmann::json compare_json(const CompareReport& report) {
  const MixerComparison* full = full_attention(report);
  nlohmann::json out = {{"command", report.command_line}, {"model", report.model}, {"texts", report.texts},
                        {"context", report.context}, {"bucket_edges", report.bucket_edges},
                        {"bos", report.bos ? nlohmann::json(*report.bos) : nlohmann::json()},
                        {"windows", report.windows}, {"dropped_tokens", report.dropped_tokens},
                        {"mixers", nlohmann::json::array()}};
  for (const auto& m : report.mixers) {
    const auto& p = m.perplexity;
    nlohmann::json row = {{"mixer", m.mixer}, {"state_bytes", p.cache_bytes},
                          {"accounted_state_bytes", m.accounted_state_bytes},
                          {"token_equivalents_per_layer", m.token_equivalents_per_layer},
                          {"windows", p.windows}, {"seconds", p.seconds},
                          {"nll_sum", p.nll_sum}, {"tokens", p.tokens}, {"perplexity", number_or_null(p.perplexity())},
                          {"buckets", nlohmann::json::array()}};
    for (const auto& b : p.buckets)
      row["buckets"].push_back({{"begin", b.begin}, {"end", b.end}, {"nll_sum", b.nll_sum}, {"tokens", b.tokens},
                                {"perplexity", number_or_null(b.perplexity())}});
    if (full != nullptr) row["ratio_to_full_last_bucket"] = number_or_null(last_bucket_ratio(m, *full));
    out["mixers"].push_back(row);
  }
  if (report.attention) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : report.attention->layers)
      layers.push_back({{"layer", l.layer}, {"mass", l.mass}, {"uniform", l.uniform}, {"ratio", l.ratio()},
                        {"strongest_head", l.strongest_head}, {"strongest_head_mass", l.strongest_head_mass},
                        {"queries", l.queries}});
    nlohmann::json by_position = nlohmann::json::array();
    for (const auto& range : report.attention->by_position)
      by_position.push_back({{"begin", range.begin}, {"end", range.end}, {"queries", range.queries},
                             {"uniform", range.queries ? nlohmann::json(range.uniform) : nlohmann::json()},
                             {"mass_per_layer", range.queries ? nlohmann::json(range.mass_per_layer) : nlohmann::json()}});
    out["attention_stats"] = {{"attention", report.attention_mixer}, {"first_tokens", report.attention->first_tokens},
                              {"min_query_position", report.attention->min_query_position}, {"layers", layers},
                              {"by_position", by_position}};
  }
  return out;
}

LinePlot compare_plot(const CompareReport& report) {
  LinePlot plot{.title = "Perplexity by token position",
                .x_label = "token position (bucket centre)",
                .y_label = "perplexity",
                .log_x = false,
                .log_y = true,
                .series = {}};
  for (const auto& m : report.mixers) {
    PlotSeries series{.label = m.mixer + " — " + human_bytes(double(m.perplexity.cache_bytes)), .x = {}, .y = {}};
    for (const auto& bucket : m.perplexity.buckets) {
      series.x.push_back(0.5 * (bucket.begin + bucket.end));
      series.y.push_back(bucket.perplexity());
    }
    plot.series.push_back(std::move(series));
  }
  if (report.bucket_edges.size() >= 3) {
    const double first_centre = 0.5 * (report.bucket_edges[0] + report.bucket_edges[1]);
    const double last_centre = 0.5 * (report.bucket_edges[report.bucket_edges.size() - 2] + report.bucket_edges.back());
    plot.log_x = first_centre > 0 && last_centre / first_centre > 16;
  }
  return plot;
}

}  // namespace bifocal
