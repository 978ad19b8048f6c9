// A Kubernetes node as a node of berth's cluster model, with no berth agent on it: the shape
// comes from NVIDIA's GPU feature discovery labels and the node's allocatable resources, and
// the topology the labels do not carry (sockets, PCIe switches, NVLink) from an optional berth
// cluster file's node of the same name.
//
// Labels read (GPU feature discovery): nvidia.com/gpu.product, nvidia.com/gpu.count,
// nvidia.com/gpu.memory (MiB), nvidia.com/mig.strategy (none | single | mixed); berth.io/rack
// (else topology.kubernetes.io/zone) names the rack. Allocatable nvidia.com/gpu, when present,
// is the GPU count kubelet offers and wins over the label. A node without a declared topology
// gets one socket holding every CPU and one PCIe switch; an SXM product (NVLink) puts all its
// GPUs in one NVLink domain.
// Annotation berth.io/gpu-uuids ("GPU-a,GPU-b,...", in index order; written by
// `berth device-plugin`) names the GPUs, so that bindings can name them by UUID.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/cluster.h"

namespace berth {

constexpr int kMaxK8sNodes = 20000;
constexpr int kMaxGpusPerK8sNode = 64;

struct K8sNode {
  Node node;
  std::vector<std::string> gpu_uuids;  // empty: unknown, bindings name GPUs by index
  bool unschedulable = false;          // spec.unschedulable (kubectl cordon)
  bool ready = true;                   // the Ready condition is not False/Unknown
};

// Reads a v1.Node; false with `why` naming the field. The GPU model it uses is added to
// `models` when new (memory from the label, MIG profiles from berth's built-in tables).
bool ReadK8sNode(const nlohmann::json& object, const Cluster* declared,
                 std::vector<GpuModel>* models, K8sNode* node, std::string* why);

// The cluster of `nodes` (in name order; racks in order of first use); "" or why it is invalid.
std::string BuildK8sCluster(const std::map<std::string, K8sNode>& nodes,
                            const std::vector<GpuModel>& models, Cluster* cluster);

}  // namespace berth
