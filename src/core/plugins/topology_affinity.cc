// topology-affinity score: GPUs close together (one PCIe switch, one socket) talk faster, a gang
// packed into few nodes and racks talks faster still, and GPUs taken from domains that are
// already broken keep whole domains free for the next large job (the Kueue complaint: two
// 2-GPU jobs split over two 4-GPU sockets leave 2 + 2 free where one 4-GPU job needed 4).
//
//   score = clamp(tight x (1 - fragmentation x broken / considered) - gang, 0, 100)
//
//  - tight: by Candidate::tightness: gpu or switch -> "switch" (default 100), socket ->
//    "socket" (70), node or looser -> "node" (40). A CPU-only candidate gets "switch": it has
//    nothing to keep close.
//  - broken / considered: walk up the cell tree from the tightest cell holding all the
//    candidate's GPUs to just below the cluster root; `considered` counts the cells of that chain
//    the candidate does not fill whole, `broken` those of them whose GPUs are all free now
//    (Allocator::gpu_free), i.e. that this placement would break. Taking GPUs from a partly used
//    switch / socket / node / rack breaks nothing; taking them from an empty node breaks the
//    socket, the node and maybe the rack. "fragmentation" (default 0.2) bounds the effect so
//    that a tighter candidate always beats a looser one at the default tightness scores.
//  - gang: 0 when no replica of the job is placed yet (ctx.job_placed, ctx.placed) or the
//    candidate's node already holds one; "other_node" (default 10) on another node of a rack the
//    job already uses (or when the cluster has no racks); "other_rack" (default 50) in a rack the
//    job does not use yet.
//
// Replica by replica, the gang penalty cannot see that the first replica's best fit (a partly
// used rack) leaves the rest of the gang to span more racks than it needs: the plugin asks the
// allocator to offer a gang the nodes of the fewest cells that hold it (packs_gangs).
#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "core/plugins/factories.h"

namespace berth {
namespace {

struct AffinityParams {
  double switch_score = 100, socket_score = 70, node_score = 40;
  double fragmentation = 0.2;
  double other_node = 10, other_rack = 50;
};

// True when every GPU under `cell` is free.
// Every GPU of the cell free in its pool: the buddy allocator's count says so at once (cells on
// a candidate's path hold its free GPUs, so no ancestor of theirs is taken whole).
bool AllFree(const Allocator& alloc, int cell) {
  return alloc.buddy().free_leaves(cell) == alloc.tree().type_of(cell).leaf_count;
}

double BrokenFraction(const Allocator& alloc, const Candidate& c) {
  const CellTree& tree = alloc.tree();
  // Cells are numbered in preorder: a cell holds all the candidate's GPUs when its id range
  // covers their leaves' lowest and highest ids. The whole cells a candidate names, when they
  // hold exactly its GPUs, give that range without a look at each GPU.
  int lo = INT_MAX, hi = -1, leaves = 0;
  for (int cell : c.cells) {
    lo = std::min(lo, cell);
    hi = std::max(hi, tree.subtree_end(cell) - 1);
    leaves += tree.type_of(cell).leaf_count;
  }
  if (c.cells.empty() || leaves != static_cast<int>(c.gpus.size())) {
    lo = INT_MAX, hi = -1;
    for (int g : c.gpus) {
      const int leaf = tree.gpu_cell(c.node, g);
      if (leaf < 0) return 0;
      lo = std::min(lo, leaf);
      hi = std::max(hi, leaf);
    }
  }
  int cell = lo;
  while (cell >= 0 && hi >= tree.subtree_end(cell)) cell = tree.cells()[cell].parent;
  int considered = 0, broken = 0;
  bool free = true;  // once a cell is partly used, so are all its ancestors
  for (; cell >= 0 && tree.type_of(cell).level < Level::kCluster;
       cell = tree.cells()[cell].parent) {
    if (tree.type_of(cell).leaf_count <= static_cast<int>(c.gpus.size())) continue;
    ++considered;
    free = free && AllFree(alloc, cell);
    if (free) ++broken;
  }
  return considered == 0 ? 0 : static_cast<double>(broken) / considered;
}

class TopologyAffinityScore : public ScorePlugin {
 public:
  explicit TopologyAffinityScore(AffinityParams p) : p_(p) {}
  bool packs_gangs() const override { return true; }

  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    const Allocator& alloc = *ctx.alloc;
    double tight = p_.switch_score;
    if (!c.gpus.empty()) {
      if (c.tightness == Level::kSocket)
        tight = p_.socket_score;
      else if (c.tightness > Level::kSocket)
        tight = p_.node_score;
      tight *= 1.0 - p_.fragmentation * BrokenFraction(alloc, c);
    }
    return std::clamp(tight - GangPenalty(ctx, c), 0.0, 100.0);
  }

