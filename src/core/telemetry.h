// What the GPUs are really doing, as observed (e.g. DCGM exporter): fed into the engine by
// adapters, read by plugins. Unknown values are negative.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace berth {

struct GpuTelemetry {
  double fb_used_mib = -1;   // DCGM_FI_DEV_FB_USED
  double util_percent = -1;  // DCGM_FI_DEV_GPU_UTIL
};

// A container image's layer: its content digest (sha256:...) and size, 0 when unknown.
struct ImageLayer {
  std::string digest;
  int64_t bytes = 0;
};

struct Telemetry {
  std::vector<std::vector<GpuTelemetry>> gpus;        // [node][gpu]
  std::vector<std::vector<std::string>> node_images;  // images already on each node, by name
  // What a node already has of an image it lacks: the layers of every image some node holds
  // (by NormalizedImageName), and each node's layers by digest. Images share layers (a base, a
  // framework), so a node without an image may hold most of its bytes.
  std::map<std::string, std::vector<ImageLayer>> image_layers;
  std::vector<std::set<std::string>> node_layers;  // [node]
};

}  // namespace berth
