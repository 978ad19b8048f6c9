#include "core/allocator.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <tuple>

namespace berth {
namespace {

// Node versions: one counter for all allocators, so that no two states share a version.
std::atomic<uint64_t> next_node_version{1};

int PoolOf(const AllocationRequest& req) {
  return req.vc >= 0 && !req.opportunistic ? req.vc + 1 : BuddyAllocator::kPhysicalPool;
}

}  // namespace

// Builds the tree and resolves the VCs before the buddy allocator (which needs both) exists.
static int BuildTreeAndVcs(const Cluster& cluster, const std::vector<VirtualClusterSpec>& specs,
                           CellTree* tree, std::vector<VirtualCluster>* vcs, std::string* error) {
  *error = ValidateCluster(cluster);
  if (error->empty()) *error = CellTree::Build(cluster, tree);
  if (error->empty()) *error = ResolveVirtualClusters(cluster, *tree, specs, vcs);
  if (!error->empty()) vcs->clear();
  return static_cast<int>(vcs->size()) + 1;
}

Allocator::Allocator(const Cluster* cluster, const std::vector<VirtualClusterSpec>& vcs)
    : cluster_(cluster),
      tree_(std::make_shared<CellTree>()),
      buddy_(tree_.get(), BuildTreeAndVcs(*cluster, vcs, tree_.get(), &vcs_, &error_)),
      resources_(cluster) {
  gpus_.resize(cluster->nodes.size());
  gpu_models_.resize(cluster->nodes.size());
  cordoned_.assign(cluster->nodes.size(), 0);
  bad_gpus_.assign(cluster->nodes.size(), 0);
  for (size_t n = 0; n < cluster->nodes.size(); ++n) {
    gpus_[n].resize(cluster->nodes[n].gpus.size());
    for (const Gpu& gpu : cluster->nodes[n].gpus)
      gpu_models_[n].push_back(cluster->FindModel(gpu.model));
    for (size_t g = 0; g < gpus_[n].size(); ++g) {
      const Gpu& gpu = cluster->nodes[n].gpus[g];
      const GpuModel* model = cluster->FindModel(gpu.model);
      if (!gpu.mig_layout.empty() && model && error_.empty()) {
        PlaceMigLayout(model->mig_profiles, gpu.mig_layout, &gpus_[n][g].fixed);
        gpus_[n][g].fixed_used.assign(gpus_[n][g].fixed.size(), 0);
      }
    }
  }
  shared_gpus_.resize(vcs_.size() + 1);
  mig_gpus_.resize(vcs_.size() + 1);
  const int cell_count = static_cast<int>(tree_->cells().size());
  for (int c = 0; c < cell_count; ++c)
    level_cells_[static_cast<int>(tree_->type_of(c).level)].push_back(c);
  for (size_t t = 0; t < tree_->types().size(); ++t)
    if (tree_->types()[t].level == Level::kNode) node_types_.push_back(static_cast<int>(t));
  node_version_.assign(cluster->nodes.size(), 0);
  crowded_gpus_.assign(cluster->nodes.size(), 0);
  reserved_nodes_.assign(cluster->nodes.size(), false);
  for (size_t n = 0; n < node_version_.size(); ++n) Touch(static_cast<int>(n));
  cache_ = std::make_shared<CandidateCache>();
  backable_.assign(cell_count, 0);
  backable_children_.assign(cell_count, 0);
  available_.assign(tree_->types().size(), 0);
  for (int c = cell_count - 1; c >= 0; --c) SetBackable(c, ComputeBackable(c, backable_children_));
  for (size_t v = 0; v < vcs_.size(); ++v) {
    bool lends = true;
    for (int unlent : vcs_[v].unlent_counts) lends = lends && unlent == 0;
    keeps_unlent_ = keeps_unlent_ || !lends;
    if (!lends) continue;
    lending_pools_.push_back(static_cast<int>(v) + 1);
    std::vector<int>& types = lent_types_.emplace_back(node_types_);
    for (int t : vcs_[v].guarantee_types)
      if (tree_->types()[t].level < Level::kNode &&
          std::find(types.begin(), types.end(), t) == types.end())
        types.push_back(t);
  }
  lent_node_.assign(cluster->nodes.size(), 0);
  lent_held_.assign(cluster->nodes.size(), 0);
}

const Allocation* Allocator::Find(int id) const {
  auto it = allocations_.find(id);
  return it == allocations_.end() ? nullptr : it->second.get();
}

bool Allocator::ModelAllowed(const Demand& d, const std::string& model) const {
  return d.models.empty() || std::find(d.models.begin(), d.models.end(), model) != d.models.end();
}

bool Allocator::NodeUsable(const AllocationRequest& req, int node) const {
  return !cordoned_[node] && (req.only_node < 0 || req.only_node == node);
}

int Allocator::BoundVc(int cell) const { return buddy_.pool(cell) - 1; }

std::vector<int> Allocator::SocketsOf(int node, const std::vector<int>& gpus) const {
  std::vector<int> sockets;
  const Node& n = cluster_->nodes[node];
  for (int g : gpus) {
    const int s = n.switches[n.gpus[g].pcie_switch].socket;
    if (std::find(sockets.begin(), sockets.end(), s) == sockets.end()) sockets.push_back(s);
  }
  std::sort(sockets.begin(), sockets.end());
  return sockets;
}

bool Allocator::FitsNode(const AllocationRequest& req, int node,
                         const std::vector<int>& gpus) const {
  return NodeUsable(req, node) &&
         resources_.Fits(node, SocketsOf(node, gpus), req.demand.cpu_milli, req.demand.memory_mib);
}

void Allocator::HoldGpus(int cell, int holder) {
  const auto& cells = tree_->cells();
  auto borrowed = [&](int h) { return h >= 0 && allocations_.at(h)->preemptible; };
  const bool lent = buddy_.pool(cell) != BuddyAllocator::kPhysicalPool;
  for (int c = cell; c < tree_->subtree_end(cell); ++c) {
    if (cells[c].gpu < 0) continue;
    int& held = gpus_[cells[c].node][cells[c].gpu].holder;
    if (lent) lent_held_[cells[c].node] += borrowed(holder) - borrowed(held);
    held = holder;
  }
  RefreshBacking(cell);
  TouchCell(cell);
}

void Allocator::Touch(int node) { node_version_[node] = next_node_version++; }

void Allocator::TouchCell(int cell) {
  const auto& cells = tree_->cells();
  if (cells[cell].node >= 0) {
    Touch(cells[cell].node);
    return;
  }
  for (int c = cell; c < tree_->subtree_end(cell); ++c)
    if (tree_->type_of(c).level == Level::kNode) Touch(cells[c].node);
}

// Candidate cell types for k whole GPUs (or one fresh GPU for shares / MIG), tightest first.
std::vector<int> Allocator::WholeTypes(const Demand& d, bool mig) const {
  const int k = std::max(1, d.gpus);
  const Level loosest = d.affinity.value_or(Level::kNode);
  std::vector<int> out;
  const auto& types = tree_->types();
  for (size_t t = 0; t < types.size(); ++t) {
    const CellType& type = types[t];
    if (type.model.empty() || type.mig != mig || !ModelAllowed(d, type.model)) continue;
    if (type.leaf_count < k || type.level > Level::kNode || type.tight_level > loosest) continue;
    if (mig || d.gpu_milli > 0) {
      if (type.leaf_count != 1) continue;
      const GpuModel* model = cluster_->FindModel(type.model);
      if (mig && FindMigProfile(model->mig_profiles, d.mig_profile) < 0) continue;
    }
    out.push_back(static_cast<int>(t));
  }
  std::sort(out.begin(), out.end(), [&](int a, int b) {
    if (types[a].leaf_count != types[b].leaf_count)
      return types[a].leaf_count < types[b].leaf_count;
    return types[a].tight_level < types[b].tight_level;
  });
  return out;
}

// Takes k GPUs of one of `types` in the pool (inside `within` when >= 0) on a node where the
// replica's CPU and memory fit. Returns the node, or -1 with nothing taken.
static int TakeGpusImpl(BuddyAllocator& buddy, const CellTree& tree, const std::vector<int>& roots,
                        const std::vector<int>& types, int pool, int k, bool fast,
                        const std::function<bool(int)>& node_ok,
                        const std::function<bool(int, const std::vector<int>&)>& fits,
                        std::vector<int>* cells, std::vector<int>* gpus) {
  auto try_cell = [&](int c) {
    std::vector<int> taken;
    buddy.TakeLeaves(c, k, &taken);
    std::vector<int> ids;
    for (int cell : taken)
      for (int x = cell; x < tree.subtree_end(cell); ++x)
        if (tree.cells()[x].gpu >= 0) ids.push_back(tree.cells()[x].gpu);
    std::sort(ids.begin(), ids.end());
    const int node = tree.cells()[c].node;
    if (fits(node, ids)) {
      cells->insert(cells->end(), taken.begin(), taken.end());
      *gpus = std::move(ids);
      return node;
    }
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) buddy.Give(*it);
    return -1;
  };
  const auto& all = tree.cells();
  for (int type : types) {
    bool refused = false;  // a cell had the GPUs, but `fits` turned them down
    if (fast) {
      const int c = buddy.FindFast(pool, type, k);
      if (c < 0) continue;  // the pool has no room of this type at all
      const int node = try_cell(c);
      if (node >= 0) return node;
      refused = true;
    }
    for (int root : roots) {
      const int c = buddy.FindWithin(root, type, k, node_ok);
      if (c < 0) continue;
      const int node = try_cell(c);
      if (node >= 0) return node;
      refused = true;
    }
    if (!refused) continue;
    // The best fit failed on what only the chosen GPUs show (their socket's CPU or memory, a
    // GPU's memory or MIG geometry): try every other cell of the type, best fit first.
    std::vector<std::pair<int, int>> others;  // (free GPUs, cell)
    for (int root : roots)
      for (int c = root; c < tree.subtree_end(root); ++c) {
        // A node that cannot host the replica is skipped whole (cells are in preorder, so its
        // subtree is contiguous): on a large full cluster this scan is most of a failed placement.
        if (all[c].node >= 0 && (c == root || all[all[c].parent].node < 0) &&
            !node_ok(all[c].node)) {
          c = tree.subtree_end(c) - 1;
          continue;
        }
        if (all[c].type != type || buddy.pool(c) != pool || buddy.free_leaves(c) < k) continue;
        bool inside_taken = false;
        for (int a = c; a >= 0 && buddy.pool(a) == pool && !inside_taken; a = all[a].parent)
          inside_taken = buddy.taken(a);
        if (!inside_taken) others.push_back({buddy.free_leaves(c), c});
      }
    std::sort(others.begin(), others.end());
    for (const auto& [free, c] : others) {
      const int node = try_cell(c);
      if (node >= 0) return node;
    }
  }
  return -1;
}

