#include "server/node_join.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/cell_tree.h"

namespace berth {

namespace {

// A host name's letters: node names end up in URLs, tables, events and metric labels.
bool GoodNodeName(const std::string& name) {
  return !name.empty() && name.size() <= 63 && std::isalnum(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '-' || c == '.' || c == '_';
         });
}

// The largest CPU id a node may have, as cluster files allow.
constexpr int kMaxCpuId = 65535;

// Drops the models that no node but `except` (-1: none) has a GPU of.
void KeepModelsOfNodes(Cluster* cluster, int except) {
  std::set<std::string> used;
  for (size_t n = 0; n < cluster->nodes.size(); ++n)
    if (static_cast<int>(n) != except)
      for (const Gpu& gpu : cluster->nodes[n].gpus) used.insert(gpu.model);
  std::erase_if(cluster->models, [&](const GpuModel& m) { return !used.count(m.name); });
}

}  // namespace

std::string JoinNode(const std::string& name, const NodeRegistration& registration,
                     Cluster* cluster) {
  const int existing = cluster->FindNode(name);
  if (existing < 0 && cluster->nodes.size() >= kMaxJoinedNodes)
    return "the cluster has " + std::to_string(cluster->nodes.size()) +
           " nodes, the most that may join one server; start another server, or give this one "
           "a cluster file";
  if (!GoodNodeName(name))
    return "the node name must be 1 to 63 letters, digits, '-', '.' or '_', starting with a "
           "letter or digit; start the agent with such a --node";
  const std::optional<Node>& shape =
      registration.found ? registration.found : registration.declared;
  if (!shape)
    return "its agent sent no node shape (found or declared GPUs), so the server cannot add it; "
           "upgrade the agent, or add the node to a cluster file";
  if (shape->gpus.size() != registration.gpu_uuids.size())
    return "its agent sent " + std::to_string(shape->gpus.size()) + " GPUs and " +
           std::to_string(registration.gpu_uuids.size()) + " GPU UUIDs";
  std::set<int> cpus;
  for (const Socket& socket : shape->sockets)
    for (int cpu : socket.cpus) {
      if (cpu < 0 || cpu > kMaxCpuId)
        return "CPU " + std::to_string(cpu) + " is outside 0-" + std::to_string(kMaxCpuId);
      if (!cpus.insert(cpu).second)
        return "CPU " + std::to_string(cpu) + " is listed twice (in one socket or in two)";
    }
  if (shape->gpus.empty() && (cpus.empty() || shape->cpu_milli <= 0))
    return "it has neither GPUs nor CPUs";
  // A job's GPUs are handed to its containers by UUID: one missing or shared would run it on
  // no GPU, or on another job's.
  std::set<std::string> uuids;
  for (const std::string& uuid : registration.gpu_uuids)
    if (uuid.empty() || !uuids.insert(uuid).second)
      return (uuid.empty() ? "its agent sent an empty GPU UUID"
                           : "its agent sent GPU UUID \"" + uuid + "\" twice") +
             std::string("; each GPU needs a UUID of its own");
  Node node = *shape;
  node.name = name;
  node.shape.clear();
  node.rack.clear();  // labels are the agent's (--label); the cluster declares no racks
  Cluster grown = *cluster;
  const size_t at = existing >= 0 ? static_cast<size_t>(existing) : grown.nodes.size();
  if (existing >= 0)
    grown.nodes[at] = std::move(node);
  else
    grown.nodes.push_back(std::move(node));
  // The models are those of the nodes' GPUs: one no node has any more (the node replaced had
  // the last) is dropped, so a node of that model name may join with other GPUs.
  KeepModelsOfNodes(&grown, static_cast<int>(at));
  for (const Gpu& gpu : grown.nodes[at].gpus) {
    const auto sent = std::find_if(registration.models.begin(), registration.models.end(),
                                   [&](const GpuModel& m) { return m.name == gpu.model; });
    if (sent == registration.models.end())
      return "its agent did not send GPU model \"" + gpu.model + "\" (models)";
    const GpuModel* have = grown.FindModel(gpu.model);
    if (!have) {
      grown.models.push_back(*sent);
    } else if (have->memory_mib != sent->memory_mib || have->mig_capable() != sent->mig_capable()) {
      return "GPU model \"" + sent->name + "\" has " + std::to_string(sent->memory_mib) +
             " MiB here and " + std::to_string(have->memory_mib) +
             " MiB on the other nodes (or another MIG capability); nodes of one model name must "
             "have the same GPUs";
    }
  }
  if (std::string why = ValidateCluster(grown); !why.empty()) return why;
  CellTree tree;
  if (std::string why = CellTree::Build(grown, &tree); !why.empty()) return why;
  *cluster = std::move(grown);
  return "";
}

void LeaveNode(Cluster* cluster) { KeepModelsOfNodes(cluster, -1); }

}  // namespace berth
