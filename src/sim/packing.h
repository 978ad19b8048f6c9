// Packing mode: the FGD paper's protocol (docs/simulator.md). Pods arrive one at
// a time, in a seeded random order, inflated with random clones up to `tune` x the cluster's
// GPU capacity; each is placed online by the policy or dropped. No departures, no queue, no
// retry, no migration: the same engine a server runs, on an empty cluster whose nodes are in a
// seeded random order (the reference's tie order; ties go to the first node).
//
// Metrics are sampled by arrived workload (requested GPU milli so far over capacity, in whole
// percent): the GPU allocation ratio and FGD's fragmentation amount, both in %.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cluster.h"
#include "core/fragmentation.h"
#include "core/job.h"
#include "core/placement.h"
#include "core/policy.h"
#include "sim/trace.h"

namespace berth {

struct PackingCurve {
  std::vector<double> alloc_ratio;  // index: arrived %, 0..round(100 x tune)
  std::vector<double> frag_amount;
  int pods = 0, placed = 0;
  // GPUs asked by the pods turned away up to the last point: multi-GPU, one whole GPU, a share.
  std::array<double, 3> dropped_gpus{};
};

struct PackingResult {
  std::string policy;
  std::vector<PackingCurve> seeds;
  PackingCurve mean;
  double unallocated_gpus_at_end = 0;  // GPUs left unallocated at the last arrived point
};

// The workload's typical pods as the paper's runs computed them.
std::vector<TypicalPod> WorkloadTypicalPods(const std::vector<TracePod>& pods);

// What one seed offers: the pods in arrival order (by name, shuffled, then inflated with clones
// up to `tune` x the GPU capacity) and the cluster with its nodes in the seed's order.
struct PackingArrivals {
  std::vector<const TracePod*> order;  // into the pods given
  Cluster cluster;
};
PackingArrivals MakePackingArrivals(const Cluster& cluster, const std::vector<TracePod>& pods,
                                    uint64_t seed, double tune);

// Places pods one at a time on an empty `cluster` (which must outlive it) with `policy`, as
// packing mode does: no retry, no departures.
class PackingPlacer {
 public:
  PackingPlacer(const Cluster* cluster, const Policy& policy,
                const std::vector<TypicalPod>* typical);
  PackingPlacer(const PackingPlacer&) = delete;  // the context points into it
  PackingPlacer& operator=(const PackingPlacer&) = delete;
  bool Place(const TracePod& pod);  // false: dropped
  int64_t allocated_milli() const { return allocated_; }
  double frag_milli() const { return frag_total_; }  // FGD's fragmentation, in GPU milli

 private:
  Policy policy_;
  std::unique_ptr<PlacementPipeline> pipeline_;
  Allocator alloc_;
  FragmentationModel frag_;
  FragmentationTracker node_frag_;
  double frag_total_ = 0;
  int64_t allocated_ = 0;
  JobSpec job_;
  TaskGroup group_;
  PlacementContext ctx_;
};

// One seed: order, inflation and placement. `progress` gets the fraction of pods done.
PackingCurve RunPackingSeed(const Cluster& cluster, const std::vector<TracePod>& pods,
                            const Policy& policy, uint64_t seed, double tune,
                            const std::vector<TypicalPod>& typical,
                            const std::function<void(double)>& progress);

// Calls fn(0..n-1), each once, on one worker per core: seeds are independent runs.
void RunInParallel(size_t n, const std::function<void(size_t)>& fn);

// Every seed, and their mean.
PackingResult RunPacking(const Cluster& cluster, const std::vector<TracePod>& pods,
                         const Policy& policy, const std::vector<uint64_t>& seeds, double tune,
                         const std::function<void(double)>& progress);

}  // namespace berth
