#include "sim/trace.h"

#include "core/job.h"

namespace berth {

Demand TraceDemand(const TracePod& pod) {
  Demand d;
  SetGpuDemand(pod.gpus, pod.gpu_milli, &d);
  d.models = pod.models;
  d.cpu_milli = pod.cpu_milli;
  d.memory_mib = pod.memory_mib;
  return d;
}

}  // namespace berth