 private:
  double GangPenalty(const PlacementContext& ctx, const Candidate& c) const {
    const auto none = [](const std::vector<ReplicaPlacement>* r) { return !r || r->empty(); };
    if (none(ctx.job_placed) && none(ctx.placed)) return 0;  // most replicas: no summary needed
    const Spread& spread = SpreadOf(ctx);
    const Cluster& cluster = ctx.alloc->cluster();
    if (std::find(spread.nodes.begin(), spread.nodes.end(), c.node) != spread.nodes.end()) return 0;
    const std::string& rack = cluster.nodes[c.node].rack;
    const bool same_rack = rack.empty() || std::find(spread.racks.begin(), spread.racks.end(),
                                                     rack) != spread.racks.end();
    return same_rack ? p_.other_node : p_.other_rack;
  }

  // The nodes and racks the job's placed replicas use. Every candidate of a replica asks for
  // the same replicas: they are summarized once, and recognized by their node ids.
  struct Spread {
    const Cluster* cluster = nullptr;
    std::vector<int> placed_nodes;   // in placement order, to recognize the replicas
    std::vector<int> nodes;          // distinct
    std::vector<std::string> racks;  // distinct
  };
  const Spread& SpreadOf(const PlacementContext& ctx) const {
    const Cluster& cluster = ctx.alloc->cluster();
    const std::vector<ReplicaPlacement>* const lists[] = {ctx.job_placed, ctx.placed};
    size_t count = 0;
    for (const auto* list : lists) count += list ? list->size() : 0;
    bool same = spread_.cluster == &cluster && spread_.placed_nodes.size() == count;
    for (size_t i = 0; const auto* list : lists)
      for (size_t j = 0; same && list && j < list->size(); ++j)
        same = spread_.placed_nodes[i++] == (*list)[j].node;
    if (same) return spread_;
    spread_ = {};
    spread_.cluster = &cluster;
    for (const auto* list : lists) {
      if (list == nullptr) continue;
      for (const ReplicaPlacement& r : *list) {
        spread_.placed_nodes.push_back(r.node);
        if (r.node < 0 ||
            std::find(spread_.nodes.begin(), spread_.nodes.end(), r.node) != spread_.nodes.end())
          continue;
        spread_.nodes.push_back(r.node);
        const std::string& rack = cluster.nodes[r.node].rack;
        if (std::find(spread_.racks.begin(), spread_.racks.end(), rack) == spread_.racks.end())
          spread_.racks.push_back(rack);
      }
    }
    return spread_;
  }

  AffinityParams p_;
  mutable Spread spread_;  // of the last `placed` scored
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeTopologyAffinityScore(const PluginConfig& config,
                                                       std::string* error) {
  if (!CheckParams(
          config, {"switch", "socket", "node", "fragmentation", "other_node", "other_rack"}, error))
    return nullptr;
  AffinityParams p;
  p.switch_score = Param(config, "switch", p.switch_score);
  p.socket_score = Param(config, "socket", p.socket_score);
  p.node_score = Param(config, "node", p.node_score);
  p.fragmentation = Param(config, "fragmentation", p.fragmentation);
  p.other_node = Param(config, "other_node", p.other_node);
  p.other_rack = Param(config, "other_rack", p.other_rack);
  for (double v : {p.switch_score, p.socket_score, p.node_score, p.other_node, p.other_rack})
    if (v < 0 || v > 100) {
      if (error) *error = "parameters switch, socket, node, other_node, other_rack: 0..100";
      return nullptr;
    }
  if (p.fragmentation < 0 || p.fragmentation > 1) {
    if (error) *error = "parameter \"fragmentation\" must be in [0, 1]";
    return nullptr;
  }
  return std::make_unique<TopologyAffinityScore>(p);
}

}  // namespace berth
