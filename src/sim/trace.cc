#include "sim/trace.h"

#include "core/job.h"

namespace berth {

GpuAsk GpuAskOf(const TracePod& pod) {
  if (pod.gpus <= 0 || pod.gpu_milli <= 0) return GpuAsk::kNone;
  if (pod.gpus > 1) return GpuAsk::kMulti;
  return pod.gpu_milli < 1000 ? GpuAsk::kShare : GpuAsk::kWhole;
}

Demand TraceDemand(const TracePod& pod) {
  Demand d;
  SetGpuDemand(pod.gpus, pod.gpu_milli, &d);
  d.models = pod.models;
  d.cpu_milli = pod.cpu_milli;
  d.memory_mib = pod.memory_mib;
  return d;
}

}  // namespace berth
