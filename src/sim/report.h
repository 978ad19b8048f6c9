// The replay report: one self-contained HTML page with a summary table and SVG charts
// (utilization over time, JCT CDF per policy, each queue's share against its fair share).
#pragma once

#include <string>
#include <vector>

#include "sim/replay.h"

namespace berth {

std::string ReplayReportHtml(const std::string& title, const std::vector<ReplayResult>& results);

}  // namespace berth
