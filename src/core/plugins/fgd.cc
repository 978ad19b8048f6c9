// fgd score (the paper's Fragmentation Gradient Descent, the simulator's FGDScore with its own
// GPU selection): the node, and the GPU on it, whose use grows the expected fragmentation
// (fragmentation.h) the least.
//
// Reference (pkg/simulator/plugin/fgd_score.go, calculateGpuShareFragExtendScore): with F the
// node's fragmentation against the typical pods before the pod and F' after it,
// score = int64(sigmoid((F - F') / 1000) * 100). For a share, F' is computed for every GPU of
// the node with enough free milli (CPU taken too) and the node scores the best of them; the GPU
// taken is the first (lowest index) with that best score. For whole GPUs F' has the pod's GPUs
// taken from fully free ones and its CPU from the node; the GPUs taken are the first free ones
// by index (which ones does not change F'). A CPU-only pod changes only the node's free CPU.
//
// berth: the candidate on the GPU the reference would take scores the node's score; the node's
// other share candidates score their own F' score less kOtherGpuPenalty (gpu_choice.h), so
// the best candidates are one per best node and the pipeline's tie break chooses the node (the
// reference's: the smallest node name). A node offers one fresh GPU for a share; it stands for
// the lowest-index fitting free GPU in the reference's order (all free GPUs give the same F').
// A MIG instance changes only the node's free CPU (MIG GPUs are outside the measure). Without
// typical pods (ctx.typical_pods null or empty) every candidate scores 0. Given a
// FragmentationTracker (ctx.fragmentation), the plugin reads the nodes and their fragmentation
// from it. Otherwise it compiles the typical pods once (FragmentationModel) and rebuilds when
// the list's address, size or numbers change; it remembers each node's fragmentation until the
// node changes.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/fragmentation.h"
#include "core/plugins/factories.h"
#include "core/plugins/gpu_choice.h"

namespace berth {
namespace {

// The reference's score is an integer, as kube-scheduler scores are: `resolution` 1. Other
// resolutions make the steps finer (> 1) or coarser (< 1); 0 keeps the score continuous.
double FgdScore(double frag_before, double frag_after, double resolution) {
  const double x = (frag_before - frag_after) / 1000;
  const double score = 1.0 / (1.0 + std::exp(-x)) * 100;
  return resolution > 0 ? std::floor(score * resolution) / resolution : score;
}

// Which typical pod list the cached model was built from (PlacementContext::typical_pods_version).
struct PodsKey {
  const std::vector<TypicalPod>* pods = nullptr;
  size_t size = 0;
  uint64_t version = 0;

  static PodsKey Of(const PlacementContext& ctx) {
    return {ctx.typical_pods, ctx.typical_pods->size(), ctx.typical_pods_version};
  }
  bool operator==(const PodsKey&) const = default;
};

class FgdScorePlugin : public ScorePlugin {
 public:
  bool node_local() const override { return true; }
  explicit FgdScorePlugin(double resolution) : resolution_(resolution) {}

  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    if (const FragmentationTracker* tracker = ctx.fragmentation) {
      if (tracker->model().typical_pods().empty()) return 0;
      return ScoreOn(ctx, c, tracker->model(), tracker->view(c.node), tracker->node(c.node));
    }
    if (ctx.typical_pods == nullptr || ctx.typical_pods->empty()) return 0;
    std::shared_ptr<const FragmentationModel> model;
    NodeView before;
    const double frag_before = Before(ctx, c.node, &model, &before);
    return ScoreOn(ctx, c, *model, before, frag_before);
  }

