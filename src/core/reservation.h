// GPUs set aside for pending jobs: a waiting preemptor's planned placement (its victims' GPUs
// and the free GPUs of its plan), or a starving job's reservation. Nobody but the owner is
// placed on a reserved GPU, so the capacity a job was promised cannot be taken while it waits.
//
// A reservation that *yields* (made for borrowed work) does not block guaranteed placements: a
// queue's guarantee comes before borrowing, and the engine drops the reservation when such work
// takes one of its GPUs. A preemptor's yielding plan yields only to other queues' guaranteed
// work and to its own queue's of strictly higher priority. Its own queue's other guaranteed work
// waits for it: the plan's victims (of lower priority) would otherwise start again on its GPUs as
// guaranteed work, then be preempted again, forever.
//
// A moved job's destination (the scheduler moves running jobs off a starving job's reserved
// GPUs when they fit elsewhere) is held from the moment it is told to stop until it starts
// again, and gives way to nobody, as a preemptor's plan does.
//
// A starving job's reservation also gives way to jobs of its own queue of strictly higher
// priority (its own, aging included, re-read every cycle): a reservation keeps later work of
// the same or lower priority away, not more urgent work. Priorities order jobs within a queue
// only, so another queue's jobs never pass it, whatever their priority. A preemptor's
// reservation gives way to nobody.
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
    bool for_preemption = false;  // a preemptor's plan
    bool for_move = false;        // a moved job's destination (neither: a starving job's)
    double priority = 0;          // the owner's, aging included: see above
    int queue = -1;               // the owner's queue
    double since = 0;             // when it was made
    bool starving() const { return !for_preemption && !for_move; }
  };

  // `nodes`: the cluster's node count. Reserves `gpus` (node, gpu) for `job` (replacing what it
  // held). A GPU already reserved by another reservation moves to `job`, and that other
  // reservation is dropped whole; returns the jobs whose reservations were dropped so.
  std::vector<int> Reserve(int job, const std::vector<std::pair<int, int>>& gpus, Reservation kind,
                           size_t nodes);
  void Drop(int job);
  void SetPriority(int job, double priority) { by_job_.at(job).priority = priority; }
  // Whether `c` touches a GPU reserved for another job, for a placement of `job` of `queue` at
  // `priority`, inside its guarantee or not.
  bool Blocks(const Candidate& c, int job, int queue, bool guaranteed, double priority) const {
    if (owners_.empty() || reserved_on_[c.node] == 0) return false;
    return BlocksOnNode(c, job, queue, guaranteed, priority);
  }
  // Whether some GPU of `node` is reserved.
  bool reserved(int node) const {
    return static_cast<size_t>(node) < reserved_on_.size() && reserved_on_[node] > 0;
  }
  // The job holding (node, gpu), or -1.
  int OwnerOf(int node, int gpu) const;
  const Reservation* Of(int job) const;
  const std::map<int, Reservation>& all() const { return by_job_; }
  size_t size() const { return by_job_.size(); }
  // How many of the starving kind are held.
  int starving() const { return starving_; }

 private:
  bool BlocksOnNode(const Candidate& c, int job, int queue, bool guaranteed, double priority) const;

  std::map<int, Reservation> by_job_;
  std::map<std::pair<int, int>, int> owners_;  // (node, gpu) -> job
  std::vector<int> reserved_on_;               // [node] reserved GPUs
  int starving_ = 0;
};

}  // namespace berth
