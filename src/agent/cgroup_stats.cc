#include "agent/cgroup_stats.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "agent/agent_text.h"
#include "config/config_error.h"

namespace berth {
namespace {

using agent_text::At;
using agent_text::ReadSmallFile;
using agent_text::Split;
using agent_text::ToInt;
using agent_text::Trim;

constexpr int64_t kMax = INT64_MAX;
// v1 writes "no limit" as the largest page-aligned int64 (9223372036854771712).
constexpr int64_t kV1Unlimited = int64_t{1} << 62;

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// The non-empty words of `line`, split at spaces.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  for (std::string_view w : Split(Trim(line), ' '))
    if (!w.empty()) words.push_back(w);
  return words;
}

int64_t Number(std::string_view word, const std::string& at) {
  const std::optional<int64_t> v = ToInt(word, 0, kMax);
  if (!v) throw ConfigError(at + "expected a non-negative integer, got " + Quoted(word));
  return *v;
}

// A file holding one integer (or "max", or -1 in v1's cpu.cfs_quota_us): nullopt when absent.
std::optional<std::string> One(const std::string& path) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (text) *text = std::string(Trim(*text));
  return text;
}

int64_t OneNumber(const std::string& path) {
  const std::optional<std::string> text = One(path);
  return text ? Number(*text, At(path, 1)) : -1;
}

// The value of `key` in a flat keyed file ("key value" lines), -1 when absent.
int64_t Keyed(const std::optional<std::string>& text, std::string_view key,
              const std::string& path) {
  if (!text) return -1;
  const std::vector<std::string_view> lines = Split(*text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::vector<std::string_view> w = Words(lines[n]);
    if (w.size() == 2 && w[0] == key) return Number(w[1], At(path, n + 1));
  }
  return -1;
}

// The sum over devices of `op`'s column in a v1 blkio file ("8:0 Read 4096" lines, and a
// "Total N" line that is not a device's); -1 when absent.
int64_t BlkioSum(const std::string& path, std::string_view op) {
  const std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return -1;
  // A file with no device's line ("Total 0": nothing read or written yet) measured 0.
  int64_t sum = 0;
  const std::vector<std::string_view> lines = Split(*text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::vector<std::string_view> w = Words(lines[n]);
    if (w.size() != 3 || w[1] != op) continue;
    const int64_t v = Number(w[2], At(path, n + 1));
    if (__builtin_add_overflow(sum, v, &sum)) sum = kMax;
  }
  return sum;
}

// "some avg10=1.23 avg60=... total=..." of a PSI file; -1 when absent.
double PressureAvg10(const std::string& path) {
  const std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return -1;
  const std::vector<std::string_view> lines = Split(*text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::vector<std::string_view> w = Words(lines[n]);
    if (w.size() < 2 || w[0] != "some") continue;
    if (w[1].substr(0, 6) != "avg10=")
      throw ConfigError(At(path, n + 1) + "expected \"some avg10=...\", got " + Quoted(lines[n]));
    const std::string value(w[1].substr(6));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v >= 0 && v <= 100))
      throw ConfigError(At(path, n + 1) + "avg10 " + Quoted(value) +
                        " is not a percentage from 0 to 100");
    return v;
  }
  return -1;
}

void ReadV1(const ContainerCgroup& c, CgroupSample* s) {
  const auto dir = [&](const char* controller) {
    std::string d = c.root + "/" + controller + "/" + c.path;
    if (!Exists(d)) d = c.root + "/cpu,cpuacct/" + c.path;  // mounted together
    return d;
  };
  const std::string cpuacct = dir("cpuacct"), cpu = dir("cpu");
  const std::string memory = c.root + "/memory/" + c.path, blkio = c.root + "/blkio/" + c.path;
  if (const int64_t ns = OneNumber(cpuacct + "/cpuacct.usage"); ns >= 0)
    s->cpu_usage_usec = ns / 1000;
  const std::optional<std::string> stat = ReadSmallFile(cpu + "/cpu.stat");
  s->cpu_nr_throttled = Keyed(stat, "nr_throttled", cpu + "/cpu.stat");
  if (const int64_t ns = Keyed(stat, "throttled_time", cpu + "/cpu.stat"); ns >= 0)
    s->cpu_throttled_usec = ns / 1000;
  const std::optional<std::string> quota = One(cpu + "/cpu.cfs_quota_us");
  if (quota && *quota != "-1") {
    const int64_t q = Number(*quota, At(cpu + "/cpu.cfs_quota_us", 1));
    const int64_t period = OneNumber(cpu + "/cpu.cfs_period_us");
    if (period > 0) s->cpu_quota = static_cast<double>(q) / static_cast<double>(period);
  }
  s->memory_bytes = OneNumber(memory + "/memory.usage_in_bytes");
  const int64_t limit = OneNumber(memory + "/memory.limit_in_bytes");
  s->memory_limit_bytes = limit >= kV1Unlimited ? -1 : limit;
  s->io_read_bytes = BlkioSum(blkio + "/blkio.throttle.io_service_bytes", "Read");
  s->io_write_bytes = BlkioSum(blkio + "/blkio.throttle.io_service_bytes", "Write");
  s->io_ops = BlkioSum(blkio + "/blkio.io_serviced", "Total");
  s->io_service_time_ns = BlkioSum(blkio + "/blkio.io_service_time", "Total");
}

