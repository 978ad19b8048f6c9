#include "agent/local_node.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/nvml.h"
#include "config/config_error.h"

namespace berth {
namespace {

constexpr size_t kMaxCommandOutput = 4 << 20;

// What `command` prints on stdout (stderr dropped), at most kMaxCommandOutput bytes; false
// when it cannot run or exits non-zero.
bool RunCommand(const std::string& command, std::string* out) {
  // nvidia-smi hangs when a GPU falls off the bus: killed after 10 s (coreutils' timeout), so
  // that discovery and the device plugin's health checks go on and report it.
  FILE* pipe = ::popen(("timeout -k 2 10 " + command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return false;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    if (out->size() < kMaxCommandOutput)
      out->append(buffer, std::min(n, kMaxCommandOutput - out->size()));
  return ::pclose(pipe) == 0;
}

}  // namespace

std::optional<DiscoveredNode> DiscoverGpus(const std::string& node_name, std::string* why) {
  // NVML stalls when a GPU falls off the bus, as nvidia-smi does: given 10 s on a thread of its
  // own, then left behind (stuck in the driver) for nvidia-smi, which runs under a timeout.
  // After one stall it is not asked again (the device plugin's health checks call this often).
  static std::atomic<bool> nvml_stalled{false};
  struct Reading {
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;
    std::optional<DiscoveredNode> found;
    std::string why;
  };
  const auto reading = std::make_shared<Reading>();
  if (nvml_stalled) {
    reading->done = true;
    reading->why = "NVML: stalled before (a GPU fallen off the bus?), not asked again";
  } else {
    std::thread([reading, node_name] {
      std::string nvml_why;
      std::optional<DiscoveredNode> found;
      try {
        found = DiscoverWithNvml(kNvmlLibrary, node_name, ReadHostTopology(), &nvml_why);
      } catch (const std::exception& e) {
        nvml_why = std::string("NVML: ") + e.what();
      }
      std::lock_guard<std::mutex> lock(reading->mu);
      reading->found = std::move(found);
      reading->why = std::move(nvml_why);
      reading->done = true;
      reading->done_cv.notify_all();
    }).detach();
  }
  std::string nvml_why;
  {
    std::unique_lock<std::mutex> lock(reading->mu);
    if (!reading->done_cv.wait_for(lock, std::chrono::seconds(10), [&] { return reading->done; })) {
      nvml_stalled = true;
      nvml_why = "NVML: no answer in 10 s (a GPU fallen off the bus?)";
    } else if (reading->found) {
      *why = std::string("found by NVML (") + kNvmlLibrary + ")";
      return std::move(reading->found);
    } else {
      nvml_why = reading->why;
    }
  }
  std::string query, topology, list;
  if (!RunCommand(kGpuQueryCommand, &query)) {
    *why = nvml_why + "; nvidia-smi is not there or failed";
    return std::nullopt;
  }
  const GpuQuery gpus = ParseGpuQuery(query, "nvidia-smi --query-gpu");
  if (gpus.gpus.empty()) {
    *why = nvml_why + "; nvidia-smi lists no GPU";
    return std::nullopt;
  }
  *why = "found by nvidia-smi (" + nvml_why + ")";
  RunCommand(kTopologyCommand, &topology);
  const bool listed = RunCommand(kGpuListCommand, &list);
  const GpuList parsed_list = listed ? ParseGpuList(list, "nvidia-smi -L") : GpuList();
  return BuildNode(node_name, gpus, ParseTopology(topology, "nvidia-smi topo -m"),
                   ReadHostTopology(), listed ? &parsed_list : nullptr);
}

Cluster SimulatedCluster(const std::string& node_name, int gpus, const HostTopology& host) {
  Cluster c;
  c.name = "berth-up";
  c.models.push_back({"simulated", 16384, {}});
  Node n;
  n.name = node_name;
  n.labels["simulated"] = "true";
  for (const NumaNode& numa : host.numa_nodes) {
    n.sockets.push_back({numa.cpus, numa.memory_mib});
    n.memory_mib += numa.memory_mib;
  }
  if (n.sockets.empty()) {  // a host without NUMA information: one socket of every CPU
    n.sockets.push_back({host.cpus, 4096});
    n.memory_mib = 4096;
  }
  n.cpu_milli = static_cast<int64_t>(std::max<size_t>(1, host.cpus.size())) * 1000;
  for (int g = 0; g < gpus; ++g) {
    if (g % 2 == 0) n.switches.push_back({static_cast<int>(n.switches.size() % n.sockets.size())});
    Gpu gpu;
    gpu.model = "simulated";
    gpu.pcie_switch = static_cast<int>(n.switches.size()) - 1;
    n.gpus.push_back(gpu);
  }
  c.nodes.push_back(std::move(n));
  if (const std::string why = ValidateCluster(c); !why.empty())
    throw ConfigError("this host as a cluster: " + why);
  return c;
}

std::vector<std::string> SimulatedUuids(const std::string& node_name, size_t gpus) {
  std::vector<std::string> uuids;
  for (size_t g = 0; g < gpus; ++g)
    uuids.push_back("GPU-sim-" + node_name + "-" + std::to_string(g));
  return uuids;
}

Cluster DiscoveredCluster(const DiscoveredNode& discovered) {
  Cluster c;
  c.name = "berth-up";
  c.models = discovered.models;
  c.nodes.push_back(discovered.node);
  if (const std::string why = ValidateCluster(c); !why.empty())
    throw ConfigError("this host's GPUs as a cluster: " + why);
  return c;
}

std::string FirstRunGpuFlags(const Node& node, const std::vector<GpuModel>& models) {
  const auto whole = std::count_if(node.gpus.begin(), node.gpus.end(),
                                   [](const Gpu& g) { return !g.mig_enabled; });
  if (whole > 0) return "--gpus " + std::to_string(std::min<long>(whole, 2));
  for (const Gpu& gpu : node.gpus) {
    if (!gpu.mig_layout.empty())
      return "--mig " + gpu.mig_layout[0].substr(0, gpu.mig_layout[0].find('@'));
    for (const GpuModel& m : models)
      if (m.name == gpu.model && !m.mig_profiles.empty()) return "--mig " + m.mig_profiles[0].name;
  }
  return "--gpus 1";
}

std::string HostNodeName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "local";
  std::string out = name;
  std::replace_if(
      out.begin(), out.end(), [](unsigned char c) { return !std::isalnum(c) && c != '-'; }, '-');
  return out.substr(0, 63);
}

}  // namespace berth
