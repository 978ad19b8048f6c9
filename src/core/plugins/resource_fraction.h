// The load measure binpack, spread and qos-balance share (kube-scheduler NodeResourcesFit's
// MostAllocated / LeastAllocated): the weighted mean over GPU, CPU and memory of the fraction of
// a node that would be allocated once the candidate replica is placed.
#pragma once

#include <string>

#include "core/plugins/plugin.h"
#include "core/policy.h"

namespace berth {

struct ResourceWeights {
  double gpu = 3, cpu = 1, memory = 1;
};

// Reads the "gpu", "cpu" and "memory" parameters over `defaults`; false with `error` set for an
// unknown parameter, a negative weight, or weights that sum to 0.
bool ParseResourceWeights(const PluginConfig& config, ResourceWeights defaults,
                          ResourceWeights* out, std::string* error);

// 0..1. Per resource: (allocated + the replica's demand) / capacity, clamped to 1; GPUs count in
// GPU-equivalents (a share is milli / 1000, a MIG instance its compute slices / 7) over the
// node's usable GPUs. A resource the node lacks (capacity 0) is left out of the mean; 0 when the
// node has none of them.
double AllocatedFractionAfter(const PlacementContext& ctx, const Candidate& c,
                              const ResourceWeights& weights);

}  // namespace berth