void ReadV2(const ContainerCgroup& c, CgroupSample* s) {
  const std::string& d = c.path;
  const std::optional<std::string> stat = ReadSmallFile(d + "/cpu.stat");
  s->cpu_usage_usec = Keyed(stat, "usage_usec", d + "/cpu.stat");
  s->cpu_nr_throttled = Keyed(stat, "nr_throttled", d + "/cpu.stat");
  s->cpu_throttled_usec = Keyed(stat, "throttled_usec", d + "/cpu.stat");
  if (const std::optional<std::string> max = One(d + "/cpu.max")) {
    const std::vector<std::string_view> w = Words(*max);
    if (w.size() != 2)
      throw ConfigError(At(d + "/cpu.max", 1) + "expected \"MAX PERIOD\", got " + Quoted(*max));
    if (w[0] != "max") {
      const int64_t quota = Number(w[0], At(d + "/cpu.max", 1));
      const int64_t period = Number(w[1], At(d + "/cpu.max", 1));
      if (period > 0) s->cpu_quota = static_cast<double>(quota) / static_cast<double>(period);
    }
  }
  s->memory_bytes = OneNumber(d + "/memory.current");
  if (const std::optional<std::string> max = One(d + "/memory.max"); max && *max != "max")
    s->memory_limit_bytes = Number(*max, At(d + "/memory.max", 1));
  if (const std::optional<std::string> io = ReadSmallFile(d + "/io.stat")) {
    s->io_read_bytes = s->io_write_bytes = 0;
    const std::vector<std::string_view> lines = Split(*io, '\n');
    for (size_t n = 0; n < lines.size(); ++n)
      for (std::string_view kv : Words(lines[n])) {
        const bool read = kv.substr(0, 7) == "rbytes=", write = kv.substr(0, 7) == "wbytes=";
        if (!read && !write) continue;
        int64_t& sum = read ? s->io_read_bytes : s->io_write_bytes;
        if (__builtin_add_overflow(sum, Number(kv.substr(7), At(d + "/io.stat", n + 1)), &sum))
          sum = kMax;
      }
  }
  s->cpu_pressure = PressureAvg10(d + "/cpu.pressure");
  s->memory_pressure = PressureAvg10(d + "/memory.pressure");
  s->io_pressure = PressureAvg10(d + "/io.pressure");
}

Contention Grade(double value, double medium_from, double high_above) {
  if (value < 0) return Contention::kUnknown;
  if (value < medium_from) return Contention::kLow;
  return value <= high_above ? Contention::kMedium : Contention::kHigh;
}

}  // namespace

std::optional<ContainerCgroup> FindContainerCgroup(std::string_view id, const std::string& root) {
  const bool hex = !id.empty() && id.size() <= 64 &&
                   id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!hex)
    throw ConfigError("container id " + Quoted(id) +
                      ": expected 1 to 64 lowercase hex digits (a Docker container id)");
  const std::string name(id);
  if (Exists(root + "/cgroup.controllers")) {
    for (const std::string& dir :
         {root + "/system.slice/docker-" + name + ".scope", root + "/docker/" + name})
      if (Exists(dir)) return ContainerCgroup{CgroupVersion::kV2, root, dir};
    return std::nullopt;
  }
  for (const char* controller : {"memory", "cpu", "cpuacct", "cpu,cpuacct"})
    if (Exists(root + "/" + controller + "/docker/" + name))
      return ContainerCgroup{CgroupVersion::kV1, root, "docker/" + name};
  return std::nullopt;
}

CgroupSample ReadCgroupSample(const ContainerCgroup& cgroup) {
  CgroupSample sample;
  if (cgroup.version == CgroupVersion::kV1)
    ReadV1(cgroup, &sample);
  else
    ReadV2(cgroup, &sample);
  return sample;
}

