// Line charts as standalone SVG text (no I/O): the simulator's curves and CDFs.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace berth {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  double y_min = 0, y_max = -1;  // y_max < y_min: fit the data
  int width = 760, height = 420;
};

std::string LineChartSvg(const std::vector<ChartSeries>& series, const ChartOptions& options);

// The same series in several panels stacked top to bottom (e.g. a zoom on a range of y), each
// with its own options, in one SVG.
std::string LineChartPanelsSvg(const std::vector<ChartSeries>& series,
                               const std::vector<ChartOptions>& panels);

}  // namespace berth
