// image-locality score: how much of the task group's container image the candidate node already
// holds, 0 to 100. Training images are often tens of GiB; starting where they are saves minutes
// of pulling. 100 when the node has the image (Telemetry::node_images); else the share of the
// image's bytes in layers the node has (Telemetry::image_layers, node_layers), as images share
// their base and framework layers: a node with last week's build of the image pulls only what
// changed. kube-scheduler's ImageLocality counts whole images only, so such a node gets nothing
// there. Layers of unknown size count one each when no layer of the image has a size. Names
// compare normalized (NormalizedImageName: "busybox" is "docker.io/library/busybox:latest"). No
// telemetry, an image no node holds, or a group without an image: 0 for every node (neutral).
#include <algorithm>
#include <memory>
#include <string>

#include "core/image_name.h"
#include "core/plugins/factories.h"

namespace berth {
namespace {

class ImageLocalityScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    if (ctx.telemetry == nullptr || ctx.group->image.empty()) return 0;
    const auto& images = ctx.telemetry->node_images;
    if (c.node >= static_cast<int>(images.size())) return 0;
    const std::string want = NormalizedImageName(ctx.group->image);
    const auto& have = images[c.node];
    if (std::any_of(have.begin(), have.end(),
                    [&](const std::string& image) { return NormalizedImageName(image) == want; }))
      return 100;
    const auto layers = ctx.telemetry->image_layers.find(want);
    const auto& node_layers = ctx.telemetry->node_layers;
    if (layers == ctx.telemetry->image_layers.end() ||
        c.node >= static_cast<int>(node_layers.size()))
      return 0;
    const bool sized = std::any_of(layers->second.begin(), layers->second.end(),
                                   [](const ImageLayer& l) { return l.bytes > 0; });
    double total = 0, held = 0;
    for (const ImageLayer& l : layers->second) {
      const double weight = sized ? static_cast<double>(std::max<int64_t>(l.bytes, 0)) : 1;
      total += weight;
      if (node_layers[c.node].count(l.digest)) held += weight;
    }
    return total > 0 ? 100 * held / total : 0;
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeImageLocalityScore(const PluginConfig& config,
                                                    std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<ImageLocalityScore>();
}

}  // namespace berth
