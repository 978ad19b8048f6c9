// GPUs set aside for pending jobs: a waiting preemptor's planned placement (its victims' GPUs
// and the free GPUs of its plan), or a starving job's reservation. Nobody but the owner is
// placed on a reserved GPU, so the capacity a job was promised cannot be taken while it waits.
//
// A reservation that *yields* (made for borrowed work) does not block guaranteed placements:
// a queue's guarantee comes before another queue's borrowing. The engine drops a yielding
// reservation when guaranteed work takes one of its GPUs.
//
// Plain data: the engine decides who reserves what and when to drop it.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace berth {

class Reservations {
 public:
  struct Reservation {
    std::vector<std::pair<int, int>> gpus;  // (node, gpu)
    bool yields = false;
    bool for_preemption = false;  // a preemptor's plan (else a starving job's)
  };

  // `nodes`: the cluster's node count. Reserves every GPU of `plan` for `job` (replacing what
  // it held). A GPU already reserved by a yielding reservation moves to `job`, and that other
  // reservation is dropped whole; returns the jobs whose reservations were dropped so.
  std::vector<int> Reserve(int job, const std::vector<ReplicaPlacement>& plan, bool yields,
                           bool for_preemption, size_t nodes);
  void Drop(int job);
  // Whether `c` touches a GPU reserved for another job (a yielding one does not count for a
  // guaranteed placement).
  bool Blocks(const Candidate& c, int job, bool guaranteed) const {
    if (owners_.empty() || reserved_on_[c.node] == 0) return false;
    return BlocksOnNode(c, job, guaranteed);
  }
  // The job holding (node, gpu), or -1.
  int OwnerOf(int node, int gpu) const;
  const Reservation* Of(int job) const;
  const std::map<int, Reservation>& all() const { return by_job_; }
  size_t size() const { return by_job_.size(); }
  // How many of the starving kind are held.
  int starving() const { return starving_; }

 private:
  bool BlocksOnNode(const Candidate& c, int job, bool guaranteed) const;

  std::map<int, Reservation> by_job_;
  std::map<std::pair<int, int>, int> owners_;  // (node, gpu) -> job
  std::vector<int> reserved_on_;               // [node] reserved GPUs
  int starving_ = 0;
};

}  // namespace berth
