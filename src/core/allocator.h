// The allocator: hands out GPUs (whole, shared, or MIG slices) with their node's CPU and memory,
// inside virtual clusters' guarantees or opportunistically, and takes them back.
//
// Contract:
//  - An allocation is a gang: every replica is placed, or nothing changes.
//  - Guaranteed allocations of VC v are placed inside cells bound to v; a new cell of one of
//    v's guarantee types is bound when v's bound cells are full. Binding never leaves another
//    VC's unbound guarantee without free (or preemptible) cells to back it, nor takes the free
//    cells that back another VC's unlent part (below): v reclaims a borrower's cell instead.
//  - Opportunistic allocations take any free physical cell and are marked preemptible; they
//    count as free when VC safety is checked, so reclaiming them restores every guarantee.
//    They never take the free cells that back the unlent part of a guarantee (its cells past
//    the lending limit): those stay free for their VC.
//  - A replica of whole GPUs that no free physical cell holds borrows the free GPUs of cells
//    bound to another VC (`lent`), so that a guarantee's idle GPUs are lent too: the VC's few
//    small jobs would otherwise keep whole nodes idle. Never those of a VC with a lending
//    limit, nor of the borrower's own VC (its guaranteed work would find them held by its own
//    borrowers, whom no reclaim stops). The VC reclaims them like any borrowed GPU; a bound
//    cell goes back to the physical pool once every GPU of it is free.
//  - Bad GPUs and cordoned nodes are never handed out.
//  - Releasing every allocation restores the initial free lists exactly.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/buddy_allocator.h"
#include "core/cell_tree.h"
#include "core/cluster.h"
#include "core/mig.h"
#include "core/node_resources.h"
#include "core/virtual_cluster.h"

namespace berth {

// What one replica needs. Exactly one of gpus > 0, gpu_milli > 0, mig_profile set, or none of
// them (a CPU-only replica).
struct Demand {
  int gpus = 0;                     // whole GPUs
  int gpu_milli = 0;                // a share of one GPU, 1..999 thousandths
  int64_t gpu_memory_mib = 0;       // GPU memory a share needs
  std::string mig_profile;          // one MIG instance of this profile, e.g. "3g.40gb"
  std::vector<std::string> models;  // allowed GPU models; empty: any
  // Loosest level the replica's GPUs may spread over. Unset: within one node, tightest first.
  std::optional<Level> affinity;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  bool operator==(const Demand&) const = default;
};

struct ReplicaPlacement;

struct AllocationRequest {
  int replicas = 1;
  Demand demand;
  // Loosest level the whole gang may spread over. Either way a gang goes into the fewest cells
  // that hold it, level by level from the top (see Allocate).
  std::optional<Level> gang_affinity;
  int vc = -1;                 // index into the VCs; -1: none
  bool opportunistic = false;  // borrow any free cell; the allocation is preemptible
  // Opportunistic: may borrow the free GPUs of other VCs' bound cells. Off for placements that
  // wait (a preemption plan, a reservation): the VC's guaranteed work may take them first.
  bool lent = true;
  int only_node = -1;  // >= 0: place every replica on this node
  // Set: replica i goes exactly where (*exact)[i] says (node, GPUs, MIG start), or the request
  // fails: crash recovery re-creates placements decided before. A guaranteed request binds the
  // guarantee cell holding its GPUs when they are not bound yet, so adopt guaranteed work
  // before borrowed work. Chooser and candidate limit are not used.
  const std::vector<ReplicaPlacement>* exact = nullptr;
};

struct ReplicaPlacement {
  int node = -1;
  std::vector<int> gpus;  // GPU indices on the node
  int gpu_milli = 0;      // > 0: a share of gpus[0]
  int64_t gpu_memory_mib = 0;
  int mig_profile = -1;  // >= 0: a MIG instance on gpus[0]
  int mig_start = -1;
  std::vector<int> sockets;  // sockets of its GPUs (all sockets for a CPU-only replica)
  std::vector<int> cpus;     // CPUs to pin to: those of `sockets`
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};

// One way to place one replica: a node, the GPUs on it, and the cells that would be taken whole.
struct Candidate {
  int node = -1;
  std::vector<int> gpus;           // GPU indices on the node; empty for CPU-only replicas
  Level tightness = Level::kNode;  // the tightest cell level holding all of `gpus`
  std::vector<int> cells;          // cells taken whole (a fresh GPU for a share or MIG slice)
  int mig_profile = -1, mig_start = -1, mig_slot = -1;
  bool operator==(const Candidate&) const = default;
};

// The candidates offered for one replica, as runs of candidates (a node's, usually) that stay
// where the allocator keeps them: offering a node's unchanged candidates again copies nothing.
// Valid until the allocator's next placement.
class CandidateList {
 public:
  struct Run {
    const std::vector<Candidate>* candidates;
    size_t start;  // index of its first candidate in the list
    // The node's version when the run comes from the allocator's candidate cache, else 0.
    // Versions are unique: the same version, the same node state and the same candidates.
    uint64_t version;
  };
  CandidateList() = default;
  CandidateList(const std::vector<Candidate>& all) { Add(all); }  // NOLINT: one run, by reference

