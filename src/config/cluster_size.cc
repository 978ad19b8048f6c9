#include "config/cluster_size.h"

#include "config/limits.h"

namespace berth {
namespace {

// `total` + `count` x `each` into `*grown`, when that is within `limit` (checked: both factors
// come from inputs).
bool Grow(int64_t total, int64_t count, int64_t each, int64_t limit, int64_t* grown) {
  int64_t more = 0;
  return !__builtin_mul_overflow(count, each, &more) &&
         !__builtin_add_overflow(total, more, grown) && *grown <= limit;
}

}  // namespace

std::string ClusterSize::Add(const Node& node, int64_t count) {
  using limits::Limits;
  using limits::OverLimit;
  const Limits& max = limits::Get();
  const auto gpus = static_cast<int64_t>(node.gpus.size());
  const auto labels = static_cast<int64_t>(node.labels.size());
  int64_t cpus = 0;
  for (const Socket& socket : node.sockets) cpus += static_cast<int64_t>(socket.cpus.size());
  if (gpus > max.gpus_per_node)
    return "a node with " + OverLimit(&Limits::gpus_per_node, "GPUs a node");
  if (static_cast<int64_t>(node.sockets.size()) > max.sockets_per_node)
    return "a node with " + OverLimit(&Limits::sockets_per_node, "sockets a node");
  if (labels > max.labels_per_node)
    return "a node with " + OverLimit(&Limits::labels_per_node, "labels a node");
  if (node.cpu_milli > max.node_cpu_milli)
    return "a node with " + OverLimit(&Limits::node_cpu_milli, "milli-CPUs a node");
  if (node.memory_mib > max.node_memory_mib)
    return "a node with " + OverLimit(&Limits::node_memory_mib, "MiB of memory a node");
  int64_t nodes = 0, all_gpus = 0, all_cpus = 0, all_labels = 0;
  if (!Grow(nodes_, count, 1, max.nodes, &nodes)) return OverLimit(&Limits::nodes, "nodes");
  if (!Grow(gpus_, count, gpus, max.gpus, &all_gpus)) return OverLimit(&Limits::gpus, "GPUs");
  if (!Grow(listed_cpus_, count, cpus, max.listed_cpus, &all_cpus))
    return OverLimit(&Limits::listed_cpus, "CPU ids listed in all");
  if (!Grow(labels_, count, labels, max.labels, &all_labels))
    return OverLimit(&Limits::labels, "node labels in all");
  nodes_ = nodes;
  gpus_ = all_gpus;
  listed_cpus_ = all_cpus;
  labels_ = all_labels;
  return "";
}

}  // namespace berth
