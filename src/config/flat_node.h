// A node without declared topology: what berth knows of a host listed only by its totals.
#pragma once

#include <cstdint>
#include <string>

#include "core/cluster.h"

namespace berth {

// One socket without a CPU list holding all the memory, one PCIe switch, `gpu_count` GPUs of
// `model`, no NVLink and no MIG; shape "".
Node MakeFlatNode(const std::string& name, int64_t cpu_milli, int64_t memory_mib, int gpu_count,
                  const std::string& model);

}  // namespace berth