 private:
  // The score of `c` on its node as it is (`before`, of fragmentation `frag_before`).
  double ScoreOn(const PlacementContext& ctx, const Candidate& c, const FragmentationModel& model,
                 const NodeView& before, double frag_before) const {
    const Allocator& alloc = *ctx.alloc;
    const Demand& d = ctx.group->demand;

    // The node after the replica, with `gpu` (or, when -1, none) giving up `milli`.
    auto after = [&](int gpu, int milli) {
      NodeView view = before;
      view.free_cpu_milli -= d.cpu_milli;
      if (gpu >= 0) view.set_free_milli(gpu, view.free_milli(gpu) - milli);
      return FgdScore(frag_before, model.Fragmentation(view), resolution_);
    };

    if (d.gpu_milli <= 0 || c.gpus.size() != 1) {
      NodeView view = before;
      view.free_cpu_milli -= d.cpu_milli;
      if (d.gpus > 0)
        for (int g : c.gpus) view.set_free_milli(g, 0);
      return FgdScore(frag_before, model.Fragmentation(view), resolution_);
    }

    // A share: score every GPU it fits on, in index order; GPUs with the same free milli
    // give the same F', so each distinct free milli is evaluated once.
    const int mine = c.gpus[0];
    const int my_free = before.free_milli(mine);
    std::array<std::pair<int, double>, NodeView::kInlineGpus> by_free;  // (free milli, score)
    int distinct = 0;
    auto score_of = [&](int gpu) {
      const int free = before.free_milli(gpu);
      for (int i = 0; i < distinct; ++i)
        if (by_free[i].first == free) return by_free[i].second;
      const double s = after(gpu, d.gpu_milli);
      if (distinct < NodeView::kInlineGpus) by_free[distinct++] = {free, s};
      return s;
    };
    const double my_score = score_of(mine);
    // The reference takes the first GPU (by index) with the best score. As the fresh GPU, c
    // stands for the first fitting free GPU.
    const int gpus = before.gpu_count();
    int position = mine;
    if (my_free == 1000)
      for (int g = 0; g < mine; ++g)
        if (before.free_milli(g) == 1000 && ShareFitsGpu(alloc, d, c.node, g)) {
          position = g;
          break;
        }
    bool chosen = true;
    for (int g = 0; g < gpus && chosen; ++g) {
      if (g == mine || !ShareFitsGpu(alloc, d, c.node, g)) continue;
      if (my_free == 1000 && before.free_milli(g) == 1000) continue;  // the same choice as c
      const double s = score_of(g);
      if (s > my_score || (s == my_score && g < position)) chosen = false;
    }
    return chosen ? my_score : my_score - kOtherGpuPenalty;
  }

  // The model for ctx's typical pods, the node as it is, and its fragmentation (remembered
  // per node: most nodes do not change from one decision to the next).
  double Before(const PlacementContext& ctx, int node,
                std::shared_ptr<const FragmentationModel>* model, NodeView* view) const {
    std::lock_guard<std::mutex> lock(mu_);
    const Cluster* cluster = &ctx.alloc->cluster();
    const PodsKey key = PodsKey::Of(ctx);
    if (model_ == nullptr || &model_->cluster() != cluster || !(key == key_) ||
        views_.size() != cluster->nodes.size() || models_ != cluster->models.size()) {
      model_ = std::make_shared<const FragmentationModel>(cluster, *ctx.typical_pods);
      key_ = key;
      models_ = cluster->models.size();
      views_.assign(cluster->nodes.size(), NodeView());
      frags_.assign(cluster->nodes.size(), -1);
    }
    *model = model_;
    *view = model_->View(*ctx.alloc, node);
    if (frags_[node] < 0 || !(views_[node] == *view)) {
      views_[node] = *view;
      frags_[node] = model_->Fragmentation(*view);
    }
    return frags_[node];
  }

  const double resolution_;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const FragmentationModel> model_;
  mutable PodsKey key_;
  mutable size_t models_ = 0;            // the cluster's model count when the model was built
  mutable std::vector<NodeView> views_;  // per node: the last view seen, and its fragmentation
  mutable std::vector<double> frags_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeFgdScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {"resolution"}, error)) return nullptr;
  const double resolution = Param(config, "resolution", 1);
  if (!(resolution >= 0 && resolution <= kMostWeight)) {
    if (error)
      *error =
          "parameter \"resolution\" must be from 0 to 1e6 (0: continuous, 1: the reference's "
          "integers)";
    return nullptr;
  }
  return std::make_unique<FgdScorePlugin>(resolution);
}

}  // namespace berth
