#include "core/plugins/gpu_choice.h"

#include <algorithm>

namespace berth {
namespace {

bool IsShare(const Demand& demand, const Candidate& c) {
  return demand.gpu_milli > 0 && c.gpus.size() == 1;
}

int FreeMilli(const Allocator& alloc, int node, int gpu) {
  return 1000 - alloc.gpu_used_milli(node, gpu);
}

}  // namespace

bool ShareFitsGpu(const Allocator& alloc, const Demand& demand, int node, int gpu) {
  const Gpu& g = alloc.cluster().nodes[node].gpus[gpu];
  if (g.mig_enabled || !alloc.gpu_usable(node, gpu)) return false;
  if (!demand.models.empty() &&
      std::find(demand.models.begin(), demand.models.end(), g.model) == demand.models.end())
    return false;
  return FreeMilli(alloc, node, gpu) >= demand.gpu_milli;
}

bool IsBestFitChoice(const Allocator& alloc, const Demand& demand, const Candidate& c) {
  if (!IsShare(demand, c)) return true;
  const int mine = c.gpus[0];
  const int my_free = FreeMilli(alloc, c.node, mine);
  const int gpus = static_cast<int>(alloc.cluster().nodes[c.node].gpus.size());
  for (int g = 0; g < gpus; ++g) {
    if (g == mine || !ShareFitsGpu(alloc, demand, c.node, g)) continue;
    const int free = FreeMilli(alloc, c.node, g);
    if (free < my_free) return false;
    // Among shared GPUs with equal free milli the lowest index wins; fresh GPUs are all one.
    if (free == my_free && g < mine && free < 1000) return false;
  }
  return true;
}

double BestFitCandidateScore(const Allocator& alloc, const Demand& demand, const Candidate& c,
                             double node_score) {
  return IsBestFitChoice(alloc, demand, c) ? node_score : node_score - kOtherGpuPenalty;
}

void ShareWeight(const Allocator& alloc, const Demand& demand, const Candidate& c, int* gpus_here,
                 int* gpus_on_node) {
  *gpus_here = 1;
  *gpus_on_node = 1;
  if (!IsShare(demand, c)) return;
  const int gpus = static_cast<int>(alloc.cluster().nodes[c.node].gpus.size());
  int fitting = 0, fresh = 0;
  for (int g = 0; g < gpus; ++g) {
    if (!ShareFitsGpu(alloc, demand, c.node, g)) continue;
    ++fitting;
    if (FreeMilli(alloc, c.node, g) == 1000) ++fresh;
  }
  const bool mine_fresh = FreeMilli(alloc, c.node, c.gpus[0]) == 1000;
  *gpus_here = mine_fresh ? std::max(fresh, 1) : 1;
  *gpus_on_node = std::max(fitting, *gpus_here);
}

int64_t NodeFreeGpuMilli(const Allocator& alloc, int node) {
  int64_t free = 0;
  const std::vector<Gpu>& gpus = alloc.cluster().nodes[node].gpus;
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
    if (!gpus[g].mig_enabled && alloc.gpu_usable(node, g))
      free += 1000 - alloc.gpu_used_milli(node, g);
  return free;
}

}  // namespace berth
