// What the GPUs are really doing, as observed (e.g. DCGM exporter): fed into the engine by
// adapters, read by plugins. Unknown values are negative.
#pragma once

#include <string>
#include <vector>

namespace berth {

struct GpuTelemetry {
  double fb_used_mib = -1;   // DCGM_FI_DEV_FB_USED
  double util_percent = -1;  // DCGM_FI_DEV_GPU_UTIL
};

struct Telemetry {
  std::vector<std::vector<GpuTelemetry>> gpus;        // [node][gpu]
  std::vector<std::vector<std::string>> node_images;  // images already on each node
};

}  // namespace berth
