// What the control plane's tests share: a small cluster to run it on.
#pragma once

#include <string>

#include "config/cluster_file.h"

namespace berth {

// `nodes` DGX-like nodes of 8 GPUs, dgx-0 .. dgx-(nodes-1).
inline Cluster Dgx(int nodes) {
  return ParseClusterYaml(
      "name: t\n"
      "gpuModels: [{name: A100, memoryMiB: 81920}]\n"
      "nodeShapes:\n"
      "  s: {gpuModel: A100, sockets: [{cpus: \"0-63\", memoryMiB: 1048576, switches: [4, 4]}]}\n"
      "nodes: [{namePrefix: dgx-, count: " +
          std::to_string(nodes) + ", shape: s}]\n",
      "t.yaml");
}

}  // namespace berth
