// qos-balance score: places jobs by QoS class (kube's Guaranteed / Burstable / BestEffort).
//
// load = the node's allocated fraction once the replica is placed (resource_fraction.h), with
// the per-resource weights of the job's class from Policy::qos_weights (default cpu = memory =
// gpu = 1).
//  - guaranteed: score = 100 x load (MostAllocated). A guaranteed job uses what it asked for and
//    nothing more, so packing it costs it nothing, and it keeps whole nodes free.
//  - burstable and best-effort: score = 100 x (1 - load) (LeastAllocated). These jobs use more
//    than they declare whenever they can; spread over emptier nodes they find that headroom and
//    interfere less with each other, and an eviction under pressure hits fewer of them at once.
#include <memory>
#include <string>

#include "core/plugins/factories.h"
#include "core/plugins/resource_fraction.h"

namespace berth {
namespace {

class QosBalanceScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    ResourceWeights weights{1, 1, 1};
    if (ctx.policy != nullptr) {
      auto it = ctx.policy->qos_weights.find(ctx.job->qos);
      if (it != ctx.policy->qos_weights.end())
        weights = {it->second.gpu, it->second.cpu, it->second.memory};
    }
    if (weights.gpu + weights.cpu + weights.memory <= 0) return 50;  // no resource counts
    const double load = AllocatedFractionAfter(ctx, c, weights);
    return 100.0 * (ctx.job->qos == QosClass::kGuaranteed ? load : 1.0 - load);
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeQosBalanceScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<QosBalanceScore>();
}

}  // namespace berth
