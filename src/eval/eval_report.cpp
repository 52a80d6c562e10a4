#include "eval/eval_report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "eval/eval_analysis.h"
#include "eval/svg_plot.h"

namespace bifocal::eval {

double TaskScores::recovery(std::size_t i) const {
  const auto teacher = mixers.front().mean.find(primary_metric);
  const auto student = mixers.at(i).mean.find(primary_metric);
  if (teacher == mixers.front().mean.end() || student == mixers.at(i).mean.end() || teacher->second == 0) return NAN;
  return student->second / teacher->second;
}

std::vector<double> EvalReport::mean_recovery() const {
  std::vector<double> means;
  for (std::size_t m = 0; m < mixers.size(); ++m) {
    double sum = 0;
    int count = 0;
    for (const auto& task : tasks)
      if (const double r = task.recovery(m); std::isfinite(r)) sum += r, ++count;
    means.push_back(count ? sum / count : NAN);
  }
  return means;
}

namespace {

std::string group_value_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Group values sorted numerically when they all are numbers, else as text.
std::vector<std::string> sorted_values(const std::set<std::string>& values) {
  std::vector<std::string> sorted(values.begin(), values.end());
  auto number = [](const std::string& s) {
    try {
      std::size_t used = 0;
      const double v = std::stod(s, &used);
      return used == s.size() ? v : NAN;
    } catch (const std::exception&) {
      return double(NAN);
    }
  };
  const bool numeric = std::all_of(sorted.begin(), sorted.end(), [&](const auto& s) { return std::isfinite(number(s)); });
  if (numeric) std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) { return number(a) < number(b); });
  return sorted;
}

std::string number_cell(double value) { return std::isfinite(value) ? fmt::format("{:.3f}", value) : "—"; }

}  // namespace

EvalReport aggregate(const std::vector<ResultRecord>& records, const std::vector<std::string>& mixers,
                     const std::map<std::string, std::string>& primary_metric,
                     const std::vector<double>& answer_length_edges) {
  const auto strata = length_strata(answer_length_edges);
  auto group_text = [&](const std::string& key, const nlohmann::json& value) {
    if (key != "answer_length" || !value.is_number()) return group_value_text(value);
    for (const auto& stratum : strata)
      if (stratum.contains(value.get<double>())) return fmt::format("{}", stratum.lower);
    return group_value_text(value);
  };
  EvalReport report;
  report.mixers = mixers;
  for (const auto& [task, primary] : primary_metric) {
    TaskScores scores{.task = task, .primary_metric = primary, .mixers = {}};
    for (const auto& mixer : mixers) {
      MixerScores m{.mixer = mixer, .items = 0, .mean = {}, .by_group = {}};
      std::map<std::string, double> sums;
      for (const auto& r : records) {
        if (r.task != task || r.mixer != mixer) continue;
        ++m.items;
        for (const auto& [metric, value] : r.result.metrics) sums[metric] += value;
        const auto primary_value = r.result.metrics.find(primary);
        if (primary_value == r.result.metrics.end() || !r.result.group.is_object()) continue;
        for (const auto& [key, value] : r.result.group.items()) {
          auto& cell = m.by_group[key][group_text(key, value)];
          cell.first += primary_value->second;
          cell.second += 1;
        }
      }
      for (const auto& [metric, sum] : sums) m.mean[metric] = sum / double(m.items);
      scores.mixers.push_back(std::move(m));
    }
    report.tasks.push_back(std::move(scores));
  }
  return report;
}

