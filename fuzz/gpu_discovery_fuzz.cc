// What the node agent reads to learn its host (agent/gpu_discovery.h, agent/host_topology.h):
// nvidia-smi's --query-gpu CSV, `-L` list and `topo -m` matrix, and the /sys tree of CPUs and
// NUMA nodes. The input is a tree (InputTree): files "query", "list", "topo" and "sys/...".
// Each is read on its own; when all are taken, the Node built from them must be a valid
// cluster (BuildNode promises it) that CompareNodes finds equal to itself. Seeds: the hosts of
// tests/data/agent/.
#include <optional>

#include "agent/gpu_discovery.h"
#include "agent/host_topology.h"
#include "core/node_comparison.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string root = berth::InputTree(data, size);
  std::optional<berth::GpuQuery> query;
  std::optional<berth::GpuList> list;
  std::optional<berth::GpuTopology> topology;
  std::optional<berth::HostTopology> host;
  berth::LoadOrRefuse("nvidia-smi --query-gpu", [&] {
    query = berth::ParseGpuQuery(berth::FileContents(root + "/query"), "nvidia-smi --query-gpu");
  });
  berth::LoadOrRefuse("nvidia-smi -L", [&] {
    list = berth::ParseGpuList(berth::FileContents(root + "/list"), "nvidia-smi -L");
  });
  berth::LoadOrRefuse("nvidia-smi topo -m", [&] {
    topology = berth::ParseTopology(berth::FileContents(root + "/topo"), "nvidia-smi topo -m");
  });
  // sysfs files hold one value each: a refusal names the file, no line.
  try {
    host = berth::ReadHostTopology(root + "/sys");
  } catch (const berth::ConfigError& e) {
    const std::string message = e.what();
    if (message.compare(0, root.size() + 5, root + "/sys/") != 0 ||
        message.find(": ") == std::string::npos)
      berth::Finding("a refusal that names no file of the /sys tree: " + message);
  }
  if (!query || query->gpus.empty() || !list || !topology || !host) return 0;
  const berth::DiscoveredNode found = berth::BuildNode("host", *query, *topology, *host, &*list);
  berth::Cluster cluster;
  cluster.name = "host";
  cluster.models = found.models;
  cluster.nodes.push_back(found.node);
  if (const std::string why = berth::ValidateCluster(cluster); !why.empty())
    berth::Finding("BuildNode made an invalid node: " + why);
  if (const std::vector<std::string> differences = berth::CompareNodes(found.node, found.node);
      !differences.empty())
    berth::Finding("a node differs from itself: " + differences.front());
  return 0;
}
