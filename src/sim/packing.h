// Packing mode: the FGD paper's protocol (docs/simulator.md). Pods arrive one at
// a time, in a seeded random order, inflated with random clones up to `tune` x the cluster's
// GPU capacity; each is placed online by the policy or dropped. No departures, no queue, no
// retry, no migration: the same engine a server runs, on an empty cluster whose nodes are in a
// seeded random order (the reference's tie order; ties go to the first node).
//
// Metrics are sampled by arrived workload (requested GPU milli so far over capacity, in whole
// percent): the GPU allocation ratio and FGD's fragmentation amount, both in %.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/fragmentation.h"
#include "core/policy.h"
#include "sim/trace.h"

namespace berth {

struct PackingCurve {
  std::vector<double> alloc_ratio;  // index: arrived %, 0..round(100 x tune)
  std::vector<double> frag_amount;
  int pods = 0, placed = 0;
};

struct PackingResult {
  std::string policy;
  std::vector<PackingCurve> seeds;
  PackingCurve mean;
  double unallocated_gpus_at_end = 0;  // GPUs left unallocated at the last arrived point
};

// The workload's typical pods as the paper's runs computed them.
std::vector<TypicalPod> WorkloadTypicalPods(const std::vector<TracePod>& pods);

// One seed: order, inflation and placement. `progress` gets the fraction of pods done.
PackingCurve RunPackingSeed(const Cluster& cluster, const std::vector<TracePod>& pods,
                            const Policy& policy, uint64_t seed, double tune,
                            const std::vector<TypicalPod>& typical,
                            const std::function<void(double)>& progress);

// Every seed, and their mean.
PackingResult RunPacking(const Cluster& cluster, const std::vector<TracePod>& pods,
                         const Policy& policy, const std::vector<uint64_t>& seeds, double tune,
                         const std::function<void(double)>& progress);

}  // namespace berth
