// One replica's placement as JSON ({"node", "gpus", "gpuMilli", "gpuMemoryMiB", "migProfile",
// "migStart"}), by node name: how the server stores a placed job and the Kubernetes extender
// writes it onto a pod, so that either adopts it again exactly after a restart.
#pragma once

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/cluster.h"

namespace berth {

nlohmann::json ReplicaPlacementJson(const Cluster& cluster, const ReplicaPlacement& placement);
// False when the JSON is not one, or names a node or GPU `cluster` does not have.
bool ReadReplicaPlacement(const Cluster& cluster, const nlohmann::json& json,
                          ReplicaPlacement* placement);

}  // namespace berth
