#include "core/job.h"

namespace berth {

const char* QosName(QosClass qos) {
  switch (qos) {
    case QosClass::kGuaranteed:
      return "guaranteed";
    case QosClass::kBurstable:
      return "burstable";
    case QosClass::kBestEffort:
      return "best-effort";
  }
  return "?";
}

bool ParseQos(const std::string& text, QosClass* qos) {
  if (text == "guaranteed")
    *qos = QosClass::kGuaranteed;
  else if (text == "burstable")
    *qos = QosClass::kBurstable;
  else if (text == "best-effort" || text == "besteffort")
    *qos = QosClass::kBestEffort;
  else
    return false;
  return true;
}

int TotalReplicas(const JobSpec& spec) {
  int n = 0;
  for (const TaskGroup& g : spec.groups) n += g.replicas;
  return n;
}

double GpuEquivalents(const Cluster& cluster, const Demand& demand) {
  if (demand.gpus > 0) return demand.gpus;
  if (demand.gpu_milli > 0) return demand.gpu_milli / 1000.0;
  if (demand.mig_profile.empty()) return 0;
  // A MIG slice counts by its compute slices: 7g is a whole GPU, 1g a seventh.
  for (const GpuModel& m : cluster.models) {
    const int p = FindMigProfile(m.mig_profiles, demand.mig_profile);
    if (p >= 0) return m.mig_profiles[p].compute_slices / static_cast<double>(kMigComputeSlices);
  }
  return 0;
}

void SetGpuDemand(int gpus, int milli, Demand* demand) {
  demand->gpus = 0;
  demand->gpu_milli = 0;
  if (gpus <= 0 || milli <= 0) return;
  if (gpus == 1 && milli < 1000)
    demand->gpu_milli = milli;
  else
    demand->gpus = gpus;
}

}  // namespace berth
