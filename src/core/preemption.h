// Choosing victims: which running jobs must stop so that a pending job fits. The engine decides
// who may be a victim (reclaim, priority) and what the queue may hold; this file finds the
// cheapest set among those candidates and the placement the job then gets.
//
// Contract: victims are whole jobs. FindVictimsLowestFirst (the engine's) takes each queue's
// lowest priority first; within that, FindVictims returns a small set first (the fewest victims),
// then cheap (the least GPU-time lost, then the lowest priority): candidates are grouped by
// node, nodes that free a replica with the fewest victims first, so that a growing set empties
// nodes one at a time instead of nibbling at every node; then victims the job does not need are
// dropped. The job is placed on what-if copies of the allocator only, never on the real one.
// The same search serves a starving job's reservation, whose "victims" are the jobs it waits
// for.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/allocator.h"
#include "core/job.h"

namespace berth {

struct JobRecord;  // scheduler.h

// An upper bound on how many replicas of a job could be placed once some victims are gone: a
// node hosts (its free GPUs + what the victims free there) / the smallest replica's GPUs,
// counting only GPUs the placement may use: a guaranteed one uses its VC's bound cells, and the
// physical pool only as far as its guarantee has cells left to bind. What-if trials copy the
// allocator, so they run only where this bound reaches the job's replicas. Jobs asking for
// shares, MIG slices or no GPU are not bounded.
class ReplicaBound {
 public:
  ReplicaBound(const Allocator& alloc, const JobSpec& spec, int vc);
  // may_fit() of a fresh bound, without building one: stops counting at the first proof, and
  // visits only nodes the placement may use (this runs before every try of a whole gang).
  static bool MayFitNow(const Allocator& alloc, const JobSpec& spec, int vc);
  // The same for `replicas` replicas of `gpus` whole GPUs each.
  static bool MayFitNow(const Allocator& alloc, int gpus, int replicas, int vc);
  // Whether a guaranteed placement in `vc` may fit once every borrower has left: borrowers free
  // the GPUs they borrowed in the VC's own cells, and physical GPUs, of which the VC may bind no
  // more than its unbound guarantee, so no reclaim of borrowed GPUs can help past its own cells'
  // slots plus that. Asked before the running jobs are looked at.
  static bool MayFitReclaiming(const Allocator& alloc, const JobSpec& spec, int vc);
  static bool MayFitReclaiming(const Allocator& alloc, int gpus, int replicas, int vc);
  int free_on(int node) const {
    return smallest_ == 0 ? 0 : free_[kPhysical][node] + free_[kOwn][node];
  }
  int smallest() const { return smallest_; }
  // Counts what the victim holds as free.
  void Free(const JobRecord& victim);
  bool may_fit() const {
    return smallest_ == 0 || slots_[kOwn] + std::min(slots_[kPhysical], physical_cap_) >= replicas_;
  }
  bool MayFitWithout(const std::vector<JobRecord*>& victims) const;

