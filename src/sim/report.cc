#include "sim/report.h"

#include <algorithm>
#include <cstdio>

#include "sim/chart.h"
#include "sim/markup.h"

namespace berth {
namespace {

std::string Fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Hours(double s) { return Fixed(s / 3600.0, 2); }

}  // namespace

std::string ReplayReportHtml(const std::string& title, const std::vector<ReplayResult>& results) {
  // Names come from the input files; charts escape their own text.
  const std::string heading = EscapeMarkup(title);
  std::string html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>" + heading +
                     "</title><style>body{font-family:sans-serif;margin:24px}table{border-collapse:"
                     "collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
                     "th{background:#f4f4f4}</style></head><body>\n<h1>" +
                     heading + "</h1>\n";
  html +=
      "<h2>Summary</h2>\n<table><tr><th>policy</th><th>jobs</th><th>mean JCT (h)</th>"
      "<th>p50</th><th>p95</th><th>p99</th><th>mean wait (h)</th><th>p99 wait</th>"
      "<th>makespan (h)</th><th>utilization %</th><th>preemptions</th>"
      "<th>sharing anomaly jobs</th><th>never fit</th></tr>\n";
  for (const ReplayResult& r : results)
    html += "<tr><td>" + EscapeMarkup(r.policy) + "</td><td>" + std::to_string(r.jobs.size()) +
            "</td><td>" + Hours(r.jct.mean) + "</td><td>" + Hours(r.jct.p50) + "</td><td>" +
            Hours(r.jct.p95) + "</td><td>" + Hours(r.jct.p99) + "</td><td>" + Hours(r.wait.mean) +
            "</td><td>" + Hours(r.wait.p99) + "</td><td>" + Hours(r.makespan) + "</td><td>" +
            Fixed(r.mean_utilization) + "</td><td>" + std::to_string(r.preemptions) + "</td><td>" +
            std::to_string(r.anomalies) + "</td><td>" + std::to_string(r.unfinished) +
            "</td></tr>\n";
  html += "</table>\n";

  std::vector<ChartSeries> util, frag, cdf;
  for (const ReplayResult& r : results) {
    ChartSeries u{r.policy, {}}, f{r.policy, {}}, c{r.policy, {}};
    for (const TimelinePoint& p : r.timeline) {
      u.points.push_back({p.time / 3600.0, p.utilization});
      f.points.push_back({p.time / 3600.0, p.fragmentation});
    }
    std::vector<double> jct;
    for (const JobOutcome& o : r.jobs)
      if (o.end >= 0) jct.push_back((o.end - o.submit) / 3600.0);
    std::sort(jct.begin(), jct.end());
    const size_t step = std::max<size_t>(1, jct.size() / 300);
    for (size_t i = 0; i < jct.size(); i += step)
      c.points.push_back({jct[i], 100.0 * (i + 1) / jct.size()});
    if (!jct.empty()) c.points.push_back({jct.back(), 100});
    util.push_back(std::move(u));
    frag.push_back(std::move(f));
    cdf.push_back(std::move(c));
  }
  ChartOptions o;
  o.title = "GPU utilization";
  o.x_label = "time (h)";
  o.y_label = "GPUs in use (%)";
  o.y_max = 100;
  html += "<h2>Utilization</h2>\n" + LineChartSvg(util, o);
  o.title = "Fragmentation (FGD)";
  o.y_label = "fragmented GPUs (%)";
  o.y_max = -1;
  html += "<h2>Fragmentation</h2>\n" + LineChartSvg(frag, o);
  o.title = "Job completion time CDF";
  o.x_label = "JCT (h)";
  o.y_label = "jobs (%)";
  o.y_max = 100;
  html += "<h2>Job completion time</h2>\n" + LineChartSvg(cdf, o);

  for (const ReplayResult& r : results) {
    html += "<h2>Queues under " + EscapeMarkup(r.policy) +
            "</h2>\n<table><tr><th>queue</th><th>mean JCT (h)"
            "</th><th>p99 JCT</th><th>mean wait (h)</th><th>p99 wait</th></tr>\n";
    for (const auto& [q, d] : r.per_queue)
      html += "<tr><td>" + EscapeMarkup(q) + "</td><td>" + Hours(d.first.mean) + "</td><td>" +
              Hours(d.first.p99) + "</td><td>" + Hours(d.second.mean) + "</td><td>" +
              Hours(d.second.p99) + "</td></tr>\n";
    html += "</table>\n";
    std::vector<ChartSeries> shares;
    for (size_t q = 0; q < r.queues.size() && q < 4; ++q) {
      ChartSeries use{r.queues[q] + " usage", {}}, fair{r.queues[q] + " fair share", {}};
      const std::vector<QueuePoint>& series = r.queue_timeline[q];
      const size_t step = std::max<size_t>(1, series.size() / 400);  // a readable chart
      for (size_t i = 0; i < series.size(); i += step) {
        use.points.push_back({series[i].time / 3600.0, series[i].usage_gpus});
        fair.points.push_back({series[i].time / 3600.0, series[i].fair_share_gpus});
      }
      shares.push_back(std::move(use));
      shares.push_back(std::move(fair));
    }
    ChartOptions so;
    so.title = "Queue usage against fair share (" + r.policy + ", first 4 queues)";
    so.x_label = "time (h)";
    so.y_label = "GPUs";
    html += LineChartSvg(shares, so);
  }
  html += "</body></html>\n";
  return html;
}

}  // namespace berth
