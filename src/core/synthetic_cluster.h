// Generated clusters for benchmarks and tests: racks of DGX-like nodes (8 GPUs on 2 sockets x
// 2 PCIe switches x 2 GPUs, one NVSwitch domain, 128 CPUs, 2 TiB).
#pragma once

#include "core/cluster.h"

namespace berth {

// `nodes` DGX-like nodes in racks of `nodes_per_rack`, A100-80GB GPUs (MIG-capable); every
// `mig_every`-th node has MIG enabled (0: none).
Cluster SyntheticDgxCluster(int nodes, int nodes_per_rack, int mig_every);

}  // namespace berth