 private:
  enum { kPhysical = 0, kOwn = 1 };  // the physical pool; the VC's bound cells
  ReplicaBound(const Allocator& alloc, int vc) : alloc_(&alloc), vc_(vc) {}
  // Measured for `replicas` replicas of `gpus` (> 0) whole GPUs each, with nothing counted yet.
  static ReplicaBound Sized(const Allocator& alloc, int gpus, int replicas, int vc);
  // The smallest replica, the replica count and the physical cap; false when unbounded.
  bool Measure(const Allocator& alloc, const JobSpec& spec);
  void SetPhysicalCap(const Allocator& alloc);
  bool SlotsReachReplicas(const Allocator& alloc);      // MayFitNow once measured
  bool ReclaimReachesReplicas(const Allocator& alloc);  // MayFitReclaiming once measured
  const Allocator* alloc_;
  int vc_;
  int smallest_ = 0, replicas_ = 0, physical_cap_ = 0;  // smallest_ 0: unbounded
  std::vector<int> free_[2];                            // [pool][node] free GPUs
  int slots_[2] = {0, 0};
};

// Where a job would go on a what-if allocator: its replicas, plus every GPU of the guarantee
// cells the placement binds (a cell is bound whole: all of it must stay free for the job).
struct TrialPlacement {
  std::vector<ReplicaPlacement> where;
  std::vector<std::pair<int, int>> bound_gpus;  // (node, gpu)
  std::vector<int> bound_cells;                 // the guarantee cells it binds
};

struct VictimPlan {
  std::vector<JobRecord*> victims;
  TrialPlacement placement;  // once they are gone
};

// What the search asks of the engine.
struct VictimSearch {
  const Allocator* alloc = nullptr;
  const JobSpec* spec = nullptr;
  int vc = -1;  // the VC whose bound cells the placement may use (-1: borrowing)
  double now = 0;
  // Whether a victim counts on every node it has a replica on, or only on its first replica's.
  bool every_node = false;
  // Whether the queue may hold the job once `victims` are gone.
  std::function<bool(const std::vector<JobRecord*>& victims)> allowed;
  // Places the job on `trial` (a what-if copy without `victims`); fills `placement` on success.
  std::function<bool(Allocator& trial, const std::vector<JobRecord*>& victims,
                     TrialPlacement* placement)>
      fits;
};

// The cheapest set of `candidates` whose removal lets the job fit, or nullopt.
std::optional<VictimPlan> FindVictims(const VictimSearch& search,
                                      std::vector<JobRecord*> candidates);

// FindVictims, taking each queue's lowest priority first. A victim could come straight back
// by preempting a candidate of its own queue below it (lower raw priority and lower
// `whole_priority`, aging included: the engine's rule for priority preemption), stopping both.
// So candidates are searched in tiers, tier t holding those with at most t distinct raw
// priorities of their queue's candidates below them: the lowest tier that fits wins, found by
// searching the lowest alone, then by bisection (a tier that fits is taken to fit with more
// candidates too; up to three tiers this is a search in order), and the last tier holds them
// all. Priority alone sorts the tiers: a victim that could not fit on its queue's lower jobs'
// GPUs is still searched after them. `movers` restart elsewhere: they come back over nobody
// and count below none.
std::optional<VictimPlan> FindVictimsLowestFirst(
    const VictimSearch& search, const std::vector<JobRecord*>& candidates,
    const std::function<double(const JobRecord&)>& whole_priority,
    const std::vector<JobRecord*>& movers);

// Elastic jobs give back replicas before whole jobs are preempted. A shrink keeps a job's
// first replicas where they are and stops the rest at once.
struct Shrink {
  JobRecord* job = nullptr;
  int replicas = 0;  // what it keeps
};
struct ShrinkPlan {
  std::vector<Shrink> shrinks;
  TrialPlacement placement;  // the job's, once they shrank
};
struct ShrinkSearch {
  const Allocator* alloc = nullptr;
  // Whether the queue may hold the job after `shrinks`.
  std::function<bool(const std::vector<Shrink>& shrinks)> allowed;
  // Shrinks `job` to `replicas` on `trial`: releases `ids` (its allocations there) and places
  // its first replicas again exactly, filling `ids` anew; false when refused.
  std::function<bool(Allocator& trial, const Shrink& shrink, std::vector<int>* ids)> shrink;
  // Places the job on `trial` (a what-if copy after `shrinks`); fills `placement` on success.
  std::function<bool(Allocator& trial, const std::vector<Shrink>& shrinks,
                     TrialPlacement* placement)>
      fits;
};

// The fewest replicas of `candidates` (elastic jobs above their minimum on healthy nodes;
// lowest priority, then youngest, give first) whose stopping lets the job fit, or nullopt.
std::optional<ShrinkPlan> FindShrinks(const ShrinkSearch& search,
                                      std::vector<JobRecord*> candidates);

}  // namespace berth
