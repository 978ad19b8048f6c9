// CPU (milli-cores) and memory of every node and of each of its CPU sockets (NUMA nodes).
//
// A replica's CPU and memory are split evenly over the sockets its GPUs hang off, so that the
// job can be pinned to NUMA-local CPUs; a replica without GPUs spreads over all sockets. A
// socket without a CPU list gets an even share of the node's CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.h"

namespace berth {

class NodeResources {
 public:
  explicit NodeResources(const Cluster* cluster);

  bool Fits(int node, const std::vector<int>& sockets, int64_t cpu_milli, int64_t memory_mib) const;
  void Take(int node, const std::vector<int>& sockets, int64_t cpu_milli, int64_t memory_mib);
  void Give(int node, const std::vector<int>& sockets, int64_t cpu_milli, int64_t memory_mib);

  // The CPUs a replica on these sockets should be pinned to (empty when none are declared).
  std::vector<int> PinnedCpus(int node, const std::vector<int>& sockets) const;

  int64_t free_cpu_milli(int node) const { return nodes_[node].cpu_free; }
  int64_t free_memory_mib(int node) const { return nodes_[node].memory_free; }
  int64_t cpu_milli(int node) const { return nodes_[node].cpu_total; }
  int64_t memory_mib(int node) const { return nodes_[node].memory_total; }

 private:
  struct Amounts {
    int64_t cpu_total = 0, memory_total = 0, cpu_free = 0, memory_free = 0;
  };
  // Adds `sign` x the request to the free amounts of the node and its sockets.
  void Apply(int node, const std::vector<int>& sockets, int64_t cpu_milli, int64_t memory_mib,
             int sign);
  const std::vector<int>& AllSocketsIfEmpty(int node, const std::vector<int>& sockets) const;

  const Cluster* cluster_;
  std::vector<Amounts> nodes_;
  std::vector<std::vector<Amounts>> sockets_;
  std::vector<std::vector<int>> all_sockets_;
};

}  // namespace berth