  void Clear() {
    runs_.clear();
    size_ = 0;
  }
  void Add(const std::vector<Candidate>& run, uint64_t version = 0) {
    if (run.empty()) return;
    runs_.push_back({&run, size_, version});
    size_ += run.size();
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<Run>& runs() const { return runs_; }
  const Candidate& operator[](size_t i) const;  // O(log runs)

 private:
  std::vector<Run> runs_;
  size_t size_ = 0;
};

// Picks one candidate per replica (the plugin pipeline implements it).
class PlacementChooser {
 public:
  virtual ~PlacementChooser() = default;
  // Returns an index into `candidates`, or -1: none. `placed` holds the replicas of this request
  // placed so far. `first` > 0: the list is the last call's, for the same replica, with runs
  // appended from index `first` on (a bounded scan that went on); only those are new, and the
  // best of the others still competes.
  virtual int Choose(const AllocationRequest& request, const CandidateList& candidates,
                     const std::vector<ReplicaPlacement>& placed, size_t first) = 0;
  // How many runs (nodes, usually) of this replica's candidates so far hold one that every filter
  // passes: a bounded scan goes on until `candidate_limit` do, as kube-scheduler's
  // percentageOfNodesToScore counts feasible nodes. -1: never scan on (no filters).
  virtual int feasible_runs() const { return -1; }
  // True when the chooser wants a gang packed: the allocator then offers it the nodes of the
  // fewest cells that hold it first (Allocate).
  virtual bool packs_gangs() const { return false; }
};

struct Allocation {
  int id = -1;
  int vc = -1;
  bool preemptible = false;
  std::vector<ReplicaPlacement> replicas;
  // What releasing it gives back, to undo exactly: the cells it took whole, and the cells it
  // bound to its VC.
  std::vector<int> whole_cells;
  std::vector<int> bound_here;
};

class Allocator {
 public:
  // `cluster` must outlive the allocator. Throws nothing: check `error()` after construction.
  // An allocator is a value: a copy is an independent what-if (preemption trials use that).
  Allocator(const Cluster* cluster, const std::vector<VirtualClusterSpec>& vcs);

  const std::string& error() const { return error_; }  // "" when the inputs were valid

  // Places the request; returns the allocation id, or nullopt with `why` set. Without a chooser
  // the buddy allocator's own best fit decides; with one, every replica's candidates go to it.
  // A gang of whole GPUs in the physical pool is offered the nodes of the fewest cells that
  // hold it, level by level from the top (racks, then nodes), the fullest among equally few
  // (best fit: whole cells stay free), and every node only if it does not fit there.
  // `candidate_limit` > 0 bounds the nodes offered per replica (nodes in rotation) to about
  // that many whose candidates the chooser's filters pass (PlacementChooser::feasible_runs).
  std::optional<int> Allocate(const AllocationRequest& request, std::string* why = nullptr,
                              PlacementChooser* chooser = nullptr, int candidate_limit = 0);
  void Release(int id);
  const Allocation* Find(int id) const;
  // Allocations never change once made; what-if copies share them.
  using AllocationMap = std::map<int, std::shared_ptr<const Allocation>>;
  const AllocationMap& allocations() const { return allocations_; }