int Allocator::TakeFreshGpu(const AllocationRequest& req, int pool, bool mig) {
  Demand one = req.demand;
  one.gpus = 1;
  const std::vector<int> types = WholeTypes(one, mig);
  std::vector<int> roots;
  if (pool == BuddyAllocator::kPhysicalPool)
    roots.push_back(tree_->root());
  else
    roots = vcs_[pool - 1].bound_cells;
  // The node's totals only: which sockets the replica needs is known once its GPUs are.
  const std::function<bool(int)> node_ok = [&](int node) {
    return NodeUsable(req, node) && req.demand.cpu_milli <= resources_.free_cpu_milli(node) &&
           req.demand.memory_mib <= resources_.free_memory_mib(node);
  };
  const std::function<bool(int, const std::vector<int>&)> fits = [&](int node,
                                                                     const std::vector<int>& ids) {
    if (mig) {
      int p, start, slot;
      return MigPlacement(req, node, ids[0], &p, &start, &slot);
    }
    return ShareFits(req, node, ids[0]);
  };
  std::vector<int> cells, ids;
  const int node = TakeGpusImpl(buddy_, *tree_, roots, types, pool, 1, req.only_node < 0, node_ok,
                                fits, &cells, &ids);
  if (node < 0) return -1;
  return cells[0];
}

bool Allocator::PlaceWhole(const AllocationRequest& req, int pool, int within,
                           ReplicaPlacement* out, Allocation* taken, int id) {
  const std::vector<int> types = WholeTypes(req.demand, false);
  std::vector<int> roots;
  if (within >= 0)
    roots.push_back(within);
  else if (pool == BuddyAllocator::kPhysicalPool)
    roots.push_back(tree_->root());
  else
    roots = vcs_[pool - 1].bound_cells;
  // The node's totals only: which sockets the replica needs is known once its GPUs are.
  const std::function<bool(int)> node_ok = [&](int node) {
    return NodeUsable(req, node) && req.demand.cpu_milli <= resources_.free_cpu_milli(node) &&
           req.demand.memory_mib <= resources_.free_memory_mib(node);
  };
  const std::function<bool(int, const std::vector<int>&)> fits =
      [&](int node, const std::vector<int>& ids) { return FitsNode(req, node, ids); };
  std::vector<int> cells, ids;
  const bool fast = within < 0 && req.only_node < 0;
  const int node = TakeGpusImpl(buddy_, *tree_, roots, types, pool, req.demand.gpus, fast, node_ok,
                                fits, &cells, &ids);
  if (node < 0) return false;
  for (int c : cells) HoldGpus(c, id);
  taken->whole_cells.insert(taken->whole_cells.end(), cells.begin(), cells.end());
  out->node = node;
  out->gpus = std::move(ids);
  return true;
}

void Allocator::SetGpuCrowded(int node, int gpu, bool crowded) {
  if (gpus_[node][gpu].crowded == crowded) return;
  gpus_[node][gpu].crowded = crowded;
  crowded_gpus_[node] += crowded ? 1 : -1;
  Touch(node);  // its candidates change
}

void Allocator::SetNodeReserved(int node, bool reserved) {
  if (reserved_nodes_[node] == reserved) return;
  reserved_nodes_[node] = reserved;
  Touch(node);  // its candidates change
}

bool Allocator::ShareFits(const AllocationRequest& req, int node, int gpu) const {
  const Demand& d = req.demand;
  const GpuState& g = gpus_[node][gpu];
  const GpuModel* model = gpu_models_[node][gpu];
  return gpu_usable(node, gpu) && ModelAllowed(d, model->name) &&
         g.used_milli + d.gpu_milli <= 1000 &&
         (model->memory_mib == 0 || g.used_memory_mib + d.gpu_memory_mib <= model->memory_mib) &&
         FitsNode(req, node, {gpu});
}

// Adds a share to a GPU already held for sharing (a fresh one is taken by the caller first).
void Allocator::AddShare(const AllocationRequest& req, int pool, int leaf, ReplicaPlacement* out) {
  const Demand& d = req.demand;
  const Cell& c = tree_->cells()[leaf];
  GpuState& g = gpus_[c.node][c.gpu];
  auto& shared = shared_gpus_[pool];
  shared.erase({1000 - g.used_milli, leaf});
  g.holder = kShared;
  g.used_milli += d.gpu_milli;
  g.used_memory_mib += d.gpu_memory_mib;
  ++g.shares;
  if (!req.opportunistic) ++g.guaranteed_shares;
  if (g.used_milli < 1000) shared.insert({1000 - g.used_milli, leaf});
  RefreshBacking(leaf);
  Touch(c.node);
  out->node = c.node;
  out->gpus = {c.gpu};
  out->gpu_milli = d.gpu_milli;
  out->gpu_memory_mib = d.gpu_memory_mib;
}

bool Allocator::PlaceShare(const AllocationRequest& req, int pool, ReplicaPlacement* out) {
  // Best fit among GPUs already shared: the least free milli that still fits.
  int leaf = -1;
  const auto& shared = shared_gpus_[pool];
  for (auto it = shared.lower_bound({req.demand.gpu_milli, -1}); it != shared.end(); ++it) {
    const Cell& c = tree_->cells()[it->second];
    if (ShareFits(req, c.node, c.gpu)) {
      leaf = it->second;
      break;
    }
  }
  if (leaf < 0) leaf = TakeFreshGpu(req, pool, false);
  if (leaf < 0) return false;
  AddShare(req, pool, leaf, out);
  return true;
}

// Where an instance of the requested profile goes on one GPU: its profile index, start slot
// and (for a fixed geometry) the layout slot; false when it does not fit there.
bool Allocator::MigPlacement(const AllocationRequest& req, int node, int gpu, int* p, int* start,
                             int* slot) const {
  const GpuState& g = gpus_[node][gpu];
  const GpuModel* model = gpu_models_[node][gpu];
  if (!cluster_->nodes[node].gpus[gpu].mig_enabled || !gpu_usable(node, gpu) ||
      !ModelAllowed(req.demand, model->name))
    return false;
  *p = FindMigProfile(model->mig_profiles, req.demand.mig_profile);
  if (*p < 0) return false;
  *slot = -1;
  if (!g.fixed.empty()) {
    for (size_t i = 0; i < g.fixed.size(); ++i)
      if (!g.fixed_used[i] && g.fixed[i].profile == *p) {
        *slot = static_cast<int>(i);
        *start = g.fixed[i].start;
        return FitsNode(req, node, {gpu});
      }
    return false;
  }
  *start = g.mig.BestStart(model->mig_profiles, *p);
  return *start >= 0 && FitsNode(req, node, {gpu});
}

void Allocator::AddMigInstance(const AllocationRequest& req, int pool, int leaf, int p, int start,
                               int slot, ReplicaPlacement* out) {
  const Cell& c = tree_->cells()[leaf];
  GpuState& g = gpus_[c.node][c.gpu];
  const auto& profiles =
      cluster_->FindModel(cluster_->nodes[c.node].gpus[c.gpu].model)->mig_profiles;
  g.holder = kMig;
  mig_gpus_[pool].insert(leaf);
  g.mig.Place(profiles, p, start);
  if (slot >= 0) g.fixed_used[slot] = 1;
  ++g.shares;
  if (!req.opportunistic) ++g.guaranteed_shares;
  RefreshBacking(leaf);
  Touch(c.node);
  out->node = c.node;
  out->gpus = {c.gpu};
  out->mig_profile = p;
  out->mig_start = start;
}

bool Allocator::PlaceMig(const AllocationRequest& req, int pool, ReplicaPlacement* out) {
  int best = -1, best_p = -1, best_start = -1, best_slot = -1, best_free = kMigMemorySlots + 1;
  for (int leaf : mig_gpus_[pool]) {
    const Cell& c = tree_->cells()[leaf];
    int p, start, slot;
    if (!MigPlacement(req, c.node, c.gpu, &p, &start, &slot)) continue;
    // Pack: the GPU with the fewest free memory slots wins.
    const int free = kMigMemorySlots - __builtin_popcount(gpus_[c.node][c.gpu].mig.used_slots());
    if (free < best_free)
      best = leaf, best_p = p, best_start = start, best_slot = slot, best_free = free;
  }
  if (best < 0) {
    best = TakeFreshGpu(req, pool, true);
    if (best < 0) return false;
    const Cell& c = tree_->cells()[best];
    MigPlacement(req, c.node, c.gpu, &best_p, &best_start, &best_slot);  // TakeFreshGpu checked it
  }
  AddMigInstance(req, pool, best, best_p, best_start, best_slot, out);
  return true;
}

bool Allocator::PlaceCpuOnly(const AllocationRequest& req, ReplicaPlacement* out) {
  // Best fit on CPU: the usable node with the least free CPU that still fits.
  int best = -1;
  for (size_t n = 0; n < cluster_->nodes.size(); ++n) {
    const int node = static_cast<int>(n);
    if (!NodeUsable(req, node) ||
        !resources_.Fits(node, {}, req.demand.cpu_milli, req.demand.memory_mib))
      continue;
    if (best < 0 || resources_.free_cpu_milli(node) < resources_.free_cpu_milli(best)) best = node;
  }
  if (best < 0) return false;
  out->node = best;
  return true;
}

