// image-locality score (kube-scheduler's ImageLocality, simplified): 100 when the candidate node
// already holds the task group's container image (Telemetry::node_images), else 0. Training
// images are often tens of GiB; starting where the image is saves minutes of pulling. Kube scales
// by image size and by how many nodes have it; berth does not know image sizes, so presence is
// all it scores. Names compare after kube's normalisation (a name without a tag or digest gets
// ":latest"). No telemetry, or a group without an image: 0 for every node (neutral).
#include <algorithm>
#include <memory>
#include <string>

#include "core/plugins/factories.h"

namespace berth {
namespace {

std::string Normalized(const std::string& image) {
  const size_t colon = image.rfind(':');
  const size_t slash = image.rfind('/');
  const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  if (tagged || image.find('@') != std::string::npos) return image;
  return image + ":latest";
}

class ImageLocalityScore : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    if (ctx.telemetry == nullptr || ctx.group->image.empty()) return 0;
    const auto& images = ctx.telemetry->node_images;
    if (c.node >= static_cast<int>(images.size())) return 0;
    const std::string want = Normalized(ctx.group->image);
    const auto& have = images[c.node];
    return std::any_of(have.begin(), have.end(),
                       [&](const std::string& image) { return Normalized(image) == want; })
               ? 100
               : 0;
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeImageLocalityScore(const PluginConfig& config,
                                                    std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<ImageLocalityScore>();
}

}  // namespace berth
