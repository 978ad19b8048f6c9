// spread score (kube-scheduler NodeResourcesFit, LeastAllocated, its default): 100 x (1 - the
// weighted mean of the node's allocated fraction of GPU, CPU and memory once the replica is
// placed; see resource_fraction.h). Emptier nodes score higher, so replicas spread out and
// contend less for host CPU, memory bandwidth and PCIe. Parameters: weights "gpu" (default 3),
// "cpu" (1), "memory" (1).
#include <memory>
#include <string>

#include "core/plugins/factories.h"
#include "core/plugins/resource_fraction.h"

namespace berth {
namespace {

class SpreadScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  explicit SpreadScore(ResourceWeights weights) : weights_(weights) {}
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    return 100.0 * (1.0 - AllocatedFractionAfter(ctx, c, weights_));
  }

 private:
  ResourceWeights weights_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeSpreadScore(const PluginConfig& config, std::string* error) {
  ResourceWeights weights;
  if (!ParseResourceWeights(config, ResourceWeights{}, &weights, error)) return nullptr;
  return std::make_unique<SpreadScore>(weights);
}

}  // namespace berth