  // Health. A bad GPU or a cordoned node is taken out of the free space at once; a GPU in use
  // when it goes bad is held back when its job releases it.
  void SetGpuBad(int node, int gpu, bool bad);
  void SetNodeCordoned(int node, bool cordoned);
  // Inline: plugins ask these for every GPU of every candidate.
  bool gpu_usable(int node, int gpu) const { return !gpus_[node][gpu].bad && !cordoned_[node]; }
  bool gpu_free(int node, int gpu) const {  // usable and held by nobody
    return gpus_[node][gpu].holder == kFree && gpu_usable(node, gpu);
  }
  bool gpu_idle(int node, int gpu) const {  // held by nobody, usable or not
    return gpus_[node][gpu].holder == kFree || gpus_[node][gpu].holder == kBad;
  }
  // The allocation holding the whole GPU; < 0 when none does (free, shared, MIG, bad).
  int gpu_holder(int node, int gpu) const { return gpus_[node][gpu].holder; }
  bool node_cordoned(int node) const { return cordoned_[node]; }
  bool gpu_bad(int node, int gpu) const { return gpus_[node][gpu].bad; }
  // A GPU observed nearly full (processes berth does not know about, or tenants over what they
  // asked): still usable, but a node's candidates go around it where the node has other GPUs
  // that fit, so that a filter of observed use refuses the GPU rather than the whole node.
  void SetGpuCrowded(int node, int gpu, bool crowded);
  bool gpu_crowded(int node, int gpu) const { return gpus_[node][gpu].crowded; }
  // Some GPUs of the node are reserved for pending jobs (reservation.h), which the chooser's
  // filter keeps others away from: the node then offers every cell that fits, not only the best
  // fit, so that a job the reservation keeps away still finds the node's other free GPUs.
  void SetNodeReserved(int node, bool reserved);
  bool node_reserved(int node) const { return reserved_nodes_[node]; }
  // Every GPU of the node usable (none bad, not cordoned): O(1), for per-candidate checks.
  bool node_healthy(int node) const { return !cordoned_[node] && bad_gpus_[node] == 0; }

  // Per VC and guarantee type: unbound cells that free or preemptible cells can no longer back
  // because hardware is bad (HiveD shows failures only when they are inevitable).
  struct GuaranteeStatus {
    int type = 0;
    int guaranteed = 0;
    int bound = 0;
    int healthy = 0;  // cells of the guarantee backed by healthy hardware (bound or backable)
  };
  std::vector<GuaranteeStatus> VcStatus(int vc) const;

  // Guarantee cells that a plan which waits (a guaranteed preemptor's) binds once its victims
  // have stopped: `sign` +1 promises them to it, -1 takes the promise back. A fresh bind of vc
  // leaves as many of its unbound cells as are promised (a plan binds them exactly).
  void Promise(int vc, const std::vector<int>& cells, int sign);
  // Whole free GPUs on a node in the cells bound to vc, or (vc < 0) those a borrower may take:
  // the physical pool's and those of cells bound to VCs that lend. With `borrowed_free`, GPUs
  // of vc's cells that borrowers hold count as free (what reclaiming them would give vc).
  int FreeGpusOn(int node, int vc, bool borrowed_free = false) const;
  // The VC whose bound cells hold the GPU, -1 for the physical pool.
  int BoundVcOfGpu(int node, int gpu) const;
  // How many replicas of `gpus` whole GPUs (> 0) those free GPUs could hold, node by node (each
  // node's FreeGpusOn / gpus), counted up to `enough`. Visits only the nodes with that many free.
  int ReplicaSlots(int vc, int gpus, int enough, bool borrowed_free = false) const;
  // The nodes that may have at least `gpus` (> 0) of those free GPUs, each once: every node
  // where FreeGpusOn(node, vc) >= gpus is among them (others may be).
  void NodesWithFree(int vc, int gpus, std::vector<int>* nodes) const;
  // GPUs of vc's guarantee not bound yet: how far its guaranteed work can still grow into the
  // physical pool.
  int UnboundGuaranteeGpus(int vc) const;

