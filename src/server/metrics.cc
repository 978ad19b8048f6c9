#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace berth {
namespace {

bool SnakeCase(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string EscapeHelp(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// `{a="x",b="y"}`, with `le` appended when given; "" for no labels at all.
std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string* le = nullptr) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (out.empty() ? "{" : ",") + names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  if (le) out += (out.empty() ? "{" : ",") + std::string("le=\"") + *le + "\"";
  return out.empty() ? out : out + "}";
}

const char* TypeName(MetricsRegistry::Type type) {
  switch (type) {
    case MetricsRegistry::Type::kCounter:
      return "counter";
    case MetricsRegistry::Type::kGauge:
      return "gauge";
    case MetricsRegistry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1]))
      throw std::invalid_argument("histogram bounds must be finite and ascending");
}

void Histogram::Observe(double value) {
  // The first bucket whose bound is >= value; past the last bound: the +Inf bucket.
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  ++count_;
  sum_ += value;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b < counts_.size(); ++b) total += counts_[b];
  return total;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) out.push_back(bound);
  return out;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // The shortest digits that read back exactly; plain decimals where they are short (le="0.0005",
  // not "5e-04"), an exponent for very small or large values.
  const double magnitude = std::fabs(value);
  const bool plain = magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e15);
  char text[64];
  const auto [end, ec] =
      plain ? std::to_chars(text, text + sizeof text, value, std::chars_format::fixed)
            : std::to_chars(text, text + sizeof text, value, std::chars_format::scientific);
  return ec == std::errc() ? std::string(text, end) : "NaN";
}

void MetricsRegistry::DeclareCounter(const std::string& name, const std::string& help,
                                     std::vector<std::string> labels) {
  Declare({name, help, Type::kCounter, std::move(labels), {}, {}});
}

void MetricsRegistry::DeclareGauge(const std::string& name, const std::string& help,
                                   std::vector<std::string> labels) {
  Declare({name, help, Type::kGauge, std::move(labels), {}, {}});
}

void MetricsRegistry::DeclareHistogram(const std::string& name, const std::string& help,
                                       std::vector<std::string> labels,
                                       std::vector<double> bounds) {
  Histogram{bounds};  // throws for bounds that are not finite and ascending
  Declare({name, help, Type::kHistogram, std::move(labels), std::move(bounds), {}});
}

void MetricsRegistry::Declare(Family family) {
  const std::string& name = family.name;
  const auto refuse = [&](const std::string& why) {
    throw std::invalid_argument("metric " + name + ": " + why);
  };
  if (name.rfind("berth_", 0) != 0 || !SnakeCase(name))
    refuse("a name is berth_ followed by lower case letters, digits and _");
  const bool total = EndsWith(name, "_total");
  if (family.type == Type::kCounter && !total) refuse("a counter's name ends in _total");
  if (family.type != Type::kCounter && total) refuse("only a counter's name ends in _total");
  for (const char* reserved : {"_bucket", "_count", "_sum"})
    if (EndsWith(name, reserved)) refuse(std::string("a name may not end in ") + reserved);
  for (size_t i = 0; i < family.labels.size(); ++i) {
    const std::string& label = family.labels[i];
    if (!SnakeCase(label) || label.rfind("__", 0) == 0 || label == "le")
      refuse("bad label name \"" + label + "\"");
    if (std::find(family.labels.begin(), family.labels.begin() + i, label) !=
        family.labels.begin() + i)
      refuse("label \"" + label + "\" given twice");
  }
  if (family.help.empty()) refuse("no help text");
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = by_name_.find(name); it != by_name_.end()) {
    const Family& old = *it->second;
    if (old.type != family.type || old.labels != family.labels || old.bounds != family.bounds)
      refuse("declared again differently");
    return;
  }
  families_.push_back(std::make_unique<Family>(std::move(family)));
  by_name_[families_.back()->name] = families_.back().get();
}

MetricsRegistry::Series& MetricsRegistry::Find(const std::string& name, Type type,
                                               const std::vector<std::string>& values) {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) throw std::invalid_argument("metric " + name + ": not declared");
  Family& family = *it->second;
  if (family.type != type)
    throw std::invalid_argument("metric " + name + ": it is a " + TypeName(family.type));
  if (values.size() != family.labels.size())
    throw std::invalid_argument("metric " + name + ": " + std::to_string(family.labels.size()) +
                                " label values expected, got " + std::to_string(values.size()));
  const auto series = family.series.find(values);
  if (series != family.series.end()) return series->second;
  return family.series.emplace(values, Series{0, Histogram(family.bounds)}).first->second;
}

void MetricsRegistry::Add(const std::string& name, const std::vector<std::string>& values,
                          double delta) {
  if (!(delta >= 0)) throw std::invalid_argument("metric " + name + ": a counter only grows");
  std::lock_guard<std::mutex> lock(mu_);
  Find(name, Type::kCounter, values).value += delta;
}

void MetricsRegistry::Set(const std::string& name, const std::vector<std::string>& values,
                          double value) {
  std::lock_guard<std::mutex> lock(mu_);
  Find(name, Type::kGauge, values).value = value;
}

void MetricsRegistry::Observe(const std::string& name, const std::vector<std::string>& values,
                              double value) {
  std::lock_guard<std::mutex> lock(mu_);
  Find(name, Type::kHistogram, values).histogram.Observe(value);
}

void MetricsRegistry::SetHistogram(const std::string& name, const std::vector<std::string>& values,
                                   const Histogram& histogram) {
  std::lock_guard<std::mutex> lock(mu_);
  Series& series = Find(name, Type::kHistogram, values);
  if (histogram.bounds() != series.histogram.bounds())
    throw std::invalid_argument("metric " + name + ": the histogram's bounds differ");
  series.histogram = histogram;
}

size_t MetricsRegistry::series(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? 0 : it->second->series.size();
}

std::string MetricsRegistry::Expose() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& family : families_) {
    const std::string& name = family->name;
    out += "# HELP " + name + " " + EscapeHelp(family->help) + "\n";
    out += "# TYPE " + name + " " + TypeName(family->type) + "\n";
    for (const auto& [values, series] : family->series) {
      if (family->type != Type::kHistogram) {
        out +=
            name + LabelText(family->labels, values) + " " + FormatMetricValue(series.value) + "\n";
        continue;
      }
      const Histogram& h = series.histogram;
      for (size_t i = 0; i <= h.bounds().size(); ++i) {
        const std::string le = i < h.bounds().size() ? FormatMetricValue(h.bounds()[i]) : "+Inf";
        out += name + "_bucket" + LabelText(family->labels, values, &le) + " " +
               std::to_string(h.cumulative(i)) + "\n";
      }
      out += name + "_sum" + LabelText(family->labels, values) + " " + FormatMetricValue(h.sum()) +
             "\n";
      out += name + "_count" + LabelText(family->labels, values) + " " + std::to_string(h.count()) +
             "\n";
    }
  }
  return out;
}

}  // namespace berth
