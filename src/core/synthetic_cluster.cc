#include "core/synthetic_cluster.h"

#include <string>

namespace berth {

Cluster SyntheticDgxCluster(int nodes, int nodes_per_rack, int mig_every) {
  Cluster c;
  c.name = "synthetic-dgx-" + std::to_string(nodes);
  c.models.push_back({"A100-80GB", 81920, BuiltinMigProfiles("A100-80GB")});
  for (int i = 0; i < nodes; ++i) {
    const int rack = i / nodes_per_rack;
    if (i % nodes_per_rack == 0) c.racks.push_back("rack-" + std::to_string(rack));
    Node n;
    n.name = "dgx-" + std::to_string(i);
    n.shape = "dgx-a100";
    n.rack = c.racks.back();
    n.labels["rack"] = n.rack;
    n.cpu_milli = 128000;
    n.memory_mib = 2 * 1024 * 1024;
    for (int s = 0; s < 2; ++s) {
      Socket socket;
      for (int cpu = 0; cpu < 64; ++cpu) socket.cpus.push_back(s * 64 + cpu);
      socket.memory_mib = n.memory_mib / 2;
      n.sockets.push_back(socket);
      n.switches.push_back({s});
      n.switches.push_back({s});
    }
    const bool mig = mig_every > 0 && i % mig_every == mig_every - 1;
    if (mig) n.shape = "dgx-a100-mig";
    for (int g = 0; g < 8; ++g) {
      Gpu gpu;
      gpu.model = "A100-80GB";
      gpu.pcie_switch = g / 2;
      gpu.nvlink_domain = 0;
      gpu.mig_enabled = mig;
      n.gpus.push_back(gpu);
    }
    c.nodes.push_back(std::move(n));
  }
  return c;
}

}  // namespace berth
