#include "core/node_resources.h"

#include <algorithm>

namespace berth {

NodeResources::NodeResources(const Cluster* cluster) : cluster_(cluster) {
  const size_t n = cluster->nodes.size();
  nodes_.resize(n);
  sockets_.resize(n);
  all_sockets_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = cluster->nodes[i];
    nodes_[i].cpu_total = nodes_[i].cpu_free = node.cpu_milli;
    nodes_[i].memory_total = nodes_[i].memory_free = node.memory_mib;
    const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(node.sockets.size()));
    for (size_t s = 0; s < node.sockets.size(); ++s) {
      Amounts a;
      a.cpu_total = node.sockets[s].cpus.empty()
                        ? node.cpu_milli / count
                        : 1000 * static_cast<int64_t>(node.sockets[s].cpus.size());
      a.memory_total =
          node.sockets[s].memory_mib > 0 ? node.sockets[s].memory_mib : node.memory_mib / count;
      a.cpu_free = a.cpu_total;
      a.memory_free = a.memory_total;
      sockets_[i].push_back(a);
      all_sockets_[i].push_back(static_cast<int>(s));
    }
  }
}

const std::vector<int>& NodeResources::AllSocketsIfEmpty(int node,
                                                         const std::vector<int>& sockets) const {
  return sockets.empty() ? all_sockets_[node] : sockets;
}

bool NodeResources::Fits(int node, const std::vector<int>& sockets, int64_t cpu_milli,
                         int64_t memory_mib) const {
  const Amounts& total = nodes_[node];
  if (cpu_milli > total.cpu_free || memory_mib > total.memory_free) return false;
  const std::vector<int>& on = AllSocketsIfEmpty(node, sockets);
  if (on.empty()) return true;
  const int64_t k = static_cast<int64_t>(on.size());
  for (size_t i = 0; i < on.size(); ++i) {
    // The first socket takes the remainder of an uneven split.
    const int64_t cpu = cpu_milli / k + (i == 0 ? cpu_milli % k : 0);
    const int64_t mem = memory_mib / k + (i == 0 ? memory_mib % k : 0);
    const Amounts& s = sockets_[node][on[i]];
    if (cpu > s.cpu_free || mem > s.memory_free) return false;
  }
  return true;
}

void NodeResources::Apply(int node, const std::vector<int>& sockets, int64_t cpu_milli,
                          int64_t memory_mib, int sign) {
  nodes_[node].cpu_free += sign * cpu_milli;
  nodes_[node].memory_free += sign * memory_mib;
  const std::vector<int>& on = AllSocketsIfEmpty(node, sockets);
  const int64_t k = static_cast<int64_t>(on.size());
  for (size_t i = 0; i < on.size(); ++i) {
    Amounts& s = sockets_[node][on[i]];
    s.cpu_free += sign * (cpu_milli / k + (i == 0 ? cpu_milli % k : 0));
    s.memory_free += sign * (memory_mib / k + (i == 0 ? memory_mib % k : 0));
  }
}

void NodeResources::Take(int node, const std::vector<int>& sockets, int64_t cpu_milli,
                         int64_t memory_mib) {
  Apply(node, sockets, cpu_milli, memory_mib, -1);
}

void NodeResources::Give(int node, const std::vector<int>& sockets, int64_t cpu_milli,
                         int64_t memory_mib) {
  Apply(node, sockets, cpu_milli, memory_mib, +1);
}

std::vector<int> NodeResources::PinnedCpus(int node, const std::vector<int>& sockets) const {
  std::vector<int> cpus;
  for (int s : AllSocketsIfEmpty(node, sockets)) {
    const auto& list = cluster_->nodes[node].sockets[s].cpus;
    cpus.insert(cpus.end(), list.begin(), list.end());
  }
  return cpus;
}

}  // namespace berth
