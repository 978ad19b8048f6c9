// random score (the paper simulator's RandomScore, with its "random" GPU selection): a node
// picked uniformly at random among the feasible ones, and on it a GPU picked uniformly among
// those the replica fits on.
//
// Reference (pkg/simulator/plugin/random_score.go, open_gpu_share.go): PreScore draws one of
// the filtered nodes with rand.Intn and Score gives it 100, every other node 0; Reserve then
// takes, for a share, a GPU drawn uniformly (reservoir sampling) among the node's GPUs with
// enough free milli, and for whole GPUs the first free ones by index.
//
// berth scores candidates, not nodes, and a node offers a share one candidate per shared GPU
// that fits plus one fresh GPU. To keep the reference's distribution, candidate c with weight
// w (the fitting GPUs it stands for: the fresh candidate stands for every fitting free GPU)
// out of W fitting GPUs on its node scores 100 * u^(W / w), u uniform in [0, 1) from ctx.rng:
// the best score of each node is then uniform on [0, 100) whatever its candidate count (so
// every feasible node is equally likely to win), and within a node the winner is drawn with
// probability w / W (Efraimidis-Spirakis weighted sampling). Other demands score 100 * u.
// Differences: the fresh GPU is the allocator's choice among the free ones rather than a
// random one (the same free milli either way); GPU memory and socket fit are not counted in W.
// Without ctx.rng every candidate scores 0.
#include <cmath>
#include <memory>
#include <string>

#include "core/plugins/factories.h"
#include "core/plugins/gpu_choice.h"

namespace berth {
namespace {

class RandomScore : public ScorePlugin {
 public:
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    if (ctx.rng == nullptr) return 0;
    const double u = static_cast<double>((*ctx.rng)() >> 11) * 0x1.0p-53;  // [0, 1)
    int here = 1, on_node = 1;
    ShareWeight(*ctx.alloc, ctx.group->demand, c, &here, &on_node);
    if (here == on_node) return 100 * u;
    return 100 * std::pow(u, static_cast<double>(on_node) / here);
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeRandomScore(const PluginConfig& config, std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<RandomScore>();
}

}  // namespace berth
