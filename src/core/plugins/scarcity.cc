// scarcity score: keep the hosts of scarce pod shapes. FGD (fgd.cc) weighs a node's loss of a
// typical pod shape by how often the shape occurs, but not by how many other nodes could
// still host it: breaking the last empty 8-GPU node costs it no more than breaking the first
// of three hundred. This score charges a placement, for every GPU pod shape the node
// could host before it and cannot after it, the shape's frequency / the number of nodes that
// host it now, in milli (a pod's worth, 1000, per pod that can no longer start, times its
// GPUs to the power e, 0.75 by default):
//
//   lost = sum over shapes t hostable before and not after of f_t x 1000 x gpus_t^e / H_t
//   score = 100 x scale / (scale + lost)
//
// so that, late in a fill, the few nodes left for large or model-constrained pods are taken
// last. A node hosts shape t when t accepts its GPU model, its free CPU covers t's, and t's
// GPUs each find t's milli free (the fragmentation measure's test, fragmentation.h).
//
// The shapes are the typical pods and the rare ones past their coverage whose hosts are few
// (TypicalPod::rare: big, or bound to GPU models). Counting only typical ones, no shape held
// the empty 8-GPU nodes, so among FGD's ties this score opened fresh nodes rather than fill
// used ones, and 8-GPU pods were turned away from 80% arrived on (FGD turns none away before
// 94%). The exponent e (`gpuExponent`) weighs big pods between a pod's worth (0: empty 8-GPU
// nodes were still broken too early) and their GPUs' worth (1: the 8-GPU shapes drown out the
// common small ones); docs/simulator.md.
//
// Reads the nodes from ctx.fragmentation; without it every candidate scores 100 (neutral). The
// counts H_t are kept per node with the node's view and brought up to date before each
// replica's candidates are scored (PreScore), for the nodes whose view changed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/fragmentation.h"
#include "core/plugins/factories.h"

namespace berth {
namespace {

class ScarcityScore : public ScorePlugin {
 public:
  ScarcityScore(double scale, double from, double gpu_exponent)
      : scale_(scale), from_(from), gpu_exponent_(gpu_exponent) {}

  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    const FragmentationTracker* tracker = ctx.fragmentation;
    if (tracker == nullptr) return 100;
    const FragmentationModel& model = tracker->model();
    const std::vector<TypicalPod>& pods = model.typical_pods();
    const int shapes = static_cast<int>(pods.size());
    const Demand& d = ctx.group->demand;

    std::lock_guard<std::mutex> lock(mu_);
    if (&model != model_) Update(*tracker);  // scored before any PreScore
    if (total_milli_ <= 0 || 1 - free_milli_ / total_milli_ < from_) return 100;
    const NodeView& before = tracker->view(c.node);
    NodeView after = before;
    after.free_cpu_milli -= d.cpu_milli;
    if (d.gpus > 0)
      for (int g : c.gpus) after.set_free_milli(g, 0);
    else if (d.gpu_milli > 0 && c.gpus.size() == 1)
      after.set_free_milli(c.gpus[0], after.free_milli(c.gpus[0]) - d.gpu_milli);

    // A shape the node hosted accepts its model; after the placement it still fits when the
    // CPU left covers it and its GPUs-th largest free GPU its milli.
    largest_.resize(after.gpu_count());
    for (int g = 0; g < after.gpu_count(); ++g) largest_[g] = after.free_milli(g);
    std::sort(largest_.begin(), largest_.end(), std::greater<int>());
    double lost = 0;
    const char* was = &hosts_[static_cast<size_t>(c.node) * shapes];
    for (int t = 0; t < shapes; ++t) {
      if (!was[t]) continue;
      const TypicalPod& p = pods[t];
      const size_t need = static_cast<size_t>(std::max(p.gpus, 1));
      if (after.free_cpu_milli >= p.cpu_milli && need <= largest_.size() &&
          largest_[need - 1] >= p.gpu_milli)
        continue;
      lost += worth_[t] / std::max(1, count_[t]);
    }
    return 100 * scale_ / (scale_ + lost);
  }