bool Allocator::PlaceReplica(const AllocationRequest& req, int pool, int within,
                             PlacementChooser* chooser, int limit,
                             const std::vector<ReplicaPlacement>& placed, ReplicaPlacement* out,
                             Allocation* taken, int id, std::string* why) {
  const Demand& d = req.demand;
  // A later replica continues the scan of the one before (of the same pool), unless a bind
  // added nodes since.
  bool next_replica = !placed.empty();
  auto place_in = [&](int pool) {
    if (req.exact) {
      Candidate c;
      if (placed.size() >= req.exact->size() ||
          !ExactCandidate(req, pool, (*req.exact)[placed.size()], &c))
        return false;
      Commit(req, pool, c, out, taken, id);
      return true;
    }
    if (chooser) {
      const CandidateList& candidates =
          Enumerate(req, pool, limit, next_replica && enumerated_.pool == pool);
      if (candidates.empty()) return false;
      int pick = chooser->Choose(req, candidates, placed, 0);
      // Nodes the filters refuse (a node selector, a spread constraint, telemetry) do not count
      // towards the limit: the scan goes on with as many nodes as are missing.
      for (int feasible = chooser->feasible_runs(); feasible >= 0 && feasible < limit;
           feasible = chooser->feasible_runs()) {
        const size_t first = candidates.size();
        if (!EnumerateMore(req, limit - feasible)) break;
        pick = chooser->Choose(req, candidates, placed, first);
      }
      if (pick < 0) return false;
      Commit(req, pool, candidates[pick], out, taken, id);
      return true;
    }
    if (d.gpus > 0) return PlaceWhole(req, pool, within, out, taken, id);
    if (d.gpu_milli > 0) return PlaceShare(req, pool, out);
    if (!d.mig_profile.empty()) return PlaceMig(req, pool, out);
    return PlaceCpuOnly(req, out);
  };
  auto place = [&] { return place_in(pool); };
  bool ok = place();
  // A VC whose bound cells are full binds other cells of its guarantee, if it has some left.
  while (!ok && req.exact && pool != BuddyAllocator::kPhysicalPool &&
         placed.size() < req.exact->size() && BindExact(req, (*req.exact)[placed.size()], taken))
    ok = place();
  while (!ok && !req.exact && pool != BuddyAllocator::kPhysicalPool && within < 0 &&
         BindFor(req, taken)) {
    next_replica = false;
    ok = place();
  }
  if (!ok && req.opportunistic && req.lent && d.gpus > 0 && pool == BuddyAllocator::kPhysicalPool &&
      within < 0) {
    if (req.exact) {
      // Re-created where it was decided, in whichever pool its GPUs lie now.
      const int lent = placed.size() < req.exact->size() ? ExactPool((*req.exact)[placed.size()])
                                                         : BuddyAllocator::kPhysicalPool;
      if (lent != BuddyAllocator::kPhysicalPool) ok = place_in(lent);
    } else {
      for (size_t i = 0; i < lending_pools_.size() && !ok; ++i)
        if (lending_pools_[i] != req.vc + 1 && LentRoom(i, d.gpus))
          ok = place_in(lending_pools_[i]);
    }
  }
  if (!ok) {
    *why = "no capacity fits the job";
    return false;
  }
  const bool has_gpu = d.gpus > 0 || d.gpu_milli > 0 || !d.mig_profile.empty();
  out->sockets = has_gpu ? SocketsOf(out->node, out->gpus) : std::vector<int>{};
  out->cpu_milli = d.cpu_milli;
  out->memory_mib = d.memory_mib;
  resources_.Take(out->node, out->sockets, d.cpu_milli, d.memory_mib);
  Touch(out->node);
  out->cpus = resources_.PinnedCpus(out->node, out->sockets);
  if (!has_gpu)
    for (size_t s = 0; s < cluster_->nodes[out->node].sockets.size(); ++s)
      out->sockets.push_back(static_cast<int>(s));
  return true;
}

