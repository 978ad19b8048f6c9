// A container's resource use from its cgroup (v1 or v2) and its network namespace, and a pure
// grading of contention for the node agent's reports.
//
// FindContainerCgroup locates a Docker container's cgroup under a cgroupfs root (default
// "/sys/fs/cgroup"; tests pass a fake tree):
//   v2 (root has cgroup.controllers): ROOT/system.slice/docker-ID.scope (systemd driver) or
//       ROOT/docker/ID (cgroupfs driver);
//   v1: ROOT/CONTROLLER/docker/ID for cpu, cpuacct, memory and blkio ("cpu,cpuacct" when
//       the two are mounted together).
// ReadCgroupSample reads what each version has; a value a kernel does not provide stays -1.
// Bad file contents throw ConfigError "PATH:LINE: ...". Every file is at most 1 MiB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/agent_protocol.h"

namespace berth {

enum class CgroupVersion { kV1, kV2 };

struct ContainerCgroup {
  CgroupVersion version = CgroupVersion::kV2;
  std::string root;  // the cgroupfs root
  std::string path;  // v2: the container's directory; v1: its path under each controller
};

// The container's cgroup, or nullopt when none is found. Throws ConfigError unless `id` is
// 1 to 64 lowercase hex digits (a Docker id: anything else could walk out of the tree).
std::optional<ContainerCgroup> FindContainerCgroup(std::string_view id,
                                                   const std::string& root = "/sys/fs/cgroup");

struct CgroupSample {
  int64_t cpu_usage_usec = -1;      // v1 cpuacct.usage (ns / 1000), v2 cpu.stat usage_usec
  int64_t cpu_nr_throttled = -1;    // cpu.stat nr_throttled
  int64_t cpu_throttled_usec = -1;  // v1 throttled_time (ns / 1000), v2 throttled_usec
  double cpu_quota = -1;            // CPUs (quota / period); -1 when unlimited
  int64_t memory_bytes = -1;        // v1 memory.usage_in_bytes, v2 memory.current
  int64_t memory_limit_bytes = -1;  // -1 when unlimited
  int64_t io_read_bytes = -1;       // v1 blkio.throttle.io_service_bytes, v2 io.stat rbytes
  int64_t io_write_bytes = -1;      // ... Write, wbytes
  // v1 only, and only under the CFQ scheduler (blkio.io_serviced, blkio.io_service_time): the
  // completed requests and their total service time, for the IO latency. v2 has no per-cgroup
  // latency file.
  int64_t io_ops = -1;
  int64_t io_service_time_ns = -1;
  // v2 pressure stall information: "some avg10", the percentage of the last 10 s in which
  // some task waited.
  double cpu_pressure = -1;
  double memory_pressure = -1;
  double io_pressure = -1;
};

CgroupSample ReadCgroupSample(const ContainerCgroup& cgroup);

struct NetBytes {
  int64_t rx_bytes = 0;
  int64_t tx_bytes = 0;
};

// The bytes received and sent by every interface but lo in /proc/PID/net/dev text.
NetBytes ParseNetDev(std::string_view text, const std::string& source);

// The container's network bytes: those of the namespace of the first process its cgroup lists
// (cgroup.procs; v1: under the memory controller), from PROC_ROOT/PID/net/dev. nullopt when
// the cgroup lists no process (the container has exited) or the process has just gone.
std::optional<NetBytes> ReadContainerNetBytes(const ContainerCgroup& cgroup,
                                              const std::string& proc_root = "/proc");

enum class Contention { kUnknown, kLow, kMedium, kHigh };

const char* ContentionName(Contention grade);  // "unknown", "low", "medium", "high"

// The thresholds, boundaries in the middle grade:
//   CPU: use under 40% of its quota low, 40-80% medium, over 80% high;
//   memory: under 60% of its limit low, 60-90% medium, over 90% high;
//   IO latency: under 5 ms low, 5-50 ms medium, over 50 ms high.
// A negative (unknown) value grades kUnknown.
Contention GradeCpu(double percent_of_quota);
Contention GradeMemory(double percent_of_limit);
Contention GradeIoLatency(double milliseconds);

// What a container without a quota or a limit is measured against.
struct NodeCapacity {
  double cpus = 0;
  int64_t memory_bytes = 0;
};

struct ContentionGrades {
  double cpu_percent = -1;
  double memory_percent = -1;
  double io_latency_ms = -1;
  Contention cpu = Contention::kUnknown;
  Contention memory = Contention::kUnknown;
  Contention io = Contention::kUnknown;
};

// Grades the container between two samples `wall_seconds` apart: CPU by the usage delta over
// the wall time against the quota, memory by the later sample's use against its limit, IO by
// the mean service time of the requests completed in between (none completed: 0 ms). Without
// a quota (or limit) the node's CPUs (or memory) are the measure, since that is what the
// container can take from its neighbours.
ContentionGrades GradeContention(const CgroupSample& before, const CgroupSample& after,
                                 double wall_seconds, const NodeCapacity& node);

// Puts the grades in a container's report, each measure capped at the most a report carries
// (kMaxReportPercent, kMaxReportIoLatencyMs): past it the grade says enough, and the server
// refuses a report that carries more (a counter that leapt, two samples a moment apart).
void SetContention(const ContentionGrades& grades, ContainerReport* report);

}  // namespace berth
