// gpu-packing score (the paper simulator's GpuPackingScore, with the default "best" GPU
// selection): prefer GPUs already in use, then free GPUs on nodes already in use, then empty
// nodes.
//
// Reference (pkg/simulator/plugin/gpu_packing_score.go, getPackingScore), for a pod with GPU
// milli m per GPU on n GPUs, F the node's fully free GPUs out of N:
//  - F == N (no GPU of the node in use): max(33 - F, F);
//  - else take the GPUs in ascending order of free milli (index order among equals) that have
//    m free, until n are taken; if some of them are fully free: max(50 - those, 33);
//  - else (only partly used GPUs): max(100 - sum(free_i * 100 / 1000) / 10, 50), in integer
//    arithmetic over the GPUs taken;
// a pod without GPU milli (CPU-only) scores 0 everywhere; a node where the pod does not fit
// scores 0. The GPU inside the node is the best fit one (the fitting GPU with the least free
// milli, the lowest index among equals; for whole GPUs the first free ones).
//
// berth: the same integer score; the node's share candidates other than the best fit GPU
// score kOtherGpuPenalty less (gpu_choice.h). A GPU that is bad, on a cordoned node or
// MIG-enabled has no free milli and is not fully free; a MIG instance, having no GPU milli,
// scores 0 as a CPU-only pod does (the reference has no MIG).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/plugins/factories.h"
#include "core/plugins/gpu_choice.h"

namespace berth {
namespace {

// getPackingScore over the free milli of a node's GPUs (in GPU index order).
int64_t PackingScore(const std::vector<int>& free, int gpus_wanted, int milli) {
  const int n = static_cast<int>(free.size());
  const int fully_free = static_cast<int>(std::count(free.begin(), free.end(), 1000));
  if (fully_free == n) return std::max<int64_t>(100 / 3 - fully_free, fully_free);
  std::vector<std::pair<int, int>> order;  // (free milli, index): a stable ascending sort
  for (int g = 0; g < n; ++g) order.push_back({free[g], g});
  std::sort(order.begin(), order.end());
  int wanted = gpus_wanted;
  int fully_free_used = 0;
  int64_t free_percent_sum = 0;
  for (const auto& [milli_free, g] : order) {
    if (wanted == 0) break;
    if (milli_free < milli) continue;
    --wanted;
    if (milli_free == 1000) ++fully_free_used;
    free_percent_sum += int64_t{milli_free} * 100 / 1000;
  }
  if (wanted != 0) return 0;
  if (fully_free_used > 0) return std::max<int64_t>(100 / 2 - fully_free_used, 100 / 3);
  return std::max<int64_t>(100 - free_percent_sum / 10, 100 / 2);
}

class GpuPackingScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    const Demand& d = ctx.group->demand;
    const int milli = d.gpu_milli > 0 ? d.gpu_milli : (d.gpus > 0 ? 1000 : 0);
    if (milli <= 0) return 0;
    const std::vector<Gpu>& gpus = alloc.cluster().nodes[c.node].gpus;
    std::vector<int> free(gpus.size(), 0);
    for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
      if (!gpus[g].mig_enabled && alloc.gpu_usable(c.node, g))
        free[g] = 1000 - alloc.gpu_used_milli(c.node, g);
    const int64_t score = PackingScore(free, d.gpu_milli > 0 ? 1 : d.gpus, milli);
    return BestFitCandidateScore(alloc, d, c,
                                 static_cast<double>(std::clamp<int64_t>(score, 0, 100)));
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeGpuPackingScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<GpuPackingScore>();
}

}  // namespace berth