  // The GPUs the guarantees lack right now; 0 means every VC's unused guarantee is backable.
  int GuaranteeShortfallGpus() const;
  // GPUs of the guarantees' unlent parts (virtual_cluster.h) that free cells no longer back,
  // leaving out `except_vc`'s own.
  int UnlentShortfallGpus(int except_vc = -1) const;
  // "" when the buddy state, the GPU holders, shares, MIG layouts and node resources agree.
  std::string CheckConsistency() const;

  const CellTree& tree() const { return *tree_; }
  const BuddyAllocator& buddy() const { return buddy_; }
  const NodeResources& node_resources() const { return resources_; }
  const std::vector<VirtualCluster>& vcs() const { return vcs_; }
  const Cluster& cluster() const { return *cluster_; }

  // GPU-level state, for inspection.
  int gpu_used_milli(int node, int gpu) const;  // 1000 for a whole GPU, MIG GPUs: 0
  int64_t gpu_shared_memory_mib(int node, int gpu) const {
    return gpus_[node][gpu].used_memory_mib;
  }
  const MigLayout& mig_layout(int node, int gpu) const;

 private:
  // Who holds a GPU.
  enum Holder : int { kFree = -1, kBad = -2, kShared = -3, kMig = -4 };
  struct GpuState {
    int holder = kFree;  // allocation id, or a Holder
    int used_milli = 0;
    int64_t used_memory_mib = 0;
    int shares = 0;             // shares or MIG instances on it
    int guaranteed_shares = 0;  // of them, not preemptible
    MigLayout mig;
    std::vector<MigInstance> fixed;  // fixed MIG geometry
    std::vector<char> fixed_used;
    bool bad = false;
    bool crowded = false;
  };

