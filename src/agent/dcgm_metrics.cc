#include "agent/dcgm_metrics.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "agent/agent_text.h"
#include "config/config_error.h"

namespace berth {
namespace {

using agent_text::At;
using agent_text::ToInt;

struct Field {
  std::string_view metric;
  double DcgmGpuMetrics::*value;
};

constexpr Field kFields[] = {
    {"DCGM_FI_DEV_FB_USED", &DcgmGpuMetrics::fb_used_mib},
    {"DCGM_FI_DEV_FB_FREE", &DcgmGpuMetrics::fb_free_mib},
    {"DCGM_FI_DEV_GPU_UTIL", &DcgmGpuMetrics::gpu_util_percent},
    {"DCGM_FI_PROF_SM_ACTIVE", &DcgmGpuMetrics::sm_active},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", &DcgmGpuMetrics::nvlink_bandwidth_total},
    {"DCGM_FI_PROF_PCIE_TX_BYTES", &DcgmGpuMetrics::pcie_tx_bytes},
    {"DCGM_FI_PROF_PCIE_RX_BYTES", &DcgmGpuMetrics::pcie_rx_bytes},
    {"DCGM_FI_DEV_POWER_USAGE", &DcgmGpuMetrics::power_watts},
    {"DCGM_FI_DEV_GPU_TEMP", &DcgmGpuMetrics::temperature_c},
    {"DCGM_FI_DEV_XID_ERRORS", &DcgmGpuMetrics::xid_errors},
};

bool NameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool NameChar(char c) { return NameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// One sample line, split: the exposition grammar, or a message saying where it breaks.
struct Sample {
  std::string_view metric;
  std::map<std::string, std::string, std::less<>> labels;
  double value = 0;
};

std::string ParseSample(std::string_view line, Sample* sample) {
  size_t i = 0;
  while (i < line.size() && (NameChar(line[i]) || line[i] == ':')) ++i;
  if (i == 0 || !(NameStart(line[0]) || line[0] == ':'))
    return "expected a metric name, got " + Quoted(line);
  sample->metric = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == '}') break;
      const size_t name_start = i;
      while (i < line.size() && NameChar(line[i])) ++i;
      if (i == name_start || !NameStart(line[name_start]))
        return "expected a label name at byte " + std::to_string(i + 1);
      const std::string name(line.substr(name_start, i - name_start));
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
        return "expected =\" after label " + Quoted(name);
      i += 2;
      std::string value;
      while (true) {
        if (i >= line.size()) return "label " + Quoted(name) + ": the value has no closing quote";
        const char c = line[i++];
        if (c == '"') break;
        if (c != '\\') {
          value += c;
          continue;
        }
        if (i >= line.size()) return "label " + Quoted(name) + ": a lone backslash at the end";
        const char e = line[i++];
        if (e == 'n')
          value += '\n';
        else if (e == '\\' || e == '"')
          value += e;
        else
          return "label " + Quoted(name) + ": unknown escape \\" + std::string(1, e);
      }
      if (!sample->labels.emplace(name, std::move(value)).second)
        return "label " + Quoted(name) + " given twice";
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') break;
      return "expected , or } after label " + Quoted(name);
    }
    ++i;  // the '}'
  }
  const std::vector<std::string_view> rest =
      agent_text::Split(agent_text::Trim(line.substr(i)), ' ');
  std::vector<std::string_view> words;
  for (std::string_view w : rest)
    if (!w.empty()) words.push_back(w);
  if (words.empty() || words.size() > 2) return "expected a value and an optional timestamp";
  // Go's ParseFloat spellings: NaN, +Inf, -Inf, and decimal or exponent numbers.
  const std::string value(words[0]);
  if (value == "NaN") {
    sample->value = std::nan("");
  } else if (value == "+Inf" || value == "-Inf") {
    sample->value = value[0] == '+' ? HUGE_VAL : -HUGE_VAL;
  } else {
    char* end = nullptr;
    sample->value = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(sample->value) ||
        std::isalpha(static_cast<unsigned char>(value.back())))
      return "value " + Quoted(value) + " is not a number";
  }
  if (words.size() == 2 && !ToInt(words[1], INT64_MIN, INT64_MAX))
    return "timestamp " + Quoted(words[1]) + " is not an integer of milliseconds";
  return "";
}

}  // namespace

