// A small, dependency-free SVG line-plot writer for the eval reports (DESIGN.md components:
// "Markdown/JSON/SVG reports"): title, axis labels, ticks on linear or log axes, one polyline
// per series with point markers, and a legend beside the plot.
#pragma once

#include <string>
#include <vector>

namespace bifocal {

struct PlotSeries {
  std::string label;        // legend text
  std::vector<double> x, y;  // points; non-finite ones (and non-positive ones on a log axis) are skipped
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  bool log_y = false;
  int width = 820;   // the plot area; the legend widens the image
  int height = 480;
  std::vector<PlotSeries> series;
};

// The whole SVG document, starting with "<svg". Each series is exactly one <polyline>.
std::string render_line_plot_svg(const LinePlot& plot);

// Tick values for an axis covering [low, high] (log: low > 0), at "nice" numbers: 1, 2, 5 × 10^k
// on a linear axis; on a log axis decades, else 1-2-5 per decade, whichever first gives at least
// three ticks, else (a narrow range) the linear ticks. Exposed for tests.
std::vector<double> axis_ticks(double low, double high, bool log_scale);

}  // namespace bifocal
