#include "config/placement_json.h"

namespace berth {

nlohmann::json ReplicaPlacementJson(const Cluster& cluster, const ReplicaPlacement& r) {
  return {{"node", cluster.nodes[r.node].name},
          {"gpus", r.gpus},
          {"gpuMilli", r.gpu_milli},
          {"gpuMemoryMiB", r.gpu_memory_mib},
          {"migProfile", r.mig_profile},
          {"migStart", r.mig_start}};
}

bool ReadReplicaPlacement(const Cluster& cluster, const nlohmann::json& json,
                          ReplicaPlacement* out) {
  ReplicaPlacement p;
  try {
    p.node = cluster.FindNode(json.at("node").get<std::string>());
    if (p.node < 0) return false;
    const Node& node = cluster.nodes[p.node];
    p.gpus = json.at("gpus").get<std::vector<int>>();
    for (int g : p.gpus)
      if (g < 0 || g >= static_cast<int>(node.gpus.size())) return false;
    p.gpu_milli = json.at("gpuMilli").get<int>();
    p.gpu_memory_mib = json.at("gpuMemoryMiB").get<int64_t>();
    p.mig_profile = json.at("migProfile").get<int>();
    p.mig_start = json.at("migStart").get<int>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  *out = std::move(p);
  return true;
}

}  // namespace berth
