// node-health filter: refuses a candidate that would use a bad GPU or sit on a cordoned node.
// The allocator never hands such GPUs out; the filter keeps the pipeline from even ranking them
// (and from ranking a what-if that a stale candidate list still offers).
//
// Health comes from Allocator::gpu_usable, which is false for a bad GPU and for every GPU of a
// cordoned node. A CPU-only candidate has no GPUs to ask: it is refused when its node is
// cordoned (Allocator::node_cordoned); bad GPUs on the node do not matter to it.
#include <memory>
#include <string>

#include "core/plugins/factories.h"

namespace berth {
namespace {

class NodeHealthFilter : public FilterPlugin {
 public:
  bool node_local() const override { return true; }
  bool Feasible(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    if (alloc.node_healthy(c.node)) return true;
    if (alloc.node_cordoned(c.node)) return false;
    for (int g : c.gpus)
      if (!alloc.gpu_usable(c.node, g)) return false;
    return true;
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeNodeHealthFilter(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<NodeHealthFilter>();
}

}  // namespace berth
