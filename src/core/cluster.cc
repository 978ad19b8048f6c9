#include "core/cluster.h"

#include <set>

namespace berth {

const GpuModel* Cluster::FindModel(const std::string& model_name) const {
  for (const GpuModel& m : models)
    if (m.name == model_name) return &m;
  return nullptr;
}

int Cluster::FindNode(const std::string& node_name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == node_name) return static_cast<int>(i);
  return -1;
}

int Cluster::gpu_count() const {
  int n = 0;
  for (const Node& node : nodes) n += static_cast<int>(node.gpus.size());
  return n;
}

std::string ValidateCluster(const Cluster& cluster) {
  std::set<std::string> names;
  for (const GpuModel& m : cluster.models)
    if (!names.insert(m.name).second) return "gpuModels: model \"" + m.name + "\" declared twice";
  const std::set<std::string> racks(cluster.racks.begin(), cluster.racks.end());
  names.clear();
  for (const Node& node : cluster.nodes) {
    const std::string where = "node \"" + node.name + "\"";
    if (node.name.empty()) return "nodes: a node has no name; give every node a unique name";
    if (!names.insert(node.name).second)
      return where + ": declared twice; node names must be unique";
    if (!node.rack.empty() && !racks.count(node.rack))
      return where + ": rack \"" + node.rack + "\" is not declared under racks";
    if (node.cpu_milli < 0 || node.memory_mib < 0)
      return where + ": cpuMilli and memoryMiB must not be negative";
    for (size_t s = 0; s < node.switches.size(); ++s)
      if (node.switches[s].socket < 0 ||
          node.switches[s].socket >= static_cast<int>(node.sockets.size()))
        return where + ": PCIe switch " + std::to_string(s) + " is under socket " +
               std::to_string(node.switches[s].socket) + ", which the node does not have";
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const Gpu& gpu = node.gpus[g];
      const std::string gwhere = where + " GPU " + std::to_string(g);
      const GpuModel* model = cluster.FindModel(gpu.model);
      if (!model) return gwhere + ": model \"" + gpu.model + "\" is not declared under gpuModels";
      if (gpu.pcie_switch < 0 || gpu.pcie_switch >= static_cast<int>(node.switches.size()))
        return gwhere + ": PCIe switch " + std::to_string(gpu.pcie_switch) + " does not exist";
      if (gpu.mig_enabled && !model->mig_capable())
        return gwhere + ": MIG is enabled but model \"" + gpu.model +
               "\" has no MIG profiles; set mig: builtin or list its profiles";
      if (!gpu.mig_layout.empty()) {
        if (!gpu.mig_enabled) return gwhere + ": a MIG layout is given but MIG is not enabled";
        std::vector<MigInstance> placed;
        const std::string err = PlaceMigLayout(model->mig_profiles, gpu.mig_layout, &placed);
        if (!err.empty()) return gwhere + ": " + err;
      }
    }
  }
  return "";
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace berth