// The candidates of one node below `root` (a cell of the pool; -1 for CPU-only replicas).
void Allocator::AddCandidatesOnNode(const AllocationRequest& req, const std::vector<int>& types,
                                    int node, int root, std::vector<Candidate>* out) const {
  const Demand& d = req.demand;
  if (!NodeUsable(req, node)) return;
  if (d.gpus == 0 && d.gpu_milli == 0 && d.mig_profile.empty()) {
    if (resources_.Fits(node, {}, d.cpu_milli, d.memory_mib))
      out->push_back({node, {}, Level::kNode, {}});
    return;
  }
  // The node's totals only: which sockets the replica needs is known once its GPUs are.
  if (d.cpu_milli > resources_.free_cpu_milli(node) ||
      d.memory_mib > resources_.free_memory_mib(node))
    return;
  const int pool = buddy_.pool(root);
  const auto& cells = tree_->cells();
  // Offers the cells of `type` below `root` with `count` free GPUs to `accept`: the best fit
  // first, then (only if it is refused, e.g. a socket's CPU or a GPU's own limits, or on a node
  // with reserved GPUs) the others by free GPUs. Returns whether one was accepted.
  const bool every_cell = reserved_nodes_[node];
  auto first_accepted = [&](int type, int count, const auto& accept) {
    const int best = buddy_.FindWithin(root, type, count, nullptr);
    if (best < 0) return false;
    bool accepted = accept(best);
    if (accepted && !every_cell) return true;
    std::vector<std::pair<int, int>> others;
    for (int c = root; c < tree_->subtree_end(root); ++c) {
      if (c == best || cells[c].type != type || buddy_.pool(c) != pool ||
          buddy_.free_leaves(c) < count)
        continue;
      bool inside_taken = false;
      for (int a = c; a >= 0 && buddy_.pool(a) == pool && !inside_taken; a = cells[a].parent)
        inside_taken = buddy_.taken(a);
      if (!inside_taken) others.push_back({buddy_.free_leaves(c), c});
    }
    std::sort(others.begin(), others.end());
    for (const auto& [free, c] : others) {
      accepted = accept(c) || accepted;
      if (accepted && !every_cell) return true;
    }
    return accepted;
  };
  auto gpus_of = [&](const std::vector<int>& taken_cells) {
    std::vector<int> ids;
    for (int cell : taken_cells)
      for (int x = cell; x < tree_->subtree_end(cell); ++x)
        if (cells[x].gpu >= 0) ids.push_back(cells[x].gpu);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  const bool mig = !d.mig_profile.empty();
  // Crowded GPUs are gone around first, a cell's other free GPUs planned instead; where nothing
  // else fits, offered as they are (a filter of observed use then refuses them, and the job
  // retries, rather than finding no room).
  bool around_crowded = crowded_gpus_[node] > 0;
  const auto crowded = [&](int gpu) { return around_crowded && gpus_[node][gpu].crowded; };
  // A one-GPU cell holding a crowded GPU (the GPU's own cell, or one declared around it).
  std::function<bool(int)> crowded_cell;  // none on a node without crowded GPUs: no cost there
  if (around_crowded)
    crowded_cell = [&](int c) {
      for (int x = c; x < tree_->subtree_end(c); ++x)
        if (cells[x].gpu >= 0 && crowded(cells[x].gpu)) return true;
      return false;
    };
  static const std::function<bool(int)> kAvoidNone;
  if (d.gpus > 0) {
    if (buddy_.free_leaves(root) < d.gpus) return;
    for (;; around_crowded = false) {
      for (int type : types) {
        const auto accept = [&](int c) {
          Candidate cand{node, {}, tree_->types()[type].tight_level, {}};
          if (!buddy_.PlanLeaves(c, d.gpus, &cand.cells,
                                 around_crowded ? crowded_cell : kAvoidNone))
            return false;
          cand.gpus = gpus_of(cand.cells);
          if (!FitsNode(req, node, cand.gpus) ||
              std::any_of(cand.gpus.begin(), cand.gpus.end(), crowded))
            return false;
          out->push_back(std::move(cand));
          return true;
        };
        if (first_accepted(type, d.gpus, accept)) return;
      }
      if (!around_crowded) return;
    }
  }
  // Shares and MIG slices: every GPU of the node already carved or shared that fits, plus one
  // fresh GPU. Shared GPUs in the same state are one candidate: no plugin can tell them apart.
  // On a node with reserved GPUs, which the chooser's filter does tell apart, every one is.
  const size_t first = out->size();
  for (size_t g = 0; g < gpus_[node].size(); ++g) {
    const int gpu = static_cast<int>(g);
    const int leaf = tree_->gpu_cell(node, gpu);
    if (leaf < 0 || buddy_.pool(leaf) != pool || !tree_->IsWithin(leaf, root)) continue;
    const GpuState& st = gpus_[node][gpu];
    if (!mig && st.holder == kShared && ShareFits(req, node, gpu)) {
      bool same = false;
      for (size_t i = first; i < out->size() && !same; ++i) {
        const GpuState& other = gpus_[node][(*out)[i].gpus[0]];
        same = other.used_milli == st.used_milli && other.used_memory_mib == st.used_memory_mib;
      }
      if (!same || every_cell) out->push_back({node, {gpu}, Level::kGpu, {}});
    }
    int p, start, slot;
    if (mig && st.holder == kMig && MigPlacement(req, node, gpu, &p, &start, &slot))
      out->push_back({node, {gpu}, Level::kGpu, {}, p, start, slot});
  }
  if (buddy_.free_leaves(root) == 0) return;
  for (around_crowded = crowded_gpus_[node] > 0;; around_crowded = false) {
    for (int type : types) {
      const auto accept = [&](int c) {
        const int gpu = cells[c].gpu;
        // A cell declared around a GPU is no GPU: that GPU's own cell (its type is tried first)
        // is the candidate.
        if (gpu < 0) return false;
        int p, start, slot;
        if (crowded(gpu) ||
            !(mig ? MigPlacement(req, node, gpu, &p, &start, &slot) : ShareFits(req, node, gpu)))
          return false;
        Candidate cand{node, {gpu}, Level::kGpu, {c}};
        if (mig) cand.mig_profile = p, cand.mig_start = start, cand.mig_slot = slot;
        out->push_back(std::move(cand));
        return true;
      };
      if (first_accepted(type, 1, accept)) return;
    }
    if (!around_crowded) return;
  }
}

const Candidate& CandidateList::operator[](size_t i) const {
  auto run = std::upper_bound(runs_.begin(), runs_.end(), i,
                              [](size_t index, const Run& r) { return index < r.start; });
  --run;
  return (*run->candidates)[i - run->start];
}

int Allocator::RowOf(const Demand& demand) {
  CandidateCache& cache = *cache_;
  size_t shape = 0;
  while (shape < cache.shapes.size() && !(cache.shapes[shape] == demand)) ++shape;
  if (shape == cache.shapes.size()) {
    if (shape == kMaxShapes) {  // start over rather than grow without end
      cache.shapes.clear();
      cache.row_of.clear();
      for (CacheRow& row : cache.rows) row.shape = -1;
      shape = 0;
    }
    cache.shapes.push_back(demand);
    cache.row_of.push_back(-1);
  }
  int& row = cache.row_of[shape];
  if (row < 0) {
    if (cache.rows.size() < kCachedShapes) {
      row = static_cast<int>(cache.rows.size());
      cache.rows.emplace_back().nodes.resize(cluster_->nodes.size());
    } else {
      row = 0;
      for (size_t r = 1; r < cache.rows.size(); ++r)
        if (cache.rows[r].used < cache.rows[row].used) row = static_cast<int>(r);
      if (cache.rows[row].shape >= 0) cache.row_of[cache.rows[row].shape] = -1;
      for (CacheEntry& entry : cache.rows[row].nodes) entry.version = 0;
    }
    cache.rows[row].shape = static_cast<int>(shape);
  }
  cache.rows[row].used = ++cache.uses;
  return row;
}

const std::vector<Candidate>& Allocator::CandidatesOnNode(const AllocationRequest& req, int row,
                                                          const std::vector<int>& types, int node,
                                                          int root, uint64_t* version) {
  *version = 0;
  if (root >= 0 && root != tree_->node_cell(node)) {  // below the node (bound to a VC): not cached
    auto& runs = enumerated_.uncached;
    if (enumerated_.uncached_used == runs.size()) runs.emplace_back();
    std::vector<Candidate>& run = runs[enumerated_.uncached_used++];
    run.clear();
    AddCandidatesOnNode(req, types, node, root, &run);
    return run;
  }
  CacheEntry& entry = cache_->rows[row].nodes[node];
  *version = node_version_[node];
  if (entry.version != *version) {
    entry.version = *version;
    entry.candidates.clear();
    AddCandidatesOnNode(req, types, node, root, &entry.candidates);
  }
  return entry.candidates;
}

const CandidateList& Allocator::Enumerate(const AllocationRequest& req, int pool, int limit,
                                          bool next_replica) {
  Scratch& e = enumerated_;
  if (!next_replica) {
    StartScan(req, pool, limit);
  } else {
    // The request's next replica. Its own placements are the only change since the last scan,
    // and they only take capacity: a picked node that is unchanged keeps its run, a changed one
    // is looked at again, and each that no longer offers any is made up for from the scan's
    // remainder. The result is the scan's as if started afresh from the same node, over as many
    // nodes as the last replica's went on to.
    size_t kept = 0;
    for (Scratch::Pick& pick : e.picked) {
      if (pick.version != node_version_[pick.node]) {
        pick.run = &CandidatesOnNode(req, e.row, e.types, pick.node, pick.root, &pick.version);
        if (pick.run->empty()) continue;
      }
      e.picked[kept++] = pick;
    }
    e.picked.resize(kept);
  }
  ScanOn(req);
  e.list.Clear();
  for (const Scratch::Pick& pick : e.picked) e.list.Add(*pick.run, pick.version);
  return e.list;
}

bool Allocator::EnumerateMore(const AllocationRequest& req, int more) {
  Scratch& e = enumerated_;
  if (e.limit <= 0) return false;  // not bounded: every node was offered
  const size_t before = e.picked.size();
  // Kept for the request's next replica, which continues this scan.
  e.limit = static_cast<int>(before) + more;
  ScanOn(req);
  for (size_t i = before; i < e.picked.size(); ++i)
    e.list.Add(*e.picked[i].run, e.picked[i].version);
  return e.picked.size() > before;
}

void Allocator::ScanOn(const AllocationRequest& req) {
  Scratch& e = enumerated_;
  const int n = static_cast<int>(e.roots.size());
  while (e.scanned < n && (e.limit <= 0 || static_cast<int>(e.picked.size()) < e.limit)) {
    const auto& [node, root] = e.roots[(e.first + e.scanned++) % n];
    Scratch::Pick pick{node, root, 0, nullptr};
    pick.run = &CandidatesOnNode(req, e.row, e.types, node, root, &pick.version);
    if (!pick.run->empty()) e.picked.push_back(pick);
  }
}

void Allocator::StartScan(const AllocationRequest& req, int pool, int limit) {
  Scratch& e = enumerated_;
  const Demand& d = req.demand;
  const bool cpu_only = d.gpus == 0 && d.gpu_milli == 0 && d.mig_profile.empty();
  // Each node with the cell below which its candidates lie. Scratch vectors are reused: an
  // allocation per enumeration costs more than a cached node's visit.
  std::vector<std::pair<int, int>>& roots = e.roots;
  roots.clear();
  if (!e.confine.empty()) {  // a gang's plan
    roots.resize(e.confine.size());
    for (size_t i = 0; i < roots.size(); ++i)
      roots[i] = {e.confine[i], tree_->node_cell(e.confine[i])};
  } else if (cpu_only) {
    for (size_t n = 0; n < cluster_->nodes.size(); ++n) roots.push_back({static_cast<int>(n), -1});
  } else if (pool == BuddyAllocator::kPhysicalPool && d.gpus > 0) {
    // Only nodes with that many free GPUs can offer any: the buddy allocator's buckets name them
    // without a visit to every node.
    // Marked per node and read back in node order: cheaper than sorting them.
    std::vector<int>& node_cells = e.node_cells;
    node_cells.clear();
    for (int type : node_types_) buddy_.CellsWithFree(pool, type, d.gpus, &node_cells);
    std::vector<int>& root_of = e.root_of;
    root_of.assign(cluster_->nodes.size(), -1);
    for (int cell : node_cells) root_of[tree_->cells()[cell].node] = cell;
    for (size_t n = 0; n < root_of.size(); ++n)
      if (root_of[n] >= 0) roots.push_back({static_cast<int>(n), root_of[n]});
  } else if (pool == BuddyAllocator::kPhysicalPool) {
    for (size_t n = 0; n < cluster_->nodes.size(); ++n) {
      const int cell = tree_->node_cell(static_cast<int>(n));
      if (cell >= 0 && buddy_.pool(cell) == pool) roots.push_back({static_cast<int>(n), cell});
    }
  } else {
    AddBoundRoots(pool - 1, &roots);
  }
  if (req.only_node >= 0)
    roots.erase(std::remove_if(roots.begin(), roots.end(),
                               [&](const auto& r) { return r.first != req.only_node; }),
                roots.end());
  // Candidates come in node order (ties go to the first); the scan of every node is in order.
  if (!std::is_sorted(roots.begin(), roots.end())) std::sort(roots.begin(), roots.end());
  e.types = cpu_only ? std::vector<int>{} : WholeTypes(d, !d.mig_profile.empty());
  e.row = RowOf(d);
  e.uncached_used = 0;
  e.picked.clear();
  e.scanned = 0;
  e.first = 0;
  e.limit = 0;
  e.pool = pool;
  if (limit > 0 && static_cast<int>(roots.size()) > limit) {
    // Bounded: nodes in rotation, from node `rotation_` on, so that successive decisions look
    // at different nodes.
    e.first = static_cast<int>(
        std::lower_bound(roots.begin(), roots.end(), std::make_pair(rotation_, -1)) -
        roots.begin());
    e.limit = limit;
    rotation_ = (rotation_ + 1) % static_cast<int>(cluster_->nodes.size());
  }
}

bool Allocator::PlanGang(const AllocationRequest& req) {
  const Demand& d = req.demand;
  const auto& cells = tree_->cells();
  Scratch& e = enumerated_;
  e.confine.clear();
  // How many replicas each node with room could hold, by its free GPUs (of a model the demand
  // may use), CPU and memory, summed into every cell above it.
  std::vector<int>& node_cells = e.node_cells;
  node_cells.clear();
  for (int type : node_types_)
    buddy_.CellsWithFree(BuddyAllocator::kPhysicalPool, type, d.gpus, &node_cells);
  e.slots.resize(cells.size());
  size_t nodes_with_room = 0;
  for (int cell : node_cells) {
    const CellType& type = tree_->type_of(cell);
    const int node = cells[cell].node;
    if (type.mig || type.model.empty() || !ModelAllowed(d, type.model) || cordoned_[node]) continue;
    int64_t n = buddy_.free_leaves(cell) / d.gpus;
    if (d.cpu_milli > 0) n = std::min(n, resources_.free_cpu_milli(node) / d.cpu_milli);
    if (d.memory_mib > 0) n = std::min(n, resources_.free_memory_mib(node) / d.memory_mib);
    if (n <= 0) continue;
    ++nodes_with_room;
    for (int c = cell; c >= 0; c = cells[c].parent) {
      if (e.slots[c] == 0) e.counted.push_back(c);
      e.slots[c] += static_cast<int>(n);
    }
  }
  // Top down: a cell's share of the replicas goes into the fewest of its children that hold
  // it, each time the fullest child (fewest slots, then fewest free GPUs) that leaves the rest
  // of the share room in as many others as are still to be picked. Above the gang's affinity
  // level the share must fit one child.
  const Level loosest = req.gang_affinity.value_or(Level::kCluster);
  const auto plan = [&](const auto& self, int cell, int replicas) -> bool {
    if (cells[cell].node >= 0) {
      e.confine.push_back(cells[cell].node);
      return true;
    }
    std::vector<std::tuple<int, int, int>> kids;  // (slots, free GPUs, cell), fullest first
    for (int c : cells[cell].children)
      if (e.slots[c] > 0) kids.push_back({e.slots[c], buddy_.free_leaves(c), c});
    std::sort(kids.begin(), kids.end());
    const bool level_free = tree_->type_of(cell).level <= loosest;
    if (level_free && std::get<0>(kids.back()) == 1 &&
        std::all_of(kids.begin(), kids.end(),
                    [&](const auto& kid) { return cells[std::get<2>(kid)].node >= 0; })) {
      // Nodes that hold one replica each: any of them is as few as any other, and the chooser
      // picks which.
      for (const auto& kid : kids) e.confine.push_back(cells[std::get<2>(kid)].node);
      return true;
    }
    if (!level_free) {
      const size_t before = e.confine.size();
      for (const auto& [slots, free, c] : kids) {
        if (slots < replicas) continue;
        if (self(self, c, replicas)) return true;
        e.confine.resize(before);
      }
      return false;
    }
    // Room in the `n` largest children.
    const auto largest = [&](int n) {
      int sum = 0;
      for (size_t i = kids.size(); i > 0 && n > 0; --i, --n) sum += std::get<0>(kids[i - 1]);
      return sum;
    };
    int picks = 0;
    while (largest(picks) < replicas) ++picks;
    for (int left = replicas; left > 0; --picks) {
      const int top = largest(picks), top_but_one = largest(picks - 1);
      size_t i = 0;
      for (; i < kids.size(); ++i) {
        const int slots = std::get<0>(kids[i]);
        // The other children's room: the picks - 1 largest but this one.
        const int others = i + picks > kids.size() ? top - slots : top_but_one;
        if (slots + others >= left) break;
      }
      const int share = std::min(std::get<0>(kids[i]), left);
      if (!self(self, std::get<2>(kids[i]), share)) return false;
      left -= share;
      kids.erase(kids.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return true;
  };
  const int root = tree_->root();
  const bool planned = e.slots[root] >= req.replicas && plan(plan, root, req.replicas);
  for (int c : e.counted) e.slots[c] = 0;
  e.counted.clear();
  if (!planned || e.confine.size() == nodes_with_room) {
    e.confine.clear();
    return false;
  }
  std::sort(e.confine.begin(), e.confine.end());
  return true;
}

void Allocator::Commit(const AllocationRequest& req, int pool, const Candidate& c,
                       ReplicaPlacement* out, Allocation* taken, int id) {
  const Demand& d = req.demand;
  out->node = c.node;
  if (d.gpus > 0) {
    for (int cell : c.cells) {
      buddy_.TakeCell(cell);
      HoldGpus(cell, id);
    }
    taken->whole_cells.insert(taken->whole_cells.end(), c.cells.begin(), c.cells.end());
    out->gpus = c.gpus;
    return;
  }
  if (c.gpus.empty()) return;  // CPU-only
  const int leaf = tree_->gpu_cell(c.node, c.gpus[0]);
  if (!c.cells.empty()) buddy_.TakeCell(leaf);  // a fresh GPU
  if (d.gpu_milli > 0)
    AddShare(req, pool, leaf, out);
  else
    AddMigInstance(req, pool, leaf, c.mig_profile, c.mig_start, c.mig_slot, out);
}

std::vector<int> Allocator::NeededByGuarantees() const {
  std::vector<int> needed(tree_->types().size(), 0);
  for (const VirtualCluster& vc : vcs_)
    for (size_t i = 0; i < vc.guarantee_types.size(); ++i)
      needed[vc.guarantee_types[i]] += vc.guarantee_counts[i] - vc.bound_counts[i];
  return needed;
}

bool Allocator::ComputeBackable(int cell, const std::vector<int>& backable_children) const {
  const Cell& c = tree_->cells()[cell];
  if (buddy_.pool(cell) != BuddyAllocator::kPhysicalPool) return false;
  if (c.gpu < 0) return backable_children[cell] == static_cast<int>(c.children.size());
  if (!gpu_usable(c.node, c.gpu)) return false;
  const GpuState& g = gpus_[c.node][c.gpu];
  if (g.holder == kShared || g.holder == kMig) return g.guaranteed_shares == 0;
  if (g.holder >= 0) return allocations_.at(g.holder)->preemptible;
  return g.holder == kFree;
}

bool Allocator::Counted(int cell) const {
  const int parent = tree_->cells()[cell].parent;
  return backable_[cell] && (parent < 0 || !backable_[parent]);
}

// Whether a cell counts as a maximal backable cell depends on it and its parent only, so a
// change is accounted for on the cell and its children.
void Allocator::SetBackable(int cell, bool backable) {
  if (static_cast<bool>(backable_[cell]) == backable) return;
  const Cell& c = tree_->cells()[cell];
  auto account = [&](int sign) {
    if (Counted(cell)) available_[c.type] += sign;
    for (int child : c.children)
      if (Counted(child)) available_[tree_->cells()[child].type] += sign;
  };
  account(-1);
  backable_[cell] = backable;
  account(+1);
  if (c.parent >= 0) backable_children_[c.parent] += backable ? 1 : -1;
}

void Allocator::RefreshBacking(int cell) {
  for (int c = tree_->subtree_end(cell) - 1; c >= cell; --c)
    SetBackable(c, ComputeBackable(c, backable_children_));
  for (int a = tree_->cells()[cell].parent; a >= 0; a = tree_->cells()[a].parent) {
    const bool now = ComputeBackable(a, backable_children_);
    if (static_cast<bool>(backable_[a]) == now) break;  // nothing above can change either
    SetBackable(a, now);
  }
}

void Allocator::Promise(int vc, const std::vector<int>& cells, int sign) {
  VirtualCluster& v = vcs_[vc];
  for (int cell : cells)
    for (size_t i = 0; i < v.guarantee_types.size(); ++i)
      if (v.guarantee_types[i] == tree_->cells()[cell].type) {
        v.promised_counts[i] += sign;
        break;
      }
}

int Allocator::BoundVcOfGpu(int node, int gpu) const {
  const int leaf = tree_->gpu_cell(node, gpu);
  return leaf < 0 ? -1 : BoundVc(leaf);
}

int Allocator::FreeGpusOn(int node, int vc, bool borrowed_free) const {
  const int cell = tree_->node_cell(node);
  if (cell < 0) return 0;
  if (vc < 0) {
    int free = FreeInPool(node, cell, BuddyAllocator::kPhysicalPool);
    if (!lent_node_[node]) return free;
    for (int pool : lending_pools_) {
      const std::vector<int>& bound = vcs_[pool - 1].bound_nodes;
      if (std::binary_search(bound.begin(), bound.end(), node))
        free += FreeInPool(node, cell, pool);
    }
    return free;
  }
  if (!borrowed_free || lent_held_[node] == 0) return FreeInPool(node, cell, vc + 1);
  int free = 0;
  for (size_t g = 0; g < gpus_[node].size(); ++g) {
    const int leaf = tree_->gpu_cell(node, static_cast<int>(g));
    if (leaf < 0 || buddy_.pool(leaf) != vc + 1) continue;
    const int holder = gpus_[node][g].holder;
    if (gpu_free(node, static_cast<int>(g)) ||
        (holder >= 0 && allocations_.at(holder)->preemptible))
      ++free;
  }
  return free;
}

bool Allocator::LentRoom(size_t lending, int gpus) const {
  for (int type : lent_types_[lending])
    if (buddy_.FindFast(lending_pools_[lending], type,
                        tree_->types()[type].level < Level::kNode ? 1 : gpus) >= 0)
      return true;
  return false;
}

int Allocator::ExactPool(const ReplicaPlacement& target) const {
  if (target.node < 0 || target.node >= static_cast<int>(gpus_.size()) || target.gpus.empty() ||
      target.gpus[0] < 0 || target.gpus[0] >= static_cast<int>(gpus_[target.node].size()))
    return BuddyAllocator::kPhysicalPool;
  return BoundVcOfGpu(target.node, target.gpus[0]) + 1;
}

int Allocator::FreeInPool(int node, int cell, int pool) const {
  if (buddy_.pool(cell) == pool) {
    // Counts below a cell taken whole are not kept up to date: nothing is free there.
    for (int a = cell; a >= 0 && buddy_.pool(a) == pool; a = tree_->cells()[a].parent)
      if (buddy_.taken(a)) return 0;
    return buddy_.free_leaves(cell);
  }
  if (pool == BuddyAllocator::kPhysicalPool || buddy_.pool(cell) != BuddyAllocator::kPhysicalPool)
    return 0;
  // Cells below the node bound to vc: their GPUs one by one.
  int free = 0;
  for (size_t g = 0; g < gpus_[node].size(); ++g) {
    const int leaf = tree_->gpu_cell(node, static_cast<int>(g));
    if (leaf >= 0 && buddy_.pool(leaf) == pool && gpu_free(node, static_cast<int>(g))) ++free;
  }
  return free;
}

void Allocator::AddBoundRoots(int vc, std::vector<std::pair<int, int>>* roots) const {
  for (int bound : vcs_[vc].bound_cells) {
    if (tree_->type_of(bound).level <= Level::kNode) {
      roots->push_back({tree_->cells()[bound].node, bound});
      continue;
    }
    for (int c = bound; c < tree_->subtree_end(bound); ++c)
      if (tree_->type_of(c).level == Level::kNode) roots->push_back({tree_->cells()[c].node, c});
  }
}

void Allocator::NodesWithFree(int vc, int gpus, std::vector<int>* nodes) const {
  nodes->clear();
  if (vc < 0) {
    thread_local std::vector<int> cells;
    cells.clear();
    for (int type : node_types_)
      buddy_.CellsWithFree(BuddyAllocator::kPhysicalPool, type, gpus, &cells);
    for (int cell : cells) nodes->push_back(tree_->cells()[cell].node);
    // Borrowers may also take the free GPUs of lending VCs' cells: those of a node-sized cell
    // with enough of them, or any below a node (several small cells may add up), each node once.
    cells.clear();
    for (size_t i = 0; i < lending_pools_.size(); ++i)
      if (!vcs_[lending_pools_[i] - 1].bound_cells.empty())
        for (int type : lent_types_[i])
          buddy_.CellsWithFree(lending_pools_[i], type,
                               tree_->types()[type].level < Level::kNode ? 1 : gpus, &cells);
    if (cells.empty()) return;
    thread_local std::vector<char> listed;  // all 0 between calls
    if (listed.size() < cluster_->nodes.size()) listed.resize(cluster_->nodes.size(), 0);
    for (int n : *nodes) listed[n] = 1;
    for (int cell : cells) {
      const int n = tree_->cells()[cell].node;
      if (!listed[n]) nodes->push_back(n);
      listed[n] = 1;
    }
    for (int n : *nodes) listed[n] = 0;
  } else {
    *nodes = vcs_[vc].bound_nodes;  // the VC's free GPUs lie on the nodes of its bound cells
  }
}

void Allocator::ListBoundNodes(int vc) {
  thread_local std::vector<std::pair<int, int>> roots;
  roots.clear();
  AddBoundRoots(vc, &roots);
  std::vector<int>& nodes = vcs_[vc].bound_nodes;
  nodes.clear();
  for (const auto& [node, root] : roots) nodes.push_back(node);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (std::find(lending_pools_.begin(), lending_pools_.end(), vc + 1) == lending_pools_.end())
    return;
  std::fill(lent_node_.begin(), lent_node_.end(), 0);
  for (int pool : lending_pools_)
    for (int n : vcs_[pool - 1].bound_nodes) lent_node_[n] = 1;
}

int Allocator::ReplicaSlots(int vc, int gpus, int enough, bool borrowed_free) const {
  thread_local std::vector<int> nodes;
  NodesWithFree(vc, gpus, &nodes);
  int slots = 0;
  for (size_t i = 0; i < nodes.size() && slots < enough; ++i)
    slots += FreeGpusOn(nodes[i], vc, borrowed_free) / gpus;
  return slots;
}

int Allocator::UnboundGuaranteeGpus(int vc) const {
  const VirtualCluster& v = vcs_[vc];
  int gpus = 0;
  for (size_t i = 0; i < v.guarantee_types.size(); ++i)
    gpus += (v.guarantee_counts[i] - v.bound_counts[i]) *
            tree_->types()[v.guarantee_types[i]].leaf_count;
  return gpus;
}

int Allocator::UnlentShortfallGpus(int except_vc) const {
  const size_t types = tree_->types().size();
  std::vector<int> free(types, 0), needed(types, 0);
  for (size_t t = 0; t < types; ++t)
    free[t] = static_cast<int>(buddy_.free_list(BuddyAllocator::kPhysicalPool, t).size());
  for (size_t v = 0; v < vcs_.size(); ++v) {
    if (static_cast<int>(v) == except_vc) continue;
    const VirtualCluster& vc = vcs_[v];
    for (size_t i = 0; i < vc.guarantee_types.size(); ++i)
      needed[vc.guarantee_types[i]] += std::max(0, vc.unlent_counts[i] - vc.bound_counts[i]);
  }
  return ShortfallGpus(*tree_, GuaranteeShortfall(*tree_, free, needed));
}

int Allocator::GuaranteeShortfallGpus() const {
  return ShortfallGpus(*tree_, GuaranteeShortfall(*tree_, available_, NeededByGuarantees()));
}

bool Allocator::BindFor(const AllocationRequest& req, Allocation* taken) {
  VirtualCluster& vc = vcs_[req.vc];
  const Demand& d = req.demand;
  const std::vector<int> wanted =
      d.gpus > 0 ? WholeTypes(d, false) : WholeTypes(d, !d.mig_profile.empty());
  // The smallest guarantee type with cells left that can hold the replica.
  int pick = -1;
  for (size_t i = 0; i < vc.guarantee_types.size(); ++i) {
    if (vc.bound_counts[i] + vc.promised_counts[i] >= vc.guarantee_counts[i]) continue;
    const int g = vc.guarantee_types[i];
    const bool useful =
        std::any_of(wanted.begin(), wanted.end(), [&](int t) { return tree_->Contains(g, t); });
    if (!useful) continue;
    if (pick < 0 ||
        tree_->types()[g].leaf_count < tree_->types()[vc.guarantee_types[pick]].leaf_count)
      pick = static_cast<int>(i);
  }
  if (pick < 0) return false;
  const int before = GuaranteeShortfallGpus();
  // Another VC's unlent cells stay free for it: this VC reclaims a borrowed cell instead.
  const int unlent_before = keeps_unlent_ ? UnlentShortfallGpus(req.vc) : -1;
  // A free cell on a node no reservation touches first: binding one under a borrower's reserved
  // GPUs would break that borrower's plan after its victims had stopped.
  const int type = vc.guarantee_types[pick];
  int cell = -1;
  for (int c : buddy_.free_list(BuddyAllocator::kPhysicalPool, type)) {
    const int node = tree_->cells()[c].node;
    if (node >= 0 && !reserved_nodes_[node]) {
      cell = c;
      break;
    }
  }
  if (cell >= 0)
    buddy_.TakeCell(cell);
  else
    cell = buddy_.TakeType(BuddyAllocator::kPhysicalPool, type);
  return cell >= 0 && BindCell(req, pick, cell, before, unlent_before, taken);
}

bool Allocator::BindCell(const AllocationRequest& req, int pick, int cell, int before,
                         int unlent_before, Allocation* taken) {
  VirtualCluster& vc = vcs_[req.vc];
  ++vc.bound_counts[pick];
  // Bound before the check: the safety test reads the GPUs' holders, and a cell only taken in
  // the physical pool still looks free there.
  buddy_.Bind(cell, req.vc + 1);
  RefreshBacking(cell);
  TouchCell(cell);
  // The split would break another VC's guarantee or take its unlent cells.
  if (GuaranteeShortfallGpus() > before ||
      (unlent_before >= 0 && UnlentShortfallGpus(req.vc) > unlent_before)) {
    --vc.bound_counts[pick];
    buddy_.Unbind(cell);
    buddy_.Give(cell);
    RefreshBacking(cell);
    TouchCell(cell);
    return false;
  }
  vc.bound_cells.push_back(cell);
  ListBoundNodes(req.vc);
  taken->bound_here.push_back(cell);
  return true;
}

bool Allocator::BindExact(const AllocationRequest& req, const ReplicaPlacement& target,
                          Allocation* taken) {
  if (target.node < 0 || target.node >= static_cast<int>(gpus_.size())) return false;
  // The first of the GPUs still outside the VC's cells: a placement may span several guarantee
  // cells (two of "any 4 L40S GPUs"), bound one call at a time.
  int leaf = -1;
  for (int g : target.gpus) {
    const int cell = g >= 0 && g < static_cast<int>(gpus_[target.node].size())
                         ? tree_->gpu_cell(target.node, g)
                         : -1;
    if (cell < 0) return false;
    if (buddy_.pool(cell) == BuddyAllocator::kPhysicalPool) {
      leaf = cell;
      break;
    }
  }
  if (leaf < 0) return false;
  const VirtualCluster& vc = vcs_[req.vc];
  const auto& cells = tree_->cells();
  for (int c = leaf; c >= 0; c = cells[c].parent) {
    if (buddy_.pool(c) != BuddyAllocator::kPhysicalPool) return false;
    for (size_t i = 0; i < vc.guarantee_types.size(); ++i) {
      if (vc.guarantee_types[i] != cells[c].type || vc.bound_counts[i] >= vc.guarantee_counts[i])
        continue;
      if (!buddy_.WholeFree(c)) return false;
      const int before = GuaranteeShortfallGpus();
      buddy_.TakeCell(c);
      // It re-creates what was decided before: the lending limits were checked then. A cell
      // whose bind would break another VC's guarantee leaves a larger one to try.
      if (BindCell(req, static_cast<int>(i), c, before, -1, taken)) return true;
      break;
    }
  }
  return false;
}

bool Allocator::ExactCandidate(const AllocationRequest& req, int pool,
                               const ReplicaPlacement& target, Candidate* out) const {
  const Demand& d = req.demand;
  const int node = target.node;
  if (node < 0 || node >= static_cast<int>(gpus_.size()) || cordoned_[node]) return false;
  for (int g : target.gpus)
    if (g < 0 || g >= static_cast<int>(gpus_[node].size()) || tree_->gpu_cell(node, g) < 0)
      return false;
  *out = Candidate{node, target.gpus, Level::kNode, {}};
  if (d.gpus == 0 && d.gpu_milli == 0 && d.mig_profile.empty())
    return target.gpus.empty() && resources_.Fits(node, {}, d.cpu_milli, d.memory_mib);
  const auto& cells = tree_->cells();
  if (d.gpus > 0) {
    if (static_cast<int>(target.gpus.size()) != d.gpus) return false;
    std::set<int> wanted(target.gpus.begin(), target.gpus.end());
    if (static_cast<int>(wanted.size()) != d.gpus) return false;
    // The largest cells of the pool made of wanted GPUs only, each entirely free.
    std::set<int> taken_cells;
    for (int g : target.gpus) {
      int c = tree_->gpu_cell(node, g);
      if (!gpu_free(node, g) || buddy_.pool(c) != pool ||
          !ModelAllowed(d, gpu_models_[node][g]->name))
        return false;
      for (int p = cells[c].parent; p >= 0 && buddy_.pool(p) == pool; p = cells[p].parent) {
        bool inside = true;
        for (int x = p; x < tree_->subtree_end(p) && inside; ++x)
          if (cells[x].gpu >= 0) inside = cells[x].node == node && wanted.count(cells[x].gpu);
        if (!inside) break;
        c = p;
      }
      taken_cells.insert(c);
    }
    for (int c : taken_cells)
      if (buddy_.free_leaves(c) != tree_->type_of(c).leaf_count) return false;
    out->cells.assign(taken_cells.begin(), taken_cells.end());
    return FitsNode(req, node, target.gpus);
  }
  if (target.gpus.size() != 1) return false;
  const int gpu = target.gpus[0];
  const int leaf = tree_->gpu_cell(node, gpu);
  if (buddy_.pool(leaf) != pool) return false;
  const GpuState& g = gpus_[node][gpu];
  const bool fresh = gpu_free(node, gpu);
  if (fresh) out->cells = {leaf};
  if (d.gpu_milli > 0) {
    if (!fresh && g.holder != kShared) return false;
    return ShareFits(req, node, gpu);
  }
  if (!fresh && g.holder != kMig) return false;
  return MigPlacement(req, node, gpu, &out->mig_profile, &out->mig_start, &out->mig_slot) &&
         (target.mig_start < 0 || out->mig_start == target.mig_start);
}

void Allocator::MaybeUnbind(int vc, int cell) {
  const auto& cells = tree_->cells();
  const int pool = vc + 1;
  int root = cell;
  while (cells[root].parent >= 0 && buddy_.pool(cells[root].parent) == pool)
    root = cells[root].parent;
  if (buddy_.pool(root) != pool) return;
  // Only the VC's own work keeps the cell bound. Idle GPUs out of use (bad, or on a cordoned
  // node) do not: the VC may then bind a usable cell for its guarantee, and they stay out of the
  // physical free space. Nor do GPUs lent to borrowers: they stay theirs, in the physical pool,
  // and the VC binds a free cell instead of reclaiming them.
  std::vector<int> kept;  // cells taken whole that stay taken (bad GPUs, borrowers' cells)
  if (!buddy_.listed(root)) {
    for (int c = root; c < tree_->subtree_end(root); ++c) {
      if (cells[c].gpu < 0) continue;
      const int holder = gpus_[cells[c].node][cells[c].gpu].holder;
      // A reservation on the node (a plan that waits may be placed inside the cell) keeps
      // the cell bound while borrowers hold part of it: the plan could no longer bind it.
      const bool lent =
          holder >= 0 && allocations_.at(holder)->preemptible && !reserved_nodes_[cells[c].node];
      if (!gpu_idle(cells[c].node, cells[c].gpu) && !lent) return;  // still in use
    }
    for (int c = root; c < tree_->subtree_end(root);) {
      if (!buddy_.taken(c)) {
        ++c;
        continue;
      }
      kept.push_back(c);
      c = tree_->subtree_end(c);  // counts below a cell taken whole are not kept
    }
  }
  VirtualCluster& v = vcs_[vc];
  auto it = std::find(v.bound_cells.begin(), v.bound_cells.end(), root);
  if (it == v.bound_cells.end()) return;
  v.bound_cells.erase(it);
  ListBoundNodes(vc);
  for (size_t i = 0; i < v.guarantee_types.size(); ++i)
    if (v.guarantee_types[i] == cells[root].type && v.bound_counts[i] > 0) {
      --v.bound_counts[i];
      break;
    }
  for (int c : kept) buddy_.Give(c);
  buddy_.Unbind(root);
  buddy_.Give(root);
  for (int c : kept) buddy_.TakeCell(c);
  for (int c = root; c < tree_->subtree_end(root); ++c) {
    if (cells[c].gpu < 0) continue;
    const int holder = gpus_[cells[c].node][cells[c].gpu].holder;
    if (holder >= 0) --lent_held_[cells[c].node];  // a borrower's, no longer lent
  }
  RefreshBacking(root);
  for (int c : kept) RefreshBacking(c);
  TouchCell(root);
}

// Gives back one replica's GPU share or MIG instance and its CPU and memory.
void Allocator::UndoReplica(const ReplicaPlacement& r, bool preemptible) {
  Touch(r.node);
  resources_.Give(
      r.node,
      r.gpu_milli > 0 || r.mig_profile >= 0 || !r.gpus.empty() ? r.sockets : std::vector<int>{},
      r.cpu_milli, r.memory_mib);
  if (r.gpu_milli == 0 && r.mig_profile < 0) return;
  const int gpu = r.gpus[0];
  const int leaf = tree_->gpu_cell(r.node, gpu);
  GpuState& g = gpus_[r.node][gpu];
  const int pool = buddy_.pool(leaf);
  --g.shares;
  if (!preemptible) --g.guaranteed_shares;
  if (r.gpu_milli > 0) {
    shared_gpus_[pool].erase({1000 - g.used_milli, leaf});
    g.used_milli -= r.gpu_milli;
    g.used_memory_mib -= r.gpu_memory_mib;
  } else {
    const auto& profiles =
        cluster_->FindModel(cluster_->nodes[r.node].gpus[gpu].model)->mig_profiles;
    g.mig.Remove(profiles, r.mig_profile, r.mig_start);
    for (size_t i = 0; i < g.fixed.size(); ++i)
      if (g.fixed_used[i] && g.fixed[i].profile == r.mig_profile &&
          g.fixed[i].start == r.mig_start) {
        g.fixed_used[i] = 0;
        break;
      }
  }
  if (g.shares > 0) {
    if (r.gpu_milli > 0) shared_gpus_[pool].insert({1000 - g.used_milli, leaf});
    RefreshBacking(leaf);
    return;
  }
  shared_gpus_[pool].erase({1000 - g.used_milli, leaf});
  mig_gpus_[pool].erase(leaf);
  g.used_memory_mib = 0;
  g.used_milli = 0;
  if (g.bad || cordoned_[r.node]) {
    g.holder = kBad;
  } else {
    g.holder = kFree;
    buddy_.Give(leaf);
  }
  RefreshBacking(leaf);
  if (pool != BuddyAllocator::kPhysicalPool) MaybeUnbind(pool - 1, leaf);
}

void Allocator::UndoCells(Allocation* taken, int vc) {
  const auto& cells = tree_->cells();
  for (auto it = taken->whole_cells.rbegin(); it != taken->whole_cells.rend(); ++it) {
    const int cell = *it;
    buddy_.Give(cell);
    HoldGpus(cell, kFree);
    // GPUs that went bad while held stay out of the free space.
    for (int c = cell; c < tree_->subtree_end(cell); ++c)
      if (cells[c].gpu >= 0 && !gpu_usable(cells[c].node, cells[c].gpu)) {
        buddy_.TakeCell(c);
        gpus_[cells[c].node][cells[c].gpu].holder = kBad;
        RefreshBacking(c);
      }
    // A borrower's cells may lie in a VC's bound cell too.
    if (buddy_.pool(cell) != BuddyAllocator::kPhysicalPool) MaybeUnbind(BoundVc(cell), cell);
  }
  for (int cell : taken->bound_here)
    if (vc >= 0 && std::find(vcs_[vc].bound_cells.begin(), vcs_[vc].bound_cells.end(), cell) !=
                       vcs_[vc].bound_cells.end())
      MaybeUnbind(vc, cell);
  taken->whole_cells.clear();
  taken->bound_here.clear();
}

std::optional<int> Allocator::Allocate(const AllocationRequest& req, std::string* why,
                                       PlacementChooser* chooser, int candidate_limit) {
  std::string scratch;
  if (!why) why = &scratch;
  const Demand& d = req.demand;
  if (!error_.empty()) {
    *why = error_;
    return std::nullopt;
  }
  const int kinds = (d.gpus > 0) + (d.gpu_milli > 0) + (!d.mig_profile.empty());
  if (kinds > 1) {
    *why = "a replica asks for one of gpus, gpuMilli or migProfile, not several";
    return std::nullopt;
  }
  if (d.gpus < 0 || d.gpu_milli < 0 || d.gpu_milli >= 1000 || req.replicas < 1 || d.cpu_milli < 0 ||
      d.memory_mib < 0 || d.gpu_memory_mib < 0) {
    *why = "replicas must be >= 1, gpuMilli 1..999, and no amount negative";
    return std::nullopt;
  }
  if (req.vc >= static_cast<int>(vcs_.size())) {
    *why = "unknown virtual cluster";
    return std::nullopt;
  }
  const int pool = PoolOf(req);
  const int id = next_id_++;
  Allocation alloc;
  alloc.id = id;
  alloc.vc = req.vc;
  alloc.preemptible = req.opportunistic;
  const bool checked = !req.opportunistic && pool == BuddyAllocator::kPhysicalPool && !vcs_.empty();
  const int shortfall_before = checked ? GuaranteeShortfallGpus() : 0;
  // Exact placements re-create what was decided before; a VC's own borrowing may use its own
  // unlent cells.
  const bool lending_checked = req.opportunistic && keeps_unlent_ && !req.exact;
  const int unlent_before = lending_checked ? UnlentShortfallGpus(req.vc) : 0;

  auto undo_all = [&] {
    for (const ReplicaPlacement& r : alloc.replicas) UndoReplica(r, alloc.preemptible);
    alloc.replicas.clear();
    UndoCells(&alloc, pool == BuddyAllocator::kPhysicalPool ? -1 : req.vc);
  };
  auto place_all = [&](int within) {
    for (int i = 0; i < req.replicas; ++i) {
      ReplicaPlacement r;
      if (!PlaceReplica(req, pool, within, chooser, candidate_limit, alloc.replicas, &r, &alloc, id,
                        why)) {
        undo_all();
        return false;
      }
      alloc.replicas.push_back(std::move(r));
    }
    return true;
  };

  // Visible to readers of the GPUs' holders (the guarantee backing) during placement.
  allocations_[id] = std::make_shared<const Allocation>(alloc);
  bool ok = false;
  const int total = req.replicas * d.gpus;
  if (!chooser && req.replicas > 1 && d.gpus > 0 && pool == BuddyAllocator::kPhysicalPool &&
      req.only_node < 0) {
    // A gang goes into the tightest enclosing cell that can hold it: one node, then one rack.
    const Level loosest = req.gang_affinity.value_or(Level::kCluster);
    const auto& cells = tree_->cells();
    for (Level level : {Level::kNode, Level::kRack, Level::kCluster}) {
      if (level > loosest || ok) break;
      // Every cell of the level with the GPUs free, best fit first: the best fit can still fail
      // on CPU, memory or models where another cell of the level holds the gang.
      std::vector<std::pair<int, int>> candidates;  // (free GPUs, cell)
      for (int c : level_cells_[static_cast<int>(level)]) {
        const CellType& type = tree_->type_of(c);
        if (type.leaf_count < total || buddy_.free_leaves(c) < total ||
            buddy_.pool(c) != BuddyAllocator::kPhysicalPool)
          continue;
        bool inside_taken = false;
        for (int a = c; a >= 0 && buddy_.pool(a) == BuddyAllocator::kPhysicalPool;
             a = cells[a].parent)
          inside_taken = inside_taken || buddy_.taken(a);
        if (!inside_taken) candidates.push_back({buddy_.free_leaves(c), c});
      }
      std::sort(candidates.begin(), candidates.end());
      for (const auto& [free, within] : candidates)
        if ((ok = place_all(within))) break;
    }
  } else {
    if (chooser && req.replicas > 1 && d.gpus > 0 && pool == BuddyAllocator::kPhysicalPool &&
        req.only_node < 0 && chooser->packs_gangs() && PlanGang(req)) {
      ok = place_all(-1);
      enumerated_.confine.clear();
    }
    // Every node, when the fewest cells by count of GPUs, CPU and memory did not do (a socket's
    // CPU, a filter) or the chooser spreads the gang.
    if (!ok) ok = place_all(-1);
    if (ok && req.gang_affinity && req.replicas > 1) {
      // Check the VC placement stayed inside one cell of the gang's level.
      const Level level = *req.gang_affinity;
      const Node& first = cluster_->nodes[alloc.replicas[0].node];
      bool cell_less = false, same_node = true, same_rack = !first.rack.empty();
      for (const ReplicaPlacement& r : alloc.replicas) {
        cell_less = cell_less || tree_->node_cell(r.node) < 0;
        same_node = same_node && r.node == alloc.replicas[0].node;
        same_rack = same_rack && cluster_->nodes[r.node].rack == first.rack;
      }
      bool inside = false;
      if (cell_less) {
        // Nodes without GPUs are no cells: compare the nodes and racks themselves.
        inside = level >= Level::kCluster || (level >= Level::kRack && same_rack) ||
                 (level >= Level::kNode && same_node);
      } else {
        int lca = tree_->node_cell(alloc.replicas[0].node);
        for (const ReplicaPlacement& r : alloc.replicas)
          while (lca >= 0 && !tree_->IsWithin(tree_->node_cell(r.node), lca))
            lca = tree_->cells()[lca].parent;
        inside = lca >= 0 && tree_->type_of(lca).level <= level;
      }
      if (!inside) {
        undo_all();
        ok = false;
        *why = "the gang does not fit inside one " + std::string(LevelName(*req.gang_affinity));
      }
    }
  }
  if (ok && checked && GuaranteeShortfallGpus() > shortfall_before) {
    undo_all();
    ok = false;
    *why = "the placement would break a virtual cluster's guarantee";
  }
  if (ok && lending_checked && UnlentShortfallGpus(req.vc) > unlent_before) {
    undo_all();
    ok = false;
    *why = "the free capacity left is a queue's guarantee beyond its lending limit";
  }
  if (!ok) {
    allocations_.erase(id);
    if (why->empty()) *why = "no capacity fits the job";
    return std::nullopt;
  }
  allocations_[id] = std::make_shared<const Allocation>(std::move(alloc));
  return id;
}

void Allocator::Release(int id) {
  auto it = allocations_.find(id);
  if (it == allocations_.end()) return;
  Allocation a = *it->second;
  for (const ReplicaPlacement& r : a.replicas) UndoReplica(r, a.preemptible);
  UndoCells(&a, a.preemptible ? -1 : a.vc);
  allocations_.erase(it);
}

// A GPU that stops being usable leaves the free space if nobody holds it (else when its job
// releases it); one that becomes usable again returns to it.
void Allocator::UpdateUsability(int node, int gpu, bool was_usable) {
  const bool usable = gpu_usable(node, gpu);
  GpuState& g = gpus_[node][gpu];
  const int leaf = tree_->gpu_cell(node, gpu);
  if (leaf < 0 || was_usable == usable) return;
  const bool returned = usable && g.holder == kBad;
  if (!usable && g.holder == kFree) {
    buddy_.TakeCell(leaf);
    g.holder = kBad;
  } else if (returned) {
    g.holder = kFree;
    buddy_.Give(leaf);
  }
  RefreshBacking(leaf);
  Touch(node);
  // Back in use: the cell may be free again. Out of use while idle: it no longer holds the
  // VC's guarantee.
  const int vc = BoundVc(leaf);
  if (vc >= 0 && gpu_idle(node, gpu)) MaybeUnbind(vc, leaf);
}

void Allocator::SetGpuBad(int node, int gpu, bool bad) {
  const bool was_usable = gpu_usable(node, gpu);
  bad_gpus_[node] += static_cast<int>(bad) - static_cast<int>(gpus_[node][gpu].bad);
  gpus_[node][gpu].bad = bad;
  Touch(node);
  UpdateUsability(node, gpu, was_usable);
}

void Allocator::SetNodeCordoned(int node, bool cordoned) {
  std::vector<char> before(gpus_[node].size());
  for (size_t g = 0; g < before.size(); ++g) before[g] = gpu_usable(node, static_cast<int>(g));
  cordoned_[node] = cordoned;
  Touch(node);
  for (size_t g = 0; g < before.size(); ++g) UpdateUsability(node, static_cast<int>(g), before[g]);
}

int Allocator::gpu_used_milli(int node, int gpu) const {
  const GpuState& g = gpus_[node][gpu];
  if (g.holder >= 0) return 1000;
  return g.holder == kShared ? g.used_milli : 0;
}

const MigLayout& Allocator::mig_layout(int node, int gpu) const { return gpus_[node][gpu].mig; }

std::vector<Allocator::GuaranteeStatus> Allocator::VcStatus(int vc) const {
  const std::vector<int> needed = NeededByGuarantees();
  std::vector<int> shortfall = GuaranteeShortfall(*tree_, available_, needed);
  // A shortfall falls on VCs in declaration order (a stable, visible rule).
  std::vector<GuaranteeStatus> out;
  for (size_t v = 0; v < vcs_.size(); ++v) {
    const VirtualCluster& c = vcs_[v];
    for (size_t i = 0; i < c.guarantee_types.size(); ++i) {
      const int t = c.guarantee_types[i];
      const int unbound = c.guarantee_counts[i] - c.bound_counts[i];
      const int lost = std::min(unbound, shortfall[t]);
      shortfall[t] -= lost;
      if (static_cast<int>(v) == vc)
        out.push_back({t, c.guarantee_counts[i], c.bound_counts[i], c.guarantee_counts[i] - lost});
    }
  }
  return out;
}

std::string Allocator::CheckConsistency() const {
  std::string err = buddy_.CheckConsistency();
  if (!err.empty()) return err;
  const auto& cells = tree_->cells();
  // Every GPU a cell-level holder owns must be inside a taken cell, and vice versa.
  std::map<std::pair<int, int>, int> whole;  // (node, gpu) -> allocation
  std::map<std::pair<int, int>, int> milli;
  std::vector<int64_t> cpu(cluster_->nodes.size(), 0), mem(cluster_->nodes.size(), 0);
  for (const auto& [id, a] : allocations_) {
    for (const ReplicaPlacement& r : a->replicas) {
      cpu[r.node] += r.cpu_milli;
      mem[r.node] += r.memory_mib;
      if (r.gpu_milli > 0) milli[{r.node, r.gpus[0]}] += r.gpu_milli;
      if (r.gpu_milli > 0 || r.mig_profile >= 0) continue;
      for (int g : r.gpus)
        if (!whole.emplace(std::make_pair(r.node, g), id).second)
          return "GPU " + std::to_string(g) + " on node " + cluster_->nodes[r.node].name +
                 " is handed out twice";
    }
  }
  for (size_t n = 0; n < gpus_.size(); ++n) {
    if (resources_.free_cpu_milli(n) != resources_.cpu_milli(n) - cpu[n] ||
        resources_.free_memory_mib(n) != resources_.memory_mib(n) - mem[n])
      return "node " + cluster_->nodes[n].name + ": CPU or memory accounting is off";
    for (size_t g = 0; g < gpus_[n].size(); ++g) {
      const GpuState& st = gpus_[n][g];
      const auto key = std::make_pair(static_cast<int>(n), static_cast<int>(g));
      const auto where = [&] {
        return "node " + cluster_->nodes[n].name + " GPU " + std::to_string(g);
      };
      auto w = whole.find(key);
      if ((w != whole.end()) != (st.holder >= 0) || (w != whole.end() && w->second != st.holder))
        return where() + ": holder disagrees with the allocations";
      auto m = milli.find(key);
      const int shared_milli = m == milli.end() ? 0 : m->second;
      if (shared_milli > 1000 || (st.holder == kShared && st.used_milli != shared_milli))
        return where() + ": shares add up to " + std::to_string(shared_milli);
      const int leaf = tree_->gpu_cell(static_cast<int>(n), static_cast<int>(g));
      if (leaf < 0) continue;
      // A GPU is free for the buddy allocator exactly when nobody holds it.
      int c = leaf;
      bool in_taken = false;
      while (c >= 0 && buddy_.pool(c) == buddy_.pool(leaf)) {
        if (buddy_.taken(c)) in_taken = true;
        c = cells[c].parent;
      }
      if (in_taken != (st.holder != kFree)) return where() + ": buddy state disagrees with holder";
    }
  }
  // Borrowers' GPUs in bound cells, counted per node, agree with the holders.
  std::vector<int> lent_held(cluster_->nodes.size(), 0);
  for (size_t n = 0; n < gpus_.size(); ++n)
    for (size_t g = 0; g < gpus_[n].size(); ++g) {
      const int leaf = tree_->gpu_cell(static_cast<int>(n), static_cast<int>(g));
      const int holder = gpus_[n][g].holder;
      lent_held[n] += leaf >= 0 && buddy_.pool(leaf) != BuddyAllocator::kPhysicalPool &&
                      holder >= 0 && allocations_.at(holder)->preemptible;
    }
  if (lent_held != lent_held_) return "borrowed GPUs of bound cells are miscounted";
  // The guarantee backing kept up to date agrees with one computed from scratch.
  const int n = static_cast<int>(cells.size());
  std::vector<char> backable(n, 0);
  std::vector<int> backable_children(n, 0), available(tree_->types().size(), 0);
  for (int c = n - 1; c >= 0; --c) {
    backable[c] = ComputeBackable(c, backable_children);
    if (backable[c] && cells[c].parent >= 0) ++backable_children[cells[c].parent];
  }
  for (int c = 0; c < n; ++c)
    if (backable[c] && (cells[c].parent < 0 || !backable[cells[c].parent]))
      ++available[cells[c].type];
  if (backable != backable_ || available != available_)
    return "guarantee backing disagrees with the cells' holders";
  // Cached candidates of unchanged nodes are what the node offers now.
  for (const CacheRow& row : cache_->rows) {
    if (row.shape < 0) continue;
    AllocationRequest req;
    req.demand = cache_->shapes[row.shape];
    const Demand& d = req.demand;
    const bool cpu_only = d.gpus == 0 && d.gpu_milli == 0 && d.mig_profile.empty();
    const std::vector<int> types =
        cpu_only ? std::vector<int>{} : WholeTypes(d, !d.mig_profile.empty());
    for (size_t n = 0; n < node_version_.size(); ++n) {
      if (row.nodes[n].version != node_version_[n]) continue;
      std::vector<Candidate> fresh;
      AddCandidatesOnNode(req, types, static_cast<int>(n), tree_->node_cell(static_cast<int>(n)),
                          &fresh);
      if (fresh != row.nodes[n].candidates)
        return "node " + cluster_->nodes[n].name + ": cached candidates are stale";
    }
  }
  return "";
}

}  // namespace berth
