// dotprod score (the paper simulator's DotProductScore, "Tetris", as its experiments run it:
// dimExtMethod merge, normMethod max, gpuSelMethod best).
//
// Reference (pkg/simulator/plugin/dot_product_score.go, pkg/utils/utils.go): the node vector is
// (free CPU milli, free GPU milli summed over the node's GPUs), the pod vector (CPU milli,
// GPU milli x GPUs), both divided by the largest node (128000 CPU milli, 8000 GPU milli); the
// score is int64(100 * (1 - dot / 2)): the smaller the dot product, the higher the score. A
// node without the pod's CPU free scores 0 (filters remove it first anyway). The GPU inside
// the node is the best fit one (the fitting GPU with the least free milli, the lowest index
// among equals; for whole GPUs the first free ones).
//
// berth: the same integer score for the candidate on the best fit GPU; the node's other
// share candidates score kOtherGpuPenalty less (gpu_choice.h). A MIG instance counts no GPU
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

class DotProdScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    const Demand& d = ctx.group->demand;
    const int64_t free_cpu = alloc.node_resources().free_cpu_milli(c.node);
    if (free_cpu < d.cpu_milli) return 0;
    const int64_t free_gpu = NodeFreeGpuMilli(alloc, c.node);
    const int64_t want_gpu = d.gpu_milli > 0 ? d.gpu_milli : int64_t{1000} * d.gpus;
    const double dot = (free_cpu / kMaxSpecCpuMilli) * (d.cpu_milli / kMaxSpecCpuMilli) +
                       (free_gpu / kMaxSpecGpuMilli) * (want_gpu / kMaxSpecGpuMilli);
    const double score = static_cast<double>(static_cast<int64_t>(100 * (1 - dot / 2)));
    return BestFitCandidateScore(alloc, d, c, std::clamp(score, 0.0, 100.0));
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeDotProdScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<DotProdScore>();
}

}  // namespace berth