std::string report_markdown(const EvalReport& report) {
  std::string md = fmt::format("# Evaluation: {}\n\n```\n{}\n```\n\n", report.model, report.command_line);
  md += fmt::format("The first mixer, `{}`, is the teacher; recovery = mixer / teacher on each task's primary "
                    "metric.\n\n",
                    report.mixers.empty() ? "" : report.mixers.front());
  md += "## Mean recovery over tasks\n\n| mixer | mean recovery |\n| --- | ---: |\n";
  const auto means = report.mean_recovery();
  for (std::size_t m = 0; m < report.mixers.size(); ++m)
    md += fmt::format("| `{}` | {} |\n", report.mixers[m], number_cell(means[m]));
  for (const auto& task : report.tasks) {
    std::set<std::string> metric_names;
    for (const auto& m : task.mixers)
      for (const auto& [name, value] : m.mean) metric_names.insert(name);
    md += fmt::format("\n## {}\n\nPrimary metric: {}.\n\n| mixer | items |", task.task, task.primary_metric);
    for (const auto& name : metric_names) md += fmt::format(" {} |", name);
    md += " recovery |\n| --- | ---: |";
    for (std::size_t i = 0; i < metric_names.size(); ++i) md += " ---: |";
    md += " ---: |\n";
    for (std::size_t i = 0; i < task.mixers.size(); ++i) {
      const auto& m = task.mixers[i];
      md += fmt::format("| `{}`{} | {} |", m.mixer, i == 0 ? " (teacher)" : "", m.items);
      for (const auto& name : metric_names) {
        const auto it = m.mean.find(name);
        md += fmt::format(" {} |", it == m.mean.end() ? "—" : number_cell(it->second));
      }
      md += fmt::format(" {} |\n", number_cell(task.recovery(i)));
    }
    // One table per group key: the primary metric by stratum.
    std::set<std::string> keys;
    for (const auto& m : task.mixers)
      for (const auto& [key, values] : m.by_group) keys.insert(key);
    for (const auto& key : keys) {
      std::set<std::string> values;
      for (const auto& m : task.mixers)
        if (auto it = m.by_group.find(key); it != m.by_group.end())
          for (const auto& [value, cell] : it->second) values.insert(value);
      const auto columns = sorted_values(values);
      md += fmt::format("\n{} by {}{}:\n\n| mixer |", task.primary_metric, key,
                        key == "answer_length" ? " (stratum, by its lower bound in tokens)" : "");
      for (const auto& c : columns) md += fmt::format(" {} |", c);
      md += "\n| --- |";
      for (std::size_t i = 0; i < columns.size(); ++i) md += " ---: |";
      md += "\n";
      for (const auto& m : task.mixers) {
        md += fmt::format("| `{}` |", m.mixer);
        const auto it = m.by_group.find(key);
        for (const auto& c : columns) {
          if (it == m.by_group.end() || !it->second.contains(c)) {
            md += " — |";
            continue;
          }
          const auto& [sum, n] = it->second.at(c);
          md += fmt::format(" {} (n={}) |", number_cell(sum / double(n)), n);
        }
        md += "\n";
      }
    }
  }
  return md;
}

nlohmann::json report_json(const EvalReport& report) {
  nlohmann::json out = {{"command", report.command_line}, {"model", report.model}, {"mixers", report.mixers},
                        {"tasks", nlohmann::json::array()}};
  const auto means = report.mean_recovery();
  out["mean_recovery"] = nlohmann::json::object();
  for (std::size_t m = 0; m < report.mixers.size(); ++m)
    out["mean_recovery"][report.mixers[m]] = std::isfinite(means[m]) ? nlohmann::json(means[m]) : nullptr;
  for (const auto& task : report.tasks) {
    nlohmann::json t = {{"task", task.task}, {"primary_metric", task.primary_metric}, {"mixers", nlohmann::json::array()}};
    for (std::size_t i = 0; i < task.mixers.size(); ++i) {
      const auto& m = task.mixers[i];
      nlohmann::json row = {{"mixer", m.mixer}, {"items", m.items}, {"mean", m.mean}};
      const double r = task.recovery(i);
      row["recovery"] = std::isfinite(r) ? nlohmann::json(r) : nullptr;
      for (const auto& [key, values] : m.by_group)
        for (const auto& [value, cell] : values)
          row["by_group"][key][value] = {{"mean", cell.first / double(cell.second)}, {"items", cell.second}};
      t["mixers"].push_back(row);
    }
    out["tasks"].push_back(t);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> report_plots(const EvalReport& report) {
  std::vector<std::pair<std::string, std::string>> plots;
  for (const auto& task : report.tasks) {
    std::set<std::string> keys;
    for (const auto& m : task.mixers)
      for (const auto& [key, values] : m.by_group) keys.insert(key);
    for (const auto& key : keys) {
      LinePlot plot{.title = fmt::format("{}: {} by {}", task.task, task.primary_metric, key), .x_label = key,
                    .y_label = task.primary_metric, .log_x = false, .log_y = false, .width = 720, .height = 420,
                    .series = {}};
      bool numeric = true;
      for (const auto& m : task.mixers) {
        PlotSeries series{.label = m.mixer, .x = {}, .y = {}};
        const auto it = m.by_group.find(key);
        if (it == m.by_group.end()) continue;
        std::vector<std::pair<double, double>> points;
        for (const auto& [value, cell] : it->second) {
          try {
            points.emplace_back(std::stod(value), cell.first / double(cell.second));
          } catch (const std::exception&) {
            numeric = false;
          }
        }
        std::sort(points.begin(), points.end());
        for (const auto& [x, y] : points) series.x.push_back(x), series.y.push_back(y);
        plot.series.push_back(std::move(series));
      }
      if (!numeric || plot.series.empty()) continue;
      std::string file = task.task + "_" + key + ".svg";
      for (char& c : file)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
      plots.emplace_back(file, render_line_plot_svg(plot));
    }
  }
  return plots;
}

}  // namespace bifocal::eval
