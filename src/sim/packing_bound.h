// How far packing mode's policies are from the best possible packing of the same arrivals.
//
// Two references, for the pods that arrived up to a point of a seed's sequence:
// - the upper bound: no policy, online or offline, allocates more GPU milli. It is a fluid
//   relaxation: pods grouped by shape, nodes by shape (GPU model and count, CPU, memory), a pod
//   shape may flow into a node shape one such pod would fit on empty, and a node shape holds at
//   most its GPU milli; the bound is the maximum flow. Any real packing is such a flow, so it is
//   a true bound; it ignores how pods split GPUs and CPU inside a node, so it is loose.
// - the offline best: the best of a few offline heuristics that see every arrived pod at once:
//   largest first placed by best-fit, largest first by FGD, most GPU per CPU first by FGD, and
//   FGD in arrival order followed by the pods it dropped, largest first (the plain arrival
//   order is one of them, so it is never below fgd). It is a packing that exists, so it is a
//   lower bound on the best packing, not a bound on online policies: a reference for what full
//   knowledge buys at least.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/fragmentation.h"
#include "sim/trace.h"

namespace berth {

// The fluid upper bound on the GPU milli of `pods` that `cluster` can hold.
int64_t FluidUpperBoundMilli(const Cluster& cluster, const std::vector<const TracePod*>& pods);

struct OfflinePacking {
  int64_t allocated_milli = 0;
  std::string heuristic;  // the best one's name
};
// The best offline heuristic's packing of `pods` on an empty `cluster`.
OfflinePacking BestOfflinePacking(const Cluster& cluster, const std::vector<const TracePod*>& pods,
                                  const std::vector<TypicalPod>& typical);

// Both references at arrived workload points (in %), in % of the GPU capacity, means over seeds.
struct PackingReference {
  std::vector<int> points;
  std::vector<double> upper_bound, offline_best;  // per point
  std::vector<std::string> offline_heuristic;     // per point: the best one on most seeds
};
PackingReference RunPackingReference(const Cluster& cluster, const std::vector<TracePod>& pods,
                                     const std::vector<uint64_t>& seeds, double tune,
                                     const std::vector<int>& points);

}  // namespace berth
