// Jobs of a workload trace, as the simulator replays them. Plain data; loaders in src/config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/allocator.h"

namespace berth {

// One pod (or job) of a trace. Times are seconds from the trace start; negative: unknown.
struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;       // GPUs per pod
  int gpu_milli = 0;  // per GPU: 1000 for whole GPUs, less for a share of one GPU, 0 CPU-only
  std::vector<std::string> models;  // allowed GPU models; empty: any
  std::string qos;
  std::string workload;  // the model trained (e.g. "vgg16"), when the trace names it
  double submit_time = -1;
  double start_time = -1;
  double end_time = -1;
  double duration = -1;  // run time on ideal placement, when the trace gives it
  int line = 0;          // of its row in the trace file, for messages about the whole trace
};

// What a pod asks of GPUs: none (CPU only), several whole GPUs, one whole GPU, or a share of one.
enum class GpuAsk { kNone, kMulti, kWhole, kShare };
GpuAsk GpuAskOf(const TracePod& pod);

// What one pod asks the allocator for: its GPUs (whole, or a share of one), models, CPU, memory.
Demand TraceDemand(const TracePod& pod);

}  // namespace berth
