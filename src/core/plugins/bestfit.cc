// bestfit score (the paper simulator's BestFitScore, with the default "best" GPU selection).
//
// Reference (pkg/simulator/plugin/best_fit_score.go): leftover = 0.5 x (free CPU milli - CPU
// milli) / 128000 + 0.5 x (free GPU milli of the node - GPU milli x GPUs) / 8000, lower is
// better; the score is int64((1 - leftover) x 100); a node short of either resource scores 0.
// The scores of all nodes are then min-max normalized to 0..100 (NormalizeScore), which keeps
// their order and their ties (they are integers at most 100 apart). The GPU inside the node
// is the best fit one (the fitting GPU with the least free milli, the lowest index among
// equals; for whole GPUs the first free ones).
//
// berth: the same integer score, clamped to 0..100, without the min-max normalization (a
// candidate is scored alone; with bestfit as the only score the choice is the same, combined
// with other plugins the weights act on the raw score). The node's share candidates other than
// the best fit GPU score kOtherGpuPenalty less (gpu_choice.h). A MIG instance counts no GPU
// milli (the reference has no MIG).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/plugins/factories.h"
#include "core/plugins/gpu_choice.h"

namespace berth {
namespace {

class BestFitScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    const Demand& d = ctx.group->demand;
    const int64_t free_cpu = alloc.node_resources().free_cpu_milli(c.node);
    const int64_t free_gpu = NodeFreeGpuMilli(alloc, c.node);
    const int64_t want_gpu = d.gpu_milli > 0 ? d.gpu_milli : int64_t{1000} * d.gpus;
    if (free_cpu < d.cpu_milli || free_gpu < want_gpu) return 0;
    const double leftover = static_cast<double>(free_cpu - d.cpu_milli) / kMaxSpecCpuMilli * 0.5 +
                            static_cast<double>(free_gpu - want_gpu) / kMaxSpecGpuMilli * 0.5;
    const double score = static_cast<double>(static_cast<int64_t>((1.0 - leftover) * 100));
    return BestFitCandidateScore(alloc, d, c, std::clamp(score, 0.0, 100.0));
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeBestFitScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<BestFitScore>();
}

}  // namespace berth
