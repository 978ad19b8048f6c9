// This machine as a node of berth's cluster model, for `berth agent` and `berth up`: its GPUs
// found by running nvidia-smi (gpu_discovery.h parses what it prints), or, on a host without
// GPUs, simulated ones. Runs commands and reads /sys: an adapter, not core.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_discovery.h"
#include "agent/host_topology.h"
#include "core/cluster.h"

namespace berth {

// The host's GPUs and topology from NVML (nvml.h) when libnvidia-ml.so.1 loads and finds GPUs,
// else from nvidia-smi; `*why` says which source answered and why NVML did not. nullopt when
// neither finds a GPU (`*why` says why). Throws ConfigError when nvidia-smi's output does not
// parse.
std::optional<DiscoveredNode> DiscoverGpus(const std::string& node_name, std::string* why);

// A one-node cluster of this host with `gpus` simulated GPUs (model "simulated", 16 GiB): the
// host's NUMA nodes as sockets, two GPUs a PCIe switch, switches dealt round the sockets. The
// node carries the label simulated=true.
Cluster SimulatedCluster(const std::string& node_name, int gpus, const HostTopology& host);

// UUIDs for simulated GPUs, "GPU-sim-NODE-INDEX": named like real ones, saying what they are.
std::vector<std::string> SimulatedUuids(const std::string& node_name, size_t gpus);

// A cluster of just `discovered` (berth up on a GPU host).
Cluster DiscoveredCluster(const DiscoveredNode& discovered);

// The GPU flags of a first `berth run` that fits the empty `node` (berth up prints it): "--gpus
// 2", "--gpus 1" on a one-GPU host, or "--mig PROFILE" (its smallest) when every GPU is in MIG
// mode; `models` gives MIG profiles for GPUs berth carves on demand.
std::string FirstRunGpuFlags(const Node& node, const std::vector<GpuModel>& models);

// The host's name as a node name: letters, digits and dashes ("local" when it has none).
std::string HostNodeName();

}  // namespace berth
