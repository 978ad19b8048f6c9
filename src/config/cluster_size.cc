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
  using namespace limits;
  const auto gpus = static_cast<int64_t>(node.gpus.size());
  const auto labels = static_cast<int64_t>(node.labels.size());
  int64_t cpus = 0;
  for (const Socket& socket : node.sockets) cpus += static_cast<int64_t>(socket.cpus.size());
  if (gpus > kMaxGpusPerNode) return "a node with " + OverLimit(kMaxGpusPerNode, "GPUs a node");
  if (static_cast<int64_t>(node.sockets.size()) > kMaxSocketsPerNode)
    return "a node with " + OverLimit(kMaxSocketsPerNode, "sockets a node");
  if (labels > kMaxLabelsPerNode)
    return "a node with " + OverLimit(kMaxLabelsPerNode, "labels a node");
  if (node.cpu_milli > kMaxNodeCpuMilli)
    return "a node with " + OverLimit(kMaxNodeCpuMilli, "milli-CPUs a node");
  if (node.memory_mib > kMaxNodeMemoryMiB)
    return "a node with " + OverLimit(kMaxNodeMemoryMiB, "MiB of memory a node");
  int64_t nodes = 0, all_gpus = 0, all_cpus = 0, all_labels = 0;
  if (!Grow(nodes_, count, 1, kMaxNodes, &nodes)) return OverLimit(kMaxNodes, "nodes");
  if (!Grow(gpus_, count, gpus, kMaxGpus, &all_gpus)) return OverLimit(kMaxGpus, "GPUs");
  if (!Grow(listed_cpus_, count, cpus, kMaxListedCpus, &all_cpus))
    return OverLimit(kMaxListedCpus, "CPU ids listed in all");
  if (!Grow(labels_, count, labels, kMaxLabels, &all_labels))
    return OverLimit(kMaxLabels, "node labels in all");
  nodes_ = nodes;
  gpus_ = all_gpus;
  listed_cpus_ = all_cpus;
  labels_ = all_labels;
  return "";
}

}  // namespace berth