  bool PlaceReplica(const AllocationRequest& req, int pool, int within, PlacementChooser* chooser,
                    int limit, const std::vector<ReplicaPlacement>& placed, ReplicaPlacement* out,
                    Allocation* taken, int id, std::string* why);
  // The candidates of every node (or of `limit` nodes); the result lives until the next call.
  // `next_replica`: the same request's next replica, placed since the last call.
  const CandidateList& Enumerate(const AllocationRequest& req, int pool, int limit,
                                 bool next_replica);
  // Goes on with a bounded scan until `more` further nodes offer candidates, appending their
  // runs to the list Enumerate returned. False when no node is left to offer any.
  bool EnumerateMore(const AllocationRequest& req, int more);
  void ScanOn(const AllocationRequest& req);  // until `limit` nodes offer candidates, or the end
  // Appends (node, cell) for every node under vc's bound cells: the node's cell, or the bound
  // cell itself when it lies at or below a node.
  void AddBoundRoots(int vc, std::vector<std::pair<int, int>>* roots) const;
  // Lists vc's bound_nodes again, after its bound cells changed.
  void ListBoundNodes(int vc);
  // Starts the scan Enumerate continues: the nodes (with root cells) in scan order.
  void StartScan(const AllocationRequest& req, int pool, int limit);
  // The nodes of the fewest cells that hold the gang `req` (whole GPUs, physical pool), into
  // enumerated_.confine; false, leaving it empty, when none do (within one cell of its
  // gang_affinity level) or when they are every node with room.
  bool PlanGang(const AllocationRequest& req);
  // A node's candidates below `root`, from the cache while the node is unchanged since they
  // were computed for the same demand. `version`: the node's version when they come from the
  // cache, 0 when they were computed for this enumeration only.
  const std::vector<Candidate>& CandidatesOnNode(const AllocationRequest& req, int row,
                                                 const std::vector<int>& types, int node, int root,
                                                 uint64_t* version);
  int RowOf(const Demand& demand);  // the cache's row for the demand
  void Touch(int node);             // the node changed: its cached candidates are stale
  void TouchCell(int cell);         // every node in or above the cell changed
  void AddCandidatesOnNode(const AllocationRequest& req, const std::vector<int>& types, int node,
                           int root, std::vector<Candidate>* out) const;
  void Commit(const AllocationRequest& req, int pool, const Candidate& c, ReplicaPlacement* out,
              Allocation* taken, int id);
  void AddShare(const AllocationRequest& req, int pool, int leaf, ReplicaPlacement* out);
  void AddMigInstance(const AllocationRequest& req, int pool, int leaf, int p, int start, int slot,
                      ReplicaPlacement* out);
  bool MigPlacement(const AllocationRequest& req, int node, int gpu, int* p, int* start,
                    int* slot) const;
  bool ShareFits(const AllocationRequest& req, int node, int gpu) const;
  bool PlaceWhole(const AllocationRequest& req, int pool, int within, ReplicaPlacement* out,
                  Allocation* taken, int id);
  bool PlaceShare(const AllocationRequest& req, int pool, ReplicaPlacement* out);
  bool PlaceMig(const AllocationRequest& req, int pool, ReplicaPlacement* out);
  bool PlaceCpuOnly(const AllocationRequest& req, ReplicaPlacement* out);
  bool BindFor(const AllocationRequest& req, Allocation* taken);
  // Binds `cell` (of the VC's guarantee type `pick`, just taken in the physical pool) to the
  // request's VC, unless the shortfall of guarantees grows past `before`, or that of other
  // VCs' unlent parts past `unlent_before` (-1: not checked), both measured before the take:
  // binding never leaves another VC's guarantee without backing.
  bool BindCell(const AllocationRequest& req, int pick, int cell, int before, int unlent_before,
                Allocation* taken);
  // The candidate that puts the replica exactly at `target`, if it is free in `pool`.
  bool ExactCandidate(const AllocationRequest& req, int pool, const ReplicaPlacement& target,
                      Candidate* out) const;
  // Binds the smallest unbound guarantee cell of the request's VC that holds the first of
  // `target`'s GPUs outside its cells; false when there is none (or none left to bind).
  bool BindExact(const AllocationRequest& req, const ReplicaPlacement& target, Allocation* taken);
  void UndoReplica(const ReplicaPlacement& r, bool preemptible);
  void UpdateUsability(int node, int gpu, bool was_usable);
  void UndoCells(Allocation* taken, int vc);  // gives back whole_cells, unbinds bound_here
  void MaybeUnbind(int vc, int cell);
  int TakeFreshGpu(const AllocationRequest& req, int pool, bool mig);
  std::vector<int> WholeTypes(const Demand& d, bool mig) const;
  bool ModelAllowed(const Demand& d, const std::string& model) const;
  bool NodeUsable(const AllocationRequest& req, int node) const;
  std::vector<int> SocketsOf(int node, const std::vector<int>& gpus) const;
  bool FitsNode(const AllocationRequest& req, int node, const std::vector<int>& gpus) const;
  void HoldGpus(int cell, int holder);
  std::vector<int> NeededByGuarantees() const;
  // Guarantee backing: a cell is backable when it is in the physical pool and every GPU below
  // it is free or held only by preemptible work. Kept current on every change (O(depth)), since
  // every bind asks how many maximal backable cells of each type are left.
  bool ComputeBackable(int cell, const std::vector<int>& backable_children) const;
  void SetBackable(int cell, bool backable);
  void RefreshBacking(int cell);  // after a change to the cell's subtree (holders, pool, health)
  bool Counted(int cell) const;   // backable, and its parent is not
  int BoundVc(int cell) const;    // VC owning the pool of a cell, -1 for the physical pool
  // Whole free GPUs of the node in `pool`; `cell` is the node's cell.
  int FreeInPool(int node, int cell, int pool) const;
  // Whether lending_pools_[lending] may hold a replica of `gpus` whole GPUs: a cell with room
  // (any free GPU in cells below a node). Spares a scan of its bound cells when it has none.
  bool LentRoom(size_t lending, int gpus) const;
  // The pool of an exact placement's first GPU (the physical pool when it names none).
  int ExactPool(const ReplicaPlacement& target) const;

