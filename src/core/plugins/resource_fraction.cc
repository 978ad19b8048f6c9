#include "core/plugins/resource_fraction.h"

#include <algorithm>

#include "core/job.h"
#include "core/plugins/factories.h"

namespace berth {
namespace {

// GPU-equivalents a GPU holds: 1 when whole, milli / 1000 when shared, compute slices / 7 for
// MIG instances.
double GpuUsed(const Allocator& alloc, int node, int gpu) {
  const Gpu& g = alloc.cluster().nodes[node].gpus[gpu];
  if (g.mig_enabled && !alloc.gpu_free(node, gpu))
    return alloc.mig_layout(node, gpu).used_compute() / static_cast<double>(kMigComputeSlices);
  return alloc.gpu_used_milli(node, gpu) / 1000.0;
}

}  // namespace

bool ParseResourceWeights(const PluginConfig& config, ResourceWeights defaults,
                          ResourceWeights* out, std::string* error) {
  if (!CheckParams(config, {"gpu", "cpu", "memory"}, error)) return false;
  out->gpu = Param(config, "gpu", defaults.gpu);
  out->cpu = Param(config, "cpu", defaults.cpu);
  out->memory = Param(config, "memory", defaults.memory);
  // A bound keeps the weighted sums finite and a typo (1e308) from drowning other scores.
  for (double w : {out->gpu, out->cpu, out->memory})
    if (!(w >= 0 && w <= kMostWeight)) {
      if (error) *error = "weights gpu, cpu and memory must be from 0 to 1e6";
      return false;
    }
  if (out->gpu + out->cpu + out->memory <= 0) {
    if (error) *error = "weights gpu, cpu and memory must not all be 0";
    return false;
  }
  return true;
}

double AllocatedFractionAfter(const PlacementContext& ctx, const Candidate& c,
                              const ResourceWeights& weights) {
  const Allocator& alloc = *ctx.alloc;
  const NodeResources& res = alloc.node_resources();
  const Demand& demand = ctx.group->demand;
  double sum = 0, weight_sum = 0;
  auto add = [&](double weight, double capacity, double used) {
    if (capacity <= 0 || weight <= 0) return;
    sum += weight * std::clamp(used / capacity, 0.0, 1.0);
    weight_sum += weight;
  };

  double gpu_capacity = 0, gpu_used = 0;
  const int gpu_count = static_cast<int>(alloc.cluster().nodes[c.node].gpus.size());
  for (int g = 0; g < gpu_count; ++g) {
    if (!alloc.gpu_usable(c.node, g)) continue;
    gpu_capacity += 1;
    gpu_used += GpuUsed(alloc, c.node, g);
  }
  const double replica = c.gpus.empty() ? 0 : GpuEquivalents(alloc.cluster(), demand);
  add(weights.gpu, gpu_capacity, gpu_used + replica);
  add(weights.cpu, static_cast<double>(res.cpu_milli(c.node)),
      static_cast<double>(res.cpu_milli(c.node) - res.free_cpu_milli(c.node) + demand.cpu_milli));
  add(weights.memory, static_cast<double>(res.memory_mib(c.node)),
      static_cast<double>(res.memory_mib(c.node) - res.free_memory_mib(c.node) +
                          demand.memory_mib));
  return weight_sum > 0 ? sum / weight_sum : 0;
}

}  // namespace berth
