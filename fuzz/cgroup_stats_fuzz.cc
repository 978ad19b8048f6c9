// A container's cgroup files, v1 or v2 (ReadCgroupSample), and /proc/PID/net/dev (ParseNetDev),
// as the node agent reads them. The input is a tree (InputTree): a cgroupfs root holding the
// container 3f4e8b2a...3e2f, and "net/dev". A refusal names its file; a sample taken must grade
// into values the server takes in a report (from a first sample of zeros a second earlier, on
// a node of one CPU and 1 GiB). Seeds: tests/data/agent/cgroup-v1, cgroup-v2 and net-dev.txt.
#include <filesystem>

#include "agent/cgroup_stats.h"
#include "fuzz_input.h"
#include "protocol/agent_protocol.h"

namespace {

constexpr char kId[] = "3f4e8b2a9c1d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string root = berth::InputTree(data, size);
  if (std::filesystem::exists(root + "/net/dev")) {
    const std::string text = berth::FileContents(root + "/net/dev");
    berth::LoadOrRefuse("net/dev", [&] { berth::ParseNetDev(text, "net/dev"); });
  }
  const std::optional<berth::ContainerCgroup> cgroup = berth::FindContainerCgroup(kId, root);
  if (!cgroup) return 0;
  berth::CgroupSample sample;
  try {
    sample = berth::ReadCgroupSample(*cgroup);
  } catch (const berth::ConfigError& e) {
    const std::string message = e.what();
    if (message.compare(0, root.size() + 1, root + "/") != 0 ||
        message.find(": ") == std::string::npos)
      berth::Finding("a refusal that names no file of the cgroup: " + message);
    return 0;
  }
  berth::CgroupSample before;
  before.cpu_usage_usec = before.io_ops = before.io_service_time_ns = 0;
  berth::AgentReport report;
  berth::ContainerReport& c = report.containers.emplace_back();
  c.job = 1;
  c.state = "running";
  berth::SetContention(berth::GradeContention(before, sample, 1, {1, int64_t{1} << 30}), &c);
  try {
    berth::ParseReport(berth::ToJson(report));
  } catch (const berth::ProtocolError& e) {
    berth::Finding(std::string("the server refuses the grades of a sample taken: ") + e.what());
  }
  return 0;
}
