// gpu-model filter: every GPU of a candidate must be one of the models the task group accepts
// (Demand::models; empty accepts any). Jobs name models because kernels, memory sizes and
// performance differ; a mixed-model replica would run at the pace of its slowest GPU.
#include <algorithm>
#include <memory>
#include <string>

#include "core/plugins/factories.h"

namespace berth {
namespace {

class GpuModelFilter : public FilterPlugin {
 public:
  bool node_local() const override { return true; }
  bool Feasible(const PlacementContext& ctx, const Candidate& c) const override {
    const std::vector<std::string>& models = ctx.group->demand.models;
    if (models.empty()) return true;
    const Node& node = ctx.alloc->cluster().nodes[c.node];
    for (int g : c.gpus)
      if (std::find(models.begin(), models.end(), node.gpus[g].model) == models.end()) return false;
    return true;
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeGpuModelFilter(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<GpuModelFilter>();
}

}  // namespace berth
