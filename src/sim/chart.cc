#include "sim/chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/markup.h"

namespace berth {
namespace {

// A palette that stays distinguishable for up to eight series.
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 100 || v == std::floor(v) ? "%.0f" : "%.2g", v);
  return buf;
}

// One chart's elements, its top edge at `y_offset`.
std::string Panel(const std::vector<ChartSeries>& series, const ChartOptions& o, int y_offset) {
  double x0 = 0, x1 = 1, y0 = o.y_min, y1 = o.y_max;
  bool first = true;
  for (const ChartSeries& s : series)
    for (const auto& [x, y] : s.points) {
      if (first) x0 = x1 = x;
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      if (o.y_max < o.y_min) {
        if (first) y0 = y1 = y;
        y0 = std::min(y0, y), y1 = std::max(y1, y);
      }
      first = false;
    }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const double left = 64, right = o.width - 170, top = 36, bottom = o.height - 48;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (right - left); };
  auto py = [&](double y) { return bottom - (y - y0) / (y1 - y0) * (bottom - top); };
  std::string svg = "<g transform=\"translate(0," + std::to_string(y_offset) + ")\">\n";
  svg += "<text x=\"" + Num(o.width / 2.0) +
         "\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">" + EscapeMarkup(o.title) +
         "</text>\n";
  for (int i = 0; i <= 5; ++i) {  // grid and tick labels
    const double yv = y0 + (y1 - y0) * i / 5, xv = x0 + (x1 - x0) * i / 5;
    svg += "<line x1=\"" + Num(left) + "\" x2=\"" + Num(right) + "\" y1=\"" + Num(py(yv)) +
           "\" y2=\"" + Num(py(yv)) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + Num(left - 6) + "\" y=\"" + Num(py(yv) + 4) + "\" text-anchor=\"end\">" +
           Label(yv) + "</text>\n";
    svg += "<text x=\"" + Num(px(xv)) + "\" y=\"" + Num(bottom + 16) +
           "\" text-anchor=\"middle\">" + Label(xv) + "</text>\n";
  }
  svg += "<rect x=\"" + Num(left) + "\" y=\"" + Num(top) + "\" width=\"" + Num(right - left) +
         "\" height=\"" + Num(bottom - top) + "\" fill=\"none\" stroke=\"#888\"/>\n";
  svg += "<text x=\"" + Num((left + right) / 2) + "\" y=\"" + Num(o.height - 12.0) +
         "\" text-anchor=\"middle\">" + EscapeMarkup(o.x_label) + "</text>\n";
  svg += "<text transform=\"translate(16," + Num((top + bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + EscapeMarkup(o.y_label) + "</text>\n";
  // Curves are clipped to the plot: a zoomed panel cuts them at its edges.
  const std::string clip = "plot-" + std::to_string(y_offset);
  svg += "<clipPath id=\"" + clip + "\"><rect x=\"" + Num(left) + "\" y=\"" + Num(top) +
         "\" width=\"" + Num(right - left) + "\" height=\"" + Num(bottom - top) +
         "\"/></clipPath>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::string path;
    for (const auto& [x, y] : series[i].points)
      path += (path.empty() ? "M" : " L") + Num(px(x)) + "," + Num(py(y));
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + color +
           "\" stroke-width=\"2\" clip-path=\"url(#" + clip + ")\"/>\n";
    const double ly = top + 8 + 18.0 * i;
    svg += "<line x1=\"" + Num(right + 14) + "\" x2=\"" + Num(right + 34) + "\" y1=\"" + Num(ly) +
           "\" y2=\"" + Num(ly) + "\" stroke=\"" + color + "\" stroke-width=\"3\"/>\n";
    svg += "<text x=\"" + Num(right + 40) + "\" y=\"" + Num(ly + 4) + "\">" +
           EscapeMarkup(series[i].name) + "</text>\n";
  }
  svg += "</g>\n";
  return svg;
}

}  // namespace

std::string LineChartSvg(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  return LineChartPanelsSvg(series, {options});
}

std::string LineChartPanelsSvg(const std::vector<ChartSeries>& series,
                               const std::vector<ChartOptions>& panels) {
  int width = 0, height = 0;
  for (const ChartOptions& o : panels) width = std::max(width, o.width), height += o.height;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  int top = 0;
  for (const ChartOptions& o : panels) {
    svg += Panel(series, o, top);
    top += o.height;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace berth
