#include "eval/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace bifocal {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kMarginLeft = 80, kMarginRight = 24, kMarginTop = 48, kMarginBottom = 64;
constexpr int kLegendRow = 22, kCharWidth = 7;  // approximate width of one 12 px sans-serif character

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string tick_label(double value) {
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e6 || magnitude < 1e-3) return fmt::format("{:.3g}", value);
  return fmt::format("{:.6g}", value);
}

bool usable(double value, bool log_scale) { return std::isfinite(value) && (!log_scale || value > 0); }

// One axis: the data range widened to something readable, and the map to pixels.
struct Axis {
  double low = 0, high = 1;
  bool log_scale = false;

  static Axis fit(double data_low, double data_high, bool log_scale) {
    Axis axis{.low = data_low, .high = data_high, .log_scale = log_scale};
    if (!(data_low <= data_high)) {  // no data at all
      axis.low = log_scale ? 1 : 0;
      axis.high = 10;
      return axis;
    }
    if (log_scale) {
      // A little room above and below, at least a factor of 2 in all.
      axis.low = data_low / 1.15;
      axis.high = data_high * 1.15;
      if (axis.high / axis.low < 2) {
        const double middle = std::sqrt(data_low * data_high);
        axis.low = middle / std::sqrt(2.0);
        axis.high = middle * std::sqrt(2.0);
      }
      return axis;
    }
    if (data_low == data_high) {
      const double pad = data_low == 0 ? 1 : std::fabs(data_low) * 0.1;
      axis.low = data_low - pad;
      axis.high = data_high + pad;
    }
    const auto ticks = axis_ticks(axis.low, axis.high, false);
    const double step = ticks.size() >= 2 ? ticks[1] - ticks[0] : 1;
    axis.low = std::floor(axis.low / step) * step;
    axis.high = std::ceil(axis.high / step) * step;
    return axis;
  }
  // Fraction of the way from low to high.
  double fraction(double value) const {
    if (log_scale) return (std::log(value) - std::log(low)) / (std::log(high) - std::log(low));
    return (value - low) / (high - low);
  }
};

}  // namespace

std::vector<double> axis_ticks(double low, double high, bool log_scale) {
  std::vector<double> ticks;
  if (!(low < high) || (log_scale && low <= 0)) return ticks;
  if (log_scale) {
    const int first = int(std::floor(std::log10(low))), last = int(std::ceil(std::log10(high)));
    for (const std::vector<int>& mantissas : {std::vector<int>{1}, {1, 2, 5}}) {
      ticks.clear();
      for (int exponent = first; exponent <= last; ++exponent)
        for (const int m : mantissas) {
          const double value = m * std::pow(10.0, exponent);
          if (value >= low * (1 - 1e-9) && value <= high * (1 + 1e-9)) ticks.push_back(value);
        }
      if (ticks.size() >= 3) return ticks;
    }
    // Less than a decade or so: evenly spaced nice numbers read better than a lopsided 1-2-5
    // set; they are placed on the log axis all the same.
    return axis_ticks(low, high, false);
  }
  const double rough = (high - low) / 6;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  double step = power;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= rough) {
      step = m * power;
      break;
    }
  for (double value = std::ceil(low / step - 1e-9) * step; value <= high + step * 1e-9; value += step)
    ticks.push_back(std::fabs(value) < step * 1e-9 ? 0.0 : value);
  return ticks;
}

std::string render_line_plot_svg(const LinePlot& plot) {
  double x_low = std::numeric_limits<double>::infinity(), x_high = -x_low, y_low = x_low, y_high = -x_low;
  for (const auto& series : plot.series)
    for (std::size_t i = 0; i < std::min(series.x.size(), series.y.size()); ++i) {
      if (!usable(series.x[i], plot.log_x) || !usable(series.y[i], plot.log_y)) continue;
      x_low = std::min(x_low, series.x[i]);
      x_high = std::max(x_high, series.x[i]);
      y_low = std::min(y_low, series.y[i]);
      y_high = std::max(y_high, series.y[i]);
    }
  const Axis x_axis = Axis::fit(x_low, x_high, plot.log_x), y_axis = Axis::fit(y_low, y_high, plot.log_y);

  std::size_t longest_label = 0;
  for (const auto& series : plot.series) longest_label = std::max(longest_label, series.label.size());
  const int legend_width = plot.series.empty() ? 0 : 48 + int(longest_label) * kCharWidth;
  const int width = plot.width + legend_width, height = plot.height;
  const double left = kMarginLeft, top = kMarginTop;
  const double right = plot.width - kMarginRight, bottom = plot.height - kMarginBottom;
  auto px = [&](double x) { return left + x_axis.fraction(x) * (right - left); };
  auto py = [&](double y) { return bottom - y_axis.fraction(y) * (bottom - top); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      width, height);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                     (left + right) / 2, escape(plot.title));

  // Grid lines and tick labels.
  for (const double tick : axis_ticks(x_axis.low, x_axis.high, plot.log_x)) {
    const double x = px(tick);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e4e4e4\"/>\n", x, top, bottom);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/>\n", x, bottom, bottom + 5);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, bottom + 19, tick_label(tick));
  }
  for (const double tick : axis_ticks(y_axis.low, y_axis.high, plot.log_y)) {
    const double y = py(tick);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>\n", left, y, right);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n", left - 5, y, left);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8, y + 4, tick_label(tick));
  }
  svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"black\"/>\n",
                     left, top, right - left, bottom - top);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", (left + right) / 2,
                     double(height) - 18, escape(plot.x_label + (plot.log_x ? " (log scale)" : "")));
  svg += fmt::format("<text x=\"0\" y=\"0\" text-anchor=\"middle\" transform=\"translate(22 {:.1f}) rotate(-90)\">{}</text>\n",
                     (top + bottom) / 2, escape(plot.y_label + (plot.log_y ? " (log scale)" : "")));

  // Series, then the legend beside the plot area.
  for (std::size_t s = 0; s < plot.series.size(); ++s) {
    const auto& series = plot.series[s];
    const char* colour = kPalette[s % std::size(kPalette)];
    std::string points, markers;
    for (std::size_t i = 0; i < std::min(series.x.size(), series.y.size()); ++i) {
      if (!usable(series.x[i], plot.log_x) || !usable(series.y[i], plot.log_y)) continue;
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", px(series.x[i]), py(series.y[i]));
      markers += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(series.x[i]), py(series.y[i]), colour);
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, points);
    svg += markers;
    const double row = top + 8 + double(s) * kLegendRow;
    const double legend_left = plot.width + 4;
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       legend_left, row, legend_left + 28, row, colour);
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", legend_left + 14, row, colour);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", legend_left + 36, row + 4, escape(series.label));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace bifocal