DcgmScrape ParseDcgmMetrics(std::string_view text, const std::string& source) {
  DcgmScrape scrape;
  std::map<std::pair<int, int>, DcgmGpuMetrics> records;
  const std::vector<std::string_view> lines =
      agent_text::SplitLines(text, source, kMaxDcgmBytes, kMaxDcgmLines, kMaxDcgmLineBytes);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = agent_text::Trim(lines[n]);
    if (line.empty() || line[0] == '#') continue;  // HELP, TYPE, comments, OpenMetrics' EOF
    Sample sample;
    const std::string error = ParseSample(line, &sample);
    if (!error.empty())
      throw ConfigError(At(source, n + 1) + error + "; is this a DCGM exporter's /metrics page?");
    const auto field = std::find_if(std::begin(kFields), std::end(kFields),
                                    [&](const Field& f) { return f.metric == sample.metric; });
    const auto gpu_label = sample.labels.find("gpu");
    if (field == std::end(kFields) || gpu_label == sample.labels.end()) {
      ++scrape.skipped_samples;
      continue;
    }
    const std::optional<int64_t> gpu = ToInt(gpu_label->second, 0, 63);
    if (!gpu)
      throw ConfigError(At(source, n + 1) + "label gpu: expected a GPU index from 0 to 63, got " +
                        Quoted(gpu_label->second));
    int instance = -1;
    if (const auto i = sample.labels.find("GPU_I_ID"); i != sample.labels.end()) {
      const std::optional<int64_t> id = ToInt(i->second, 0, 63);
      if (!id)
        throw ConfigError(At(source, n + 1) + "label GPU_I_ID: expected a GPU instance id, got " +
                          Quoted(i->second));
      instance = static_cast<int>(*id);
    }
    const std::pair key(static_cast<int>(*gpu), instance);
    auto it = records.find(key);
    if (it == records.end()) {
      if (records.size() == kMaxDcgmSeries)
        throw ConfigError(At(source, n + 1) + "more than " + std::to_string(kMaxDcgmSeries) +
                          " GPUs and MIG instances; is this one node's exporter?");
      it = records.emplace(key, DcgmGpuMetrics{}).first;
      DcgmGpuMetrics& r = it->second;
      r.gpu = key.first;
      r.mig_instance = instance;
      const auto label = [&](const char* name) {
        const auto l = sample.labels.find(name);
        return l == sample.labels.end() ? std::string() : l->second;
      };
      r.mig_profile = label("GPU_I_PROFILE");
      r.uuid = label("UUID");
      r.device = label("device");
      r.model_name = label("modelName");
      r.hostname = label("Hostname");
    }
    // NaN and infinities say nothing about the GPU: the field stays unknown.
    if (std::isfinite(sample.value)) it->second.*(field->value) = sample.value;
  }
  for (auto& [key, record] : records) scrape.gpus.push_back(std::move(record));
  return scrape;
}

const DcgmGpuMetrics* DcgmScrape::Find(int gpu, int mig_instance) const {
  for (const DcgmGpuMetrics& m : gpus)
    if (m.gpu == gpu && m.mig_instance == mig_instance) return &m;
  return nullptr;
}

const DcgmGpuMetrics* DcgmScrape::FindByUuid(std::string_view uuid) const {
  for (const DcgmGpuMetrics& m : gpus)
    if (m.uuid == uuid && m.mig_instance < 0) return &m;
  return nullptr;
}

GpuTelemetry ToTelemetry(const DcgmGpuMetrics& metrics) {
  GpuTelemetry t;
  t.fb_used_mib = metrics.fb_used_mib;
  t.util_percent = metrics.gpu_util_percent;
  return t;
}

GpuReport ToGpuReport(int gpu, const DcgmGpuMetrics& m) {
  const auto within = [](double value, double max) {
    return value >= 0 && value <= max ? value : -1;
  };
  GpuReport r;
  r.gpu = gpu;
  r.fb_used_mib = within(m.fb_used_mib, kMaxReportMiB);
  r.fb_free_mib = within(m.fb_free_mib, kMaxReportMiB);
  r.util_percent = within(m.gpu_util_percent, 100);
  r.sm_active = within(m.sm_active, 1);
  r.xid = within(m.xid_errors, kMaxReportXid);
  r.nvlink_total = within(m.nvlink_bandwidth_total, kMaxReportCounter);
  r.pcie_tx_bytes = within(m.pcie_tx_bytes, kMaxReportCounter);
  r.pcie_rx_bytes = within(m.pcie_rx_bytes, kMaxReportCounter);
  return r;
}

}  // namespace berth
