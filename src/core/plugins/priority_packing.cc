// priority-packing score: work of one priority keeps together. Preemption takes the lowest
// priority first; when that work is scattered over every node, preempting it frees a little
// of each node and the preemptor still finds no whole node (peer schedulers' users ask for
// exactly this). With same and other the GPU-equivalents on the node held by running jobs of
// the job's own priority and of other priorities:
//
//   score = 50 + 50 x (same - other) / (same + other),   an idle node: 50
//
// so a replica joins its own priority's nodes, then idle ones, and mixes last. Without the
// engine's per-node counts (PlacementContext::gpus_by_priority, e.g. in the packing
// simulator) every candidate scores 50 (neutral).
#include <map>
#include <memory>
#include <string>

#include "core/plugins/factories.h"

namespace berth {
namespace {

class PriorityPackingScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    if (ctx.gpus_by_priority == nullptr || ctx.job == nullptr ||
        c.node >= static_cast<int>(ctx.gpus_by_priority->size()))
      return 50;
    double same = 0, other = 0;
    for (const auto& [priority, gpus] : (*ctx.gpus_by_priority)[c.node])
      (priority == ctx.job->priority ? same : other) += gpus;
    if (same + other <= 0) return 50;
    return 50 + 50 * (same - other) / (same + other);
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakePriorityPackingScore(const PluginConfig& config,
                                                      std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<PriorityPackingScore>();
}

}  // namespace berth
