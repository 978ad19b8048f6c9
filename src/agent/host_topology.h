// The host's CPU topology as the node agent sees it in sysfs: online CPUs, sockets (physical
// packages), NUMA nodes with their CPUs and memory, and SMT siblings.
//
// ReadHostTopology reads a /sys tree whose root is passed in (tests give a fake tree), only
// these files:
//   devices/system/cpu/online                                  cpulist of online CPUs
//   devices/system/cpu/cpuN/topology/physical_package_id        socket id of CPU N
//   devices/system/cpu/cpuN/topology/thread_siblings_list       cpulist of N's core
//   devices/system/node/online                                  cpulist of NUMA node ids
//   devices/system/node/nodeN/cpulist, nodeN/meminfo (MemTotal)
// A kernel without NUMA support has no devices/system/node: the host is then one NUMA node 0
// holding every online CPU, its memory unknown (0).
//
// Bounds: CPU ids below kMaxCpus, NUMA node ids below kMaxNumaNodes, each file at most 1 MiB.
// Bad input throws ConfigError "PATH: what is wrong".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace berth {

constexpr int kMaxCpus = 4096;  // CPU ids 0 .. kMaxCpus - 1
constexpr int kMaxNumaNodes = 64;

// The CPU ids of a Linux cpulist ("0-3,8-11", "5", or "" for none; surrounding whitespace
// and a trailing newline ignored), ascending. Throws ConfigError "SOURCE: cpulist "TEXT": ..."
// when an item is malformed, a range runs backwards, an id is kMaxCpus or more, or an id is
// listed twice.
std::vector<int> ParseCpuList(std::string_view text, const std::string& source);

struct CpuPackage {
  int id = 0;             // physical_package_id
  std::vector<int> cpus;  // ascending
};

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // ascending
  int64_t memory_mib = 0;
};

struct HostTopology {
  std::vector<int> cpus;                // online CPUs, ascending
  std::vector<CpuPackage> packages;     // ascending id
  std::vector<NumaNode> numa_nodes;     // ascending id
  std::vector<std::vector<int>> cores;  // SMT siblings, one group per core, by lowest CPU

  // Index into numa_nodes of the node with this id, or -1.
  int FindNumaNode(int id) const;
};

HostTopology ReadHostTopology(const std::string& sys_root = "/sys");

}  // namespace berth