NetBytes ParseNetDev(std::string_view text, const std::string& source) {
  NetBytes bytes;
  const std::vector<std::string_view> lines =
      agent_text::SplitLines(text, source, 1 << 20, 4096, 4096);
  for (size_t n = 0; n < lines.size(); ++n) {
    const size_t colon = lines[n].find(':');
    // The two header lines ("Inter-|   Receive ...", " face |bytes ...") have no colon.
    if (colon == std::string_view::npos) continue;
    const std::string_view name = Trim(lines[n].substr(0, colon));
    const std::vector<std::string_view> w = Words(lines[n].substr(colon + 1));
    if (w.size() != 16)
      throw ConfigError(At(source, n + 1) + "expected 16 counters after " + Quoted(name) +
                        ", got " + std::to_string(w.size()) + "; is this /proc/PID/net/dev?");
    if (name == "lo") continue;
    const auto add = [&](int64_t* sum, std::string_view word) {
      if (__builtin_add_overflow(*sum, Number(word, At(source, n + 1)), sum)) *sum = kMax;
    };
    add(&bytes.rx_bytes, w[0]);
    add(&bytes.tx_bytes, w[8]);
  }
  return bytes;
}

std::optional<NetBytes> ReadContainerNetBytes(const ContainerCgroup& cgroup,
                                              const std::string& proc_root) {
  const std::string procs =
      (cgroup.version == CgroupVersion::kV1 ? cgroup.root + "/memory/" + cgroup.path
                                            : cgroup.path) +
      "/cgroup.procs";
  const std::optional<std::string> pids = ReadSmallFile(procs);
  if (!pids) return std::nullopt;
  const std::string_view first_line = std::string_view(*pids).substr(0, pids->find('\n'));
  const std::vector<std::string_view> words = Words(first_line);
  if (words.empty()) return std::nullopt;
  const int64_t pid = Number(words[0], At(procs, 1));
  const std::string dev = proc_root + "/" + std::to_string(pid) + "/net/dev";
  const std::optional<std::string> text = ReadSmallFile(dev);
  if (!text) return std::nullopt;
  return ParseNetDev(*text, dev);
}

const char* ContentionName(Contention grade) {
  switch (grade) {
    case Contention::kLow:
      return "low";
    case Contention::kMedium:
      return "medium";
    case Contention::kHigh:
      return "high";
    case Contention::kUnknown:
      break;
  }
  return "unknown";
}

Contention GradeCpu(double percent) { return Grade(percent, 40, 80); }
Contention GradeMemory(double percent) { return Grade(percent, 60, 90); }
Contention GradeIoLatency(double ms) { return Grade(ms, 5, 50); }

ContentionGrades GradeContention(const CgroupSample& before, const CgroupSample& after,
                                 double wall_seconds, const NodeCapacity& node) {
  ContentionGrades g;
  const double cpus = after.cpu_quota > 0 ? after.cpu_quota : node.cpus;
  if (wall_seconds > 0 && cpus > 0 && before.cpu_usage_usec >= 0 &&
      after.cpu_usage_usec >= before.cpu_usage_usec)
    g.cpu_percent = static_cast<double>(after.cpu_usage_usec - before.cpu_usage_usec) /
                    (wall_seconds * 1e6) / cpus * 100;
  const int64_t limit = after.memory_limit_bytes > 0 ? after.memory_limit_bytes : node.memory_bytes;
  if (after.memory_bytes >= 0 && limit > 0)
    g.memory_percent = static_cast<double>(after.memory_bytes) / static_cast<double>(limit) * 100;
  if (before.io_ops >= 0 && after.io_ops >= before.io_ops && before.io_service_time_ns >= 0 &&
      after.io_service_time_ns >= before.io_service_time_ns) {
    const int64_t ops = after.io_ops - before.io_ops;
    g.io_latency_ms =
        ops == 0 ? 0
                 : static_cast<double>(after.io_service_time_ns - before.io_service_time_ns) /
                       static_cast<double>(ops) / 1e6;
  }
  g.cpu = GradeCpu(g.cpu_percent);
  g.memory = GradeMemory(g.memory_percent);
  g.io = GradeIoLatency(g.io_latency_ms);
  return g;
}

void SetContention(const ContentionGrades& g, ContainerReport* c) {
  c->cpu_percent = std::min(g.cpu_percent, kMaxReportPercent);
  c->memory_percent = std::min(g.memory_percent, kMaxReportPercent);
  c->io_latency_ms = std::min(g.io_latency_ms, kMaxReportIoLatencyMs);
  c->cpu_grade = ContentionName(g.cpu);
  c->memory_grade = ContentionName(g.memory);
  c->io_grade = ContentionName(g.io);
}

}  // namespace berth
