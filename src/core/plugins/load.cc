// load score: prefers GPUs that are observed idle. 100 - the mean DCGM_FI_DEV_GPU_UTIL (percent,
// from telemetry) of the candidate's GPUs. Allocation says who holds a GPU; utilisation says
// whether the holders of a shared GPU actually keep it busy, which is what a new share will feel.
// A GPU without a sample counts as 50% busy, so unknown is neutral; a candidate without GPUs (or
// no telemetry at all) scores 50.
#include <algorithm>
#include <memory>
#include <string>

#include "core/plugins/factories.h"

namespace berth {
namespace {

class LoadScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    if (c.gpus.empty()) return 50;
    double sum = 0;
    for (int g : c.gpus) {
      double util = -1;
      if (ctx.telemetry != nullptr && c.node < static_cast<int>(ctx.telemetry->gpus.size()) &&
          g < static_cast<int>(ctx.telemetry->gpus[c.node].size()))
        util = ctx.telemetry->gpus[c.node][g].util_percent;
      sum += util < 0 ? 50 : std::min(util, 100.0);
    }
    return 100.0 - sum / static_cast<double>(c.gpus.size());
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeLoadScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<LoadScore>();
}

}  // namespace berth
