// A synthetic workload for replay: Poisson arrivals sized to a target load, job sizes from a
// typical training mix (most jobs small, a few multi-node gangs), log-normal durations, jobs
// spread over queues by weight.
//
// The load is offered while the jobs arrive: arrival rate x mean GPUs x mean duration equals
// `load` x the cluster's GPUs, counting sizes as generated (a gang larger than the cluster is cut
// to it, gangs are whole nodes). The replay measures utilization over the same window.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/scheduler.h"
#include "sim/replay.h"

namespace berth {

struct SyntheticOptions {
  int jobs = 1000;
  double load = 0.9;  // mean GPU demand as a fraction of the cluster's GPUs
  double median_duration_s = 3600;
  double duration_sigma = 1.0;  // of the log-normal
  uint64_t seed = 1;
};

std::vector<ReplayJob> SyntheticJobs(const Cluster& cluster, const std::vector<QueueSpec>& queues,
                                     const SyntheticOptions& options);

}  // namespace berth
