// Prometheus metrics: a registry of counters, gauges and histograms and its exposition in the
// text format 0.0.4 (what GET /metrics serves, docs/api.md "Metrics").
//
// Contract of the exposition (what `promtool check metrics` accepts without lint warnings):
//  - Every family is written once, in declaration order: a `# HELP name text` line (text with
//    `\` and newline escaped as `\\` and `\n`), a `# TYPE name counter|gauge|histogram` line,
//    then its series sorted by label values. A family without series is its two lines alone.
//  - Label values escape `\`, `"` and newline as `\\`, `\"` and `\n`; any other byte is kept
//    as is (UTF-8 passes through).
//  - A histogram series is its `name_bucket{...,le="B"}` lines, cumulative (each counts every
//    observation <= B), ending with `le="+Inf"` (the count), then `name_sum` and `name_count`.
//  - Values: integers as integers, other values in the shortest form that reads back exactly,
//    `+Inf`, `-Inf`, `NaN`.
//  - Names: every metric name starts with `berth_` and is [a-z0-9_] (snake case); a counter's
//    ends in `_total`, nothing else does; units are spelled out as base units (`_seconds`,
//    `_gpus`). Label names are snake case, never `le` (the histograms' own) nor `__*`.
//    Declaring a family against these rules throws std::invalid_argument: a naming slip fails
//    the first test that builds the registry, not a scrape in production.
//
// Cardinality: a family holds one series per distinct tuple of label values, for as long as
// the registry lives. Callers bound the values (an API route's pattern, never the raw path;
// a status code; a known method): a client must not be able to grow the registry by asking
// for new URLs.
//
// Threading: a MetricsRegistry may be updated and exposed from any thread at once (one mutex;
// an update is a map lookup). Histogram is a plain value: its owner locks it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace berth {

// Observations counted into fixed buckets (upper bounds, ascending), with their sum.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds = {});
  void Observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i]; i == bounds().size(): every observation (the +Inf bucket).
  uint64_t cumulative(size_t i) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [i]: observations in (bounds[i-1], bounds[i]]
  uint64_t count_ = 0;
  double sum_ = 0;
};

// `count` bounds from `start`, each `factor` times the one before (Prometheus' exponential
// buckets).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// The label value escaped for the text format (`\\`, `\"`, `\n`).
std::string EscapeLabelValue(const std::string& value);
// A sample value as the text format writes it.
std::string FormatMetricValue(double value);

class MetricsRegistry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Declares a family with its label names (fixed for every series of it). Declaring the same
  // name again with the same type and labels is a no-op; anything else throws
  // std::invalid_argument, as do names against the header's rules.
  void DeclareCounter(const std::string& name, const std::string& help,
                      std::vector<std::string> labels = {});
  void DeclareGauge(const std::string& name, const std::string& help,
                    std::vector<std::string> labels = {});
  void DeclareHistogram(const std::string& name, const std::string& help,
                        std::vector<std::string> labels, std::vector<double> bounds);

  // Updates the series of `name` with these label values (one per declared label, in order).
  // Throws std::invalid_argument for an undeclared name, the wrong type or label count, or a
  // negative counter increment.
  void Add(const std::string& name, const std::vector<std::string>& values, double delta = 1);
  void Set(const std::string& name, const std::vector<std::string>& values, double value);
  void Observe(const std::string& name, const std::vector<std::string>& values, double value);
  // Replaces a histogram series by one counted elsewhere (its bounds must be the family's).
  void SetHistogram(const std::string& name, const std::vector<std::string>& values,
                    const Histogram& histogram);

  // The exposition of every family, in declaration order.
  std::string Expose() const;
  // Series of the family so far (cardinality checks, tests).
  size_t series(const std::string& name) const;

 private:
  struct Series {
    double value = 0;
    Histogram histogram;
  };
  struct Family {
    std::string name, help;
    Type type = Type::kGauge;
    std::vector<std::string> labels;
    std::vector<double> bounds;
    std::map<std::vector<std::string>, Series> series;
  };

  void Declare(Family family);
  Series& Find(const std::string& name, Type type, const std::vector<std::string>& values);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;  // declaration order
  std::map<std::string, Family*> by_name_;
};

}  // namespace berth
