// node-selector filter (kube's nodeSelector): every key=value of the task group's node_selector
// must match the candidate node. Keys are read as topology-spread reads them (node_label.h):
// labels, with "rack" falling back to the node's rack and "node" meaning the node's name.
#include <memory>
#include <string>

#include "core/plugins/factories.h"
#include "core/plugins/node_label.h"

namespace berth {
namespace {

class NodeSelectorFilter : public FilterPlugin {
 public:
  bool node_local() const override { return true; }
  bool Feasible(const PlacementContext& ctx, const Candidate& c) const override {
    const Node& node = ctx.alloc->cluster().nodes[c.node];
    std::string value;
    for (const auto& [key, want] : ctx.group->node_selector)
      if (!NodeLabel(node, key, &value) || value != want) return false;
    return true;
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeNodeSelectorFilter(const PluginConfig& config,
                                                     std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<NodeSelectorFilter>();
}

}  // namespace berth
