#include "config/flat_node.h"

namespace berth {

Node MakeFlatNode(const std::string& name, int64_t cpu_milli, int64_t memory_mib, int gpu_count,
                  const std::string& model) {
  Node node;
  node.name = name;
  node.cpu_milli = cpu_milli;
  node.memory_mib = memory_mib;
  node.sockets = {Socket{.cpus = {}, .memory_mib = memory_mib}};
  node.switches = {PcieSwitch{.socket = 0}};
  Gpu gpu;
  gpu.model = model;
  node.gpus.assign(gpu_count, gpu);
  return node;
}

}  // namespace berth
