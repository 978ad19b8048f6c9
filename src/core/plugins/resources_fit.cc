// resources-fit filter (kube-scheduler's NodeResourcesFit, filter half): the candidate node has
// the replica's CPU and memory free, and its GPUs have room for the replica:
//  - CPU and memory: NodeResources::Fits, i.e. free on the node and, split evenly, on the CPU
//    sockets the candidate's GPUs hang off (the allocator pins the replica there);
//  - whole GPUs: each is free (usable and held by nobody) and not MIG-enabled;
//  - a share: the GPU is usable, not MIG-enabled, 1000 - used milli >= the share's milli, and,
//    when the model's memory is known, the shares' GPU memory plus this one's fits in it;
//  - a MIG instance: the GPU is usable, MIG-enabled, of a model with that profile, and its
//    current layout has a start slot for it.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/plugins/factories.h"

namespace berth {
namespace {

class ResourcesFitFilter : public FilterPlugin {
 public:
  bool node_local() const override { return true; }
  bool Feasible(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    const Demand& d = ctx.group->demand;
    const Node& node = alloc.cluster().nodes[c.node];
    // Reused between calls: a vector per candidate costs more than the check itself.
    thread_local std::vector<int> scratch;
    std::vector<int>& sockets = scratch;  // the thread-local's address, looked up once
    sockets.clear();
    for (int g : c.gpus) {
      const int s = node.switches[node.gpus[g].pcie_switch].socket;
      if (std::find(sockets.begin(), sockets.end(), s) == sockets.end()) sockets.push_back(s);
      if (!GpuFits(alloc, d, c.node, g)) return false;
    }
    return alloc.node_resources().Fits(c.node, sockets, d.cpu_milli, d.memory_mib);
  }

 private:
  static bool GpuFits(const Allocator& alloc, const Demand& d, int node, int gpu) {
    const Gpu& g = alloc.cluster().nodes[node].gpus[gpu];
    if (d.gpus > 0) return !g.mig_enabled && alloc.gpu_free(node, gpu);
    if (!alloc.gpu_usable(node, gpu)) return false;
    if (!d.mig_profile.empty()) {
      if (!g.mig_enabled) return false;
      const GpuModel* model = alloc.cluster().FindModel(g.model);
      if (model == nullptr) return false;
      const int p = FindMigProfile(model->mig_profiles, d.mig_profile);
      return p >= 0 && alloc.mig_layout(node, gpu).BestStart(model->mig_profiles, p) >= 0;
    }
    if (g.mig_enabled) return false;
    if (d.gpu_milli > 0) {
      if (1000 - alloc.gpu_used_milli(node, gpu) < d.gpu_milli) return false;
      const GpuModel* model = alloc.cluster().FindModel(g.model);
      return model == nullptr || model->memory_mib == 0 ||
             alloc.gpu_shared_memory_mib(node, gpu) + d.gpu_memory_mib <= model->memory_mib;
    }
    return alloc.gpu_free(node, gpu);
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeResourcesFitFilter(const PluginConfig& config,
                                                     std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<ResourcesFitFilter>();
}

}  // namespace berth