  void PreScore(const PlacementContext& ctx) const override {
    if (ctx.fragmentation == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    Update(*ctx.fragmentation);
  }

 private:
  static bool Hosts(const FragmentationModel& model, int t, const NodeView& view) {
    const TypicalPod& p = model.typical_pods()[t];
    if (p.gpu_milli <= 0 || view.free_cpu_milli < p.cpu_milli || !model.Accepts(t, view.model))
      return false;
    int fit = 0;
    for (int g = 0; g < view.gpu_count(); ++g) fit += view.free_milli(g) >= p.gpu_milli;
    return fit >= std::max(p.gpus, 1);
  }

  // Recounts the nodes whose view changed since they were counted.
  void Update(const FragmentationTracker& tracker) const {
    const FragmentationModel& model = tracker.model();
    const int shapes = static_cast<int>(model.typical_pods().size());
    const int nodes = static_cast<int>(model.cluster().nodes.size());
    if (&model != model_ || views_.size() != static_cast<size_t>(nodes)) {
      model_ = &model;
      views_.assign(nodes, NodeView());
      hosts_.assign(static_cast<size_t>(nodes) * shapes, 0);
      count_.assign(shapes, 0);
      worth_.clear();
      for (const TypicalPod& p : model.typical_pods())
        worth_.push_back(p.frequency * 1000 * std::pow(std::max(p.gpus, 1), gpu_exponent_));
      seen_.assign(nodes, 0);
      free_milli_ = total_milli_ = 0;
    }
    for (int n = 0; n < nodes; ++n) {
      if (seen_[n] && views_[n] == tracker.view(n)) continue;
      if (seen_[n])
        free_milli_ -= views_[n].total_free_milli();
      else
        total_milli_ += 1000.0 * tracker.view(n).gpu_count();
      seen_[n] = 1;
      views_[n] = tracker.view(n);
      free_milli_ += views_[n].total_free_milli();
      char* h = &hosts_[static_cast<size_t>(n) * shapes];
      for (int t = 0; t < shapes; ++t) {
        const char now = Hosts(model, t, views_[n]);
        count_[t] += now - h[t];
        h[t] = now;
      }
    }
  }

  const double scale_;
  const double from_;  // the share of the cluster's GPU milli allocated from which it counts
  const double gpu_exponent_;
  mutable std::mutex mu_;
  mutable const FragmentationModel* model_ = nullptr;
  mutable std::vector<NodeView> views_;  // per node: the view its hosts_ row was counted from
  mutable std::vector<char> seen_;       // per node: counted at least once
  mutable std::vector<char> hosts_;      // [node * shapes + t]: the node hosts shape t
  mutable std::vector<int> count_;       // per shape: nodes hosting it
  mutable std::vector<int> largest_;     // Score's buffer: a view's free milli, largest first
  mutable std::vector<double> worth_;    // per shape: what losing all its hosts costs x H_t
  mutable double free_milli_ = 0, total_milli_ = 0;  // the cluster's GPU milli, as counted
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeScarcityScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {"scale", "from", "gpuExponent"}, error)) return nullptr;
  const double scale = Param(config, "scale", 10);
  if (!(scale > 0 && scale <= kMostWeight)) {
    if (error) *error = "parameter \"scale\" must be > 0 and at most 1e6";
    return nullptr;
  }
  const double from = Param(config, "from", 0);
  if (!(from >= 0 && from <= 1)) {
    if (error) *error = "parameter \"from\" must be from 0 to 1 (a share of the GPUs allocated)";
    return nullptr;
  }
  const double gpu_exponent = Param(config, "gpuExponent", 0.75);
  if (!(gpu_exponent >= 0 && gpu_exponent <= 2)) {
    if (error)
      *error =
          "parameter \"gpuExponent\" must be from 0 to 2 (how a lost pod's worth grows with its "
          "GPUs)";
    return nullptr;
  }
  return std::make_unique<ScarcityScore>(scale, from, gpu_exponent);
}

}  // namespace berth
