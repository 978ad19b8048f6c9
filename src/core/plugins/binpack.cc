// binpack score (kube-scheduler NodeResourcesFit, MostAllocated): 100 x the weighted mean of the
// node's allocated fraction of GPU, CPU and memory once the replica is placed (see
// resource_fraction.h). Fuller nodes score higher, so work packs onto few nodes and whole nodes
// stay free for large jobs. Parameters: weights "gpu" (default 3), "cpu" (1), "memory" (1).
#include <memory>
#include <string>

#include "core/plugins/factories.h"
#include "core/plugins/resource_fraction.h"

namespace berth {
namespace {

class BinpackScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  explicit BinpackScore(ResourceWeights weights) : weights_(weights) {}
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    return 100.0 * AllocatedFractionAfter(ctx, c, weights_);
  }

 private:
  ResourceWeights weights_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeBinpackScore(const PluginConfig& config, std::string* error) {
  ResourceWeights weights;
  if (!ParseResourceWeights(config, ResourceWeights{}, &weights, error)) return nullptr;
  return std::make_unique<BinpackScore>(weights);
}

}  // namespace berth
