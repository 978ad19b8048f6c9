// gpu-memory-threshold filter: refuses a GPU whose observed memory use (DCGM_FI_DEV_FB_USED, via
// telemetry) plus the replica's gpu_memory_mib would exceed `ratio` (default 0.9) of the model's
// memory. The allocator only knows the memory that shares *declare*; this catches the GPUs whose
// tenants use more than they asked for, or processes berth does not know about, before a new
// replica lands there and dies of out-of-memory.
//
// Unknown stays allowed: no telemetry, a GPU without a sample (negative fb_used_mib), or a model
// whose memory size is not declared (0).
#include <memory>
#include <string>

#include "core/plugins/factories.h"

namespace berth {
namespace {

class GpuMemoryThresholdFilter : public FilterPlugin {
 public:
  bool node_local() const override { return true; }
  explicit GpuMemoryThresholdFilter(double ratio) : ratio_(ratio) {}

  bool Feasible(const PlacementContext& ctx, const Candidate& c) const override {
    if (ctx.telemetry == nullptr) return true;
    const auto& nodes = ctx.telemetry->gpus;
    if (c.node >= static_cast<int>(nodes.size())) return true;
    const Node& node = ctx.alloc->cluster().nodes[c.node];
    for (int g : c.gpus) {
      if (g >= static_cast<int>(nodes[c.node].size())) continue;
      const double used = nodes[c.node][g].fb_used_mib;
      const GpuModel* model = ctx.alloc->cluster().FindModel(node.gpus[g].model);
      if (used < 0 || model == nullptr || model->memory_mib <= 0) continue;
      const double need = used + static_cast<double>(ctx.group->demand.gpu_memory_mib);
      if (need > ratio_ * static_cast<double>(model->memory_mib)) return false;
    }
    return true;
  }
  // Memory use is observed and changes on its own: a refused job retries with back-off.
  bool retryable() const override { return true; }

 private:
  double ratio_;
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeGpuMemoryThresholdFilter(const PluginConfig& config,
                                                           std::string* error) {
  if (!CheckParams(config, {"ratio"}, error)) return nullptr;
  const double ratio = Param(config, "ratio", kDefaultGpuMemoryRatio);
  if (!(ratio > 0 && ratio <= 1)) {
    if (error) *error = "parameter \"ratio\" must be in (0, 1]";
    return nullptr;
  }
  return std::make_unique<GpuMemoryThresholdFilter>(ratio);
}

}  // namespace berth