  const Cluster* cluster_;
  std::shared_ptr<CellTree> tree_;  // immutable once built; copies of the allocator share it
  std::string error_;
  std::vector<VirtualCluster> vcs_;
  bool keeps_unlent_ = false;       // a guarantee has a lending limit: borrowers are checked
  std::vector<int> lending_pools_;  // pools of the VCs without a lending limit
  // [pool] the cell types whose free cells name the nodes with lent GPUs: whole nodes, and the
  // VC's guarantee types below a node.
  std::vector<std::vector<int>> lent_types_;
  std::vector<char> lent_node_;  // [node] under a cell bound to a VC that lends
  std::vector<int> lent_held_;   // [node] GPUs of cells bound to a VC that borrowers hold
  BuddyAllocator buddy_;
  NodeResources resources_;
  std::vector<std::vector<GpuState>> gpus_;               // [node][gpu]
  std::vector<std::vector<const GpuModel*>> gpu_models_;  // [node][gpu]
  std::vector<char> cordoned_;
  std::vector<int> bad_gpus_;  // [node] GPUs marked bad
  AllocationMap allocations_;
  // Per pool: GPUs that host shares, by free milli (best fit), and GPUs carved for MIG.
  std::vector<std::set<std::pair<int, int>>> shared_gpus_;
  std::vector<std::set<int>> mig_gpus_;
  std::vector<int> level_cells_[6];     // cells of each Level, for gang placement
  std::vector<int> node_types_;         // cell types of whole nodes
  std::vector<char> backable_;          // [cell]
  std::vector<int> backable_children_;  // [cell] children that are backable
  std::vector<int> available_;          // [type] maximal backable cells
  int next_id_ = 1;
  int rotation_ = 0;  // where the next bounded candidate scan starts

  // Candidate cache. Every change to a node gives it a new version, unique across all
  // allocators (what-if copies included), so cached candidates are valid wherever their node's
  // version still matches; copies therefore share the cache. Keyed by demand shape (an id into
  // `shapes`), for the node's own cell as root: each shape in use has a row with an entry per
  // node, so that finding a node's candidates is an index, and the shape asked for least
  // recently gives its row up to a new one.
  static constexpr int kCachedShapes = 256;  // rows
  static constexpr int kMaxShapes = 4096;    // beyond: the cache starts over
  struct CacheEntry {
    uint64_t version = 0;  // the node's version its candidates were computed at
    std::vector<Candidate> candidates;
  };
  struct CacheRow {
    int shape = -1;
    uint64_t used = 0;  // CandidateCache::uses when last asked for
    std::vector<CacheEntry> nodes;
  };
  struct CandidateCache {
    std::vector<Demand> shapes;
    std::vector<int> row_of;  // [shape] its row, or -1
    std::vector<CacheRow> rows;
    uint64_t uses = 0;
  };
  std::vector<uint64_t> node_version_;  // [node]
  std::vector<int> crowded_gpus_;       // [node]: GPUs with GpuState::crowded
  std::vector<bool> reserved_nodes_;    // [node]: SetNodeReserved
  std::shared_ptr<CandidateCache> cache_;
  // The last enumeration: scratch whose copy is empty, as a what-if never reads it.
  struct Scratch {
    CandidateList list;
    std::deque<std::vector<Candidate>> uncached;  // runs of roots the cache does not keep
    size_t uncached_used = 0;
    std::vector<int> root_of;  // [node] the node's root cell this time, or -1
    // The scan: (node, root cell) in node order, visited from `first` on, wrapping around, until
    // `limit` nodes (0: all) offer candidates.
    std::vector<std::pair<int, int>> roots;
    int first = 0, scanned = 0, limit = 0;
    int pool = -1;           // the pool scanned
    std::vector<int> types;  // WholeTypes of the demand
    int row = 0;             // RowOf the demand
    struct Pick {
      int node, root;
      uint64_t version;  // CandidatesOnNode's
      const std::vector<Candidate>* run;
    };
    std::vector<Pick> picked;  // the nodes that offered candidates, in scan order
    std::vector<int> node_cells;
    std::vector<int> confine;  // when not empty: the only nodes a scan offers, in node order
    std::vector<int> slots;    // [cell] replicas PlanGang's gang could place there; else 0
    std::vector<int> counted;  // the cells whose slots are set
    Scratch() = default;
    Scratch(const Scratch&) {}
    Scratch& operator=(const Scratch&) { return *this; }
  };
  Scratch enumerated_;
};

}  // namespace berth
