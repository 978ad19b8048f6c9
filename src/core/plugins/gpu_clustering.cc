// gpu-clustering score (the paper simulator's GpuClusteringScore, with the default "best" GPU
// selection): prefer nodes that already run pods with the same GPU request.
//
// Reference (pkg/simulator/plugin/gpu_clustering_score.go): a pod's GPU affinity is
// "share-gpu" (one GPU, milli < 1000), "<n>-gpu" (n whole GPUs), or none (CPU-only); a node
// knows how many of its pods have each affinity. With L the node's free GPU milli and
// base = 25 * (8000 - L) / 8000 in integer arithmetic, a GPU pod scores
//  - base + 75 when the node runs pods of its affinity and of no other;
//  - base + 50 when the node runs pods of its affinity and of others;
//  - base + 25 when the node runs no GPU pod;
//  - base when the node runs GPU pods of other affinities only;
// and a CPU-only pod scores 0 everywhere. The GPU inside the node is the best fit one (the
// fitting GPU with the least free milli, the lowest index among equals; for whole GPUs the
// first free ones).
//
// berth: the same integer score, clamped to 0..100 (base goes negative past 8 free GPUs); the
// node's share candidates other than the best fit GPU score kOtherGpuPenalty less
// (gpu_choice.h). Each placed replica counts as a pod; MIG instances form one more affinity
// (the reference has no MIG). The allocator keeps no per-node index of its allocations, so
// the plugin keeps one, brought up to date from Allocator::allocations() by the ids added
// since its last call (and rebuilt when allocations were released or another allocator is
// asked about).
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/plugins/factories.h"
#include "core/plugins/gpu_choice.h"

namespace berth {
namespace {

constexpr int kNoAffinity = -2;
constexpr int kShareAffinity = 0;
constexpr int kMigAffinity = -1;

int AffinityOf(const Demand& d) {
  if (d.gpu_milli > 0) return kShareAffinity;
  if (!d.mig_profile.empty()) return kMigAffinity;
  return d.gpus > 0 ? d.gpus : kNoAffinity;
}

int AffinityOf(const ReplicaPlacement& r) {
  if (r.gpu_milli > 0) return kShareAffinity;
  if (r.mig_profile >= 0) return kMigAffinity;
  return r.gpus.empty() ? kNoAffinity : static_cast<int>(r.gpus.size());
}

// Per node: (affinity, replicas) of the replicas placed there.
class AffinityIndex {
 public:
  // Brings the index up to date with `alloc`.
  void Sync(const Allocator& alloc) {
    const auto& allocations = alloc.allocations();
    const size_t nodes = alloc.cluster().nodes.size();
    auto added = allocations.upper_bound(max_id_);
    const size_t fresh = static_cast<size_t>(std::distance(added, allocations.end()));
    if (&alloc != alloc_ || per_node_.size() != nodes || allocations.size() - fresh != count_) {
      alloc_ = &alloc;
      per_node_.assign(nodes, {});
      max_id_ = -1;
      count_ = 0;
      added = allocations.begin();
    }
    for (; added != allocations.end(); ++added) {
      // The allocator lists an allocation before its replicas are placed (the newest id): it
      // is counted once it is final, not skipped for good.
      if (added->second->replicas.empty()) break;
      for (const ReplicaPlacement& r : added->second->replicas) {
        const int affinity = AffinityOf(r);
        if (affinity == kNoAffinity || r.node < 0) continue;
        auto& counts = per_node_[r.node];
        auto it = std::find_if(counts.begin(), counts.end(),
                               [&](const auto& p) { return p.first == affinity; });
        if (it == counts.end())
          counts.push_back({affinity, 1});
        else
          ++it->second;
      }
      max_id_ = std::max(max_id_, added->first);
      ++count_;
    }
  }

  const std::vector<std::pair<int, int>>& on(int node) const { return per_node_[node]; }

 private:
  const Allocator* alloc_ = nullptr;
  int max_id_ = -1;
  size_t count_ = 0;
  std::vector<std::vector<std::pair<int, int>>> per_node_;
};

class GpuClusteringScore : public ScorePlugin {
 public:
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    const Demand& d = ctx.group->demand;
    const int affinity = AffinityOf(d);
    if (affinity == kNoAffinity) return 0;

    bool same = false;
    int kinds = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.Sync(alloc);
      for (const auto& [a, replicas] : index_.on(c.node)) {
        if (replicas <= 0) continue;
        ++kinds;
        same = same || a == affinity;
      }
    }
    int64_t free = 0;
    const std::vector<Gpu>& gpus = alloc.cluster().nodes[c.node].gpus;
    for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
      if (!gpus[g].mig_enabled && alloc.gpu_usable(c.node, g))
        free += 1000 - alloc.gpu_used_milli(c.node, g);
    const int64_t base = int64_t{100 / 4} * (8000 - free) / 8000;
    int64_t score = base;
    if (same)
      score += kinds == 1 ? 100 * 3 / 4 : 100 * 2 / 4;
    else if (kinds == 0)
      score += 100 / 4;
    return BestFitCandidateScore(alloc, d, c,
                                 static_cast<double>(std::clamp<int64_t>(score, 0, 100)));
  }

 private:
  mutable std::mutex mu_;
  mutable AffinityIndex index_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeGpuClusteringScore(const PluginConfig& config,
                                                    std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<GpuClusteringScore>();
}

}  // namespace berth
