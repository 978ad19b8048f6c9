#include "agent/host_topology.h"

#include <algorithm>
#include <bitset>
#include <map>

#include "agent/agent_text.h"
#include "config/config_error.h"

namespace berth {
namespace {

using agent_text::ReadSmallFile;
using agent_text::ToInt;
using agent_text::Trim;

std::string Required(const std::string& path) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) throw ConfigError(path + ": missing; is this a Linux /sys tree?");
  return *text;
}

// "Node 0 MemTotal:       12150520 kB" in a node's meminfo, as MiB; 0 when absent.
int64_t MemTotalMiB(const std::string& text, const std::string& path) {
  for (std::string_view line : agent_text::Split(text, '\n')) {
    const size_t at = line.find("MemTotal:");
    if (at == std::string_view::npos) continue;
    std::string_view value = Trim(line.substr(at + 9));
    if (value.size() < 3 || value.substr(value.size() - 2) != "kB")
      throw ConfigError(path + ": MemTotal " + Quoted(value) + " is not a number of kB");
    const std::optional<int64_t> kib =
        ToInt(Trim(value.substr(0, value.size() - 2)), 0, int64_t{1} << 50);
    if (!kib) throw ConfigError(path + ": MemTotal " + Quoted(value) + " is not a number of kB");
    return *kib / 1024;
  }
  return 0;
}

}  // namespace

std::vector<int> ParseCpuList(std::string_view text, const std::string& source) {
  text = Trim(text);
  std::vector<int> cpus;
  if (text.empty()) return cpus;
  std::bitset<kMaxCpus> seen;
  const auto fail = [&](const std::string& what) {
    throw ConfigError(source + ": cpulist " + Quoted(text) + ": " + what);
  };
  for (std::string_view item : agent_text::Split(text, ',')) {
    const size_t dash = item.find('-');
    const auto id = [&](std::string_view s) {
      const std::optional<int64_t> v = ToInt(Trim(s), 0, kMaxCpus - 1);
      if (!v)
        fail(Quoted(item) + " is not a CPU id or a range of them (ids 0 to " +
             std::to_string(kMaxCpus - 1) + ")");
      return static_cast<int>(*v);
    };
    const int first = id(item.substr(0, dash));
    const int last = dash == std::string_view::npos ? first : id(item.substr(dash + 1));
    if (last < first) fail("the range " + Quoted(item) + " runs backwards");
    for (int cpu = first; cpu <= last; ++cpu) {
      if (seen[cpu]) fail("CPU " + std::to_string(cpu) + " is listed twice");
      seen[cpu] = true;
    }
  }
  for (int cpu = 0; cpu < kMaxCpus; ++cpu)
    if (seen[cpu]) cpus.push_back(cpu);
  return cpus;
}

int HostTopology::FindNumaNode(int id) const {
  for (size_t i = 0; i < numa_nodes.size(); ++i)
    if (numa_nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

HostTopology ReadHostTopology(const std::string& sys_root) {
  HostTopology host;
  const std::string cpu_dir = sys_root + "/devices/system/cpu";
  const std::string online = cpu_dir + "/online";
  host.cpus = ParseCpuList(Required(online), online);
  if (host.cpus.empty()) throw ConfigError(online + ": no CPU is online");

  std::map<int, std::vector<int>> packages;
  std::bitset<kMaxCpus> in_core;
  for (int cpu : host.cpus) {
    const std::string topology = cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
    const std::string package_path = topology + "physical_package_id";
    // Some virtual machines report -1: the CPU's socket is unknown, taken as socket 0.
    const std::optional<int64_t> package = ToInt(Trim(Required(package_path)), -1, kMaxCpus - 1);
    if (!package)
      throw ConfigError(package_path + ": expected a socket id, got " +
                        Quoted(Trim(Required(package_path))));
    packages[std::max<int>(0, static_cast<int>(*package))].push_back(cpu);
    if (in_core[cpu]) continue;
    const std::string siblings_path = topology + "thread_siblings_list";
    std::vector<int> siblings = ParseCpuList(Required(siblings_path), siblings_path);
    // Offline siblings are not the host's to use.
    std::erase_if(siblings, [&](int s) {
      return !std::binary_search(host.cpus.begin(), host.cpus.end(), s);
    });
    if (std::find(siblings.begin(), siblings.end(), cpu) == siblings.end())
      throw ConfigError(siblings_path + ": does not list CPU " + std::to_string(cpu) + " itself");
    for (int s : siblings) in_core[s] = true;
    host.cores.push_back(std::move(siblings));
  }
  for (auto& [id, cpus] : packages) host.packages.push_back(CpuPackage{id, std::move(cpus)});

  const std::string node_dir = sys_root + "/devices/system/node";
  const std::string node_online = node_dir + "/online";
  const std::optional<std::string> nodes_text = ReadSmallFile(node_online);
  if (!nodes_text) {
    host.numa_nodes.push_back(NumaNode{0, host.cpus, 0});
    return host;
  }
  for (int id : ParseCpuList(*nodes_text, node_online)) {
    if (id >= kMaxNumaNodes)
      throw ConfigError(node_online + ": NUMA node " + std::to_string(id) + ", more than the " +
                        std::to_string(kMaxNumaNodes) + " a host may have");
    const std::string dir = node_dir + "/node" + std::to_string(id);
    NumaNode node{id, ParseCpuList(Required(dir + "/cpulist"), dir + "/cpulist"), 0};
    std::erase_if(node.cpus, [&](int c) {
      return !std::binary_search(host.cpus.begin(), host.cpus.end(), c);
    });
    node.memory_mib = MemTotalMiB(Required(dir + "/meminfo"), dir + "/meminfo");
    host.numa_nodes.push_back(std::move(node));
  }
  if (host.numa_nodes.empty()) throw ConfigError(node_online + ": no NUMA node is online");
  return host;
}

}  // namespace berth
