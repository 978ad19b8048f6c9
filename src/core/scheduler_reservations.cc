// Reservations inside the engine (scheduler.h, "Nothing starves"): a long-waiting job reserves
// the GPUs of a placement, and under steady demand moves their occupants elsewhere, each once
// in its life. The reservation table itself is reservation.h's; this file decides who reserves
// what, and which jobs move where.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/preemption.h"
#include "core/scheduler.h"

namespace berth {
namespace {

std::vector<std::pair<int, int>> GpusOf(const std::vector<ReplicaPlacement>& placements) {
  std::vector<std::pair<int, int>> gpus;
  for (const ReplicaPlacement& p : placements)
    for (int g : p.gpus) gpus.push_back({p.node, g});
  return gpus;
}

}  // namespace

void Scheduler::Reserve(int job, const std::vector<std::pair<int, int>>& gpus,
                        const Reservations::Reservation& kind) {
  // A reservation displaced here (guaranteed work's plan over a borrower's) is told why: its
  // victims stopped for nothing, and it waits like any other job.
  for (int displaced : reservations_.Reserve(job, gpus, kind, cluster_->nodes.size())) {
    DestinationGone(jobs_.at(displaced));
    Emit(now_, displaced, "plan-displaced",
         "its reserved GPUs went to the plan of job " + std::to_string(job));
  }
  MarkReservedNodes();  // reservations it displaced may have left other nodes
}

void Scheduler::DisplaceYieldingPlans(const JobRecord& job,
                                      const std::vector<ReplicaPlacement>& placements, double now) {
  std::set<int> displaced;
  for (const ReplicaPlacement& r : placements)
    for (int g : r.gpus)
      if (const int owner = reservations_.OwnerOf(r.node, g); owner >= 0 && owner != job.id) {
        const Reservations::Reservation* plan = reservations_.Of(owner);
        // As Reservations::BlocksOnNode lets it pass: a starving borrower's reservation is
        // planned anew away from guaranteed work (TryReserve), which would pass it again.
        if (plan->yields && (plan->starving() || plan->queue != job.queue ||
                             WholePriority(job, now) > plan->priority))
          displaced.insert(owner);
      }
  if (!displaced.empty()) ++version_;  // jobs its GPUs turned away may fit now
  for (int owner : displaced) {
    DropReservation(owner);
    Emit(now, owner, "plan-displaced",
         "its reserved GPUs went to guaranteed job " + std::to_string(job.id));
  }
}

void Scheduler::DropReservation(int job) {
  const Reservations::Reservation* r = reservations_.Of(job);
  if (!r) return;
  const std::vector<std::pair<int, int>> gpus = r->gpus;
  reservations_.Drop(job);
  for (const auto& [node, gpu] : gpus)
    allocator_->SetNodeReserved(node, reservations_.reserved(node));
  DestinationGone(jobs_.at(job));
}

void Scheduler::DestinationGone(JobRecord& job) {
  if (job.destination.empty()) return;
  if (job.state == JobState::kStopping)
    job.destination.clear();
  else
    UncommitWaiting(job);
}

void Scheduler::MarkReservedNodes() {
  const int nodes = static_cast<int>(allocator_->cluster().nodes.size());
  for (int n = 0; n < nodes; ++n) allocator_->SetNodeReserved(n, reservations_.reserved(n));
}

const JobRecord* Scheduler::LongestWaitingUnreserved(int queue) const {
  for (const JobRecord* j : queues_[queue].pending)  // longest waiting first
    if (!reservations_.Of(j->id) && j->never_fits.empty() && j->next_try <= now_ &&
        j->waiting_for.empty())
      return j;
  return nullptr;
}

// A job that has waited long enough reserves the GPUs of a placement whose occupants are the
// fewest and cheapest; as they end, nobody else is placed there, so it starts.
void Scheduler::TryReserve(JobRecord& job, double now) {
  const Policy& policy = pipeline_->policy();
  if (now - job.pending_since < policy.reserve_after_s || reservations_.Of(job.id) ||
      reservations_.starving() >= policy.max_reservations)
    return;
  const Queue& queue = queues_[job.queue];
  const double need = JobGpus(job.spec, TotalReplicas(job.spec));
  if (queue.spec.cap_gpus >= 0 && need > queue.spec.cap_gpus + kEps) return;
  const bool guaranteed =
      job.spec.priority >= 0 && need <= queue.guarantee_gpus + kEps && MayGuarantee(job, need);
  // A queue at its cap could not start the job on the reserved GPUs: holding them would only
  // keep them from others.
  if (!guaranteed && !UnderCap(job, need, nullptr)) return;
  // No plan for a job means none for a larger one of its class (occupants and reservations
  // only grow within a cycle), nor does too little room (room made later in the cycle is seen
  // in the next).
  FailedShapes& unreservable = unreservable_[guaranteed];
  const double priority = WholePriority(job, now);
  if (unreservable.Dominated(job.shape_class, job.shape, priority)) return;
  // Guaranteed work passes a borrower's reservation. Borrowers' reservations that, with the
  // guarantees, need more than the cluster are overrun by it again and again and never start,
  // while every other borrower is kept off their GPUs (synthetic replay seed 25: two 64-GPU
  // ones held most of 128 GPUs idle for two days).
  if (!guaranteed && need > BorrowerReservationRoom(job) + kEps) {
    // An elastic job's shape is its minimum, which a refusal at its full size says nothing of.
    if (job.spec.min_replicas == 0)
      unreservable.Add(job.shape_class, job.shape, priority, version_);
    return;
  }
  std::vector<JobRecord*> occupants;
  // Guaranteed work passes a borrower's reservation, and more of it would start where it
  // ended: a borrower waits only for borrowed work.
  for (const auto& [id, v] : running_)
    if (v->state == JobState::kRunning && (guaranteed || v->borrowed)) occupants.push_back(v);
  VictimSearch search;
  search.alloc = allocator_.get();
  search.spec = &job.spec;
  search.vc = guaranteed ? job.queue : -1;
  search.now = now;
  search.allowed = [](const std::vector<JobRecord*>&) { return true; };
  search.fits = [&](Allocator& trial, const std::vector<JobRecord*>& gone, TrialPlacement* where) {
    return TryPlaceOn(job, guaranteed, TotalReplicas(job.spec), trial,
                      FreedByModel(job.queue, gone), where);
  };
  planning_reservation_ = true;
  std::optional<VictimPlan> found = FindVictims(search, occupants);
  planning_reservation_ = false;
  if (!found) {
    unreservable.Add(job.shape_class, job.shape, priority, version_);
    return;
  }
  Reservations::Reservation kind;
  kind.yields = !guaranteed;
  kind.priority = priority;
  kind.queue = job.queue;
  kind.since = now;
  Reserve(job.id, ReservedGpus(found->placement), kind);
  job.reason = "reserved GPUs, waiting for " + std::to_string(found->victims.size()) +
               " job(s) on them to end";
  Emit(now, job.id, "reserved", job.reason);
}

double Scheduler::BorrowerReservationRoom(const JobRecord& job) const {
  double room = SharedGpus();
  for (const Queue& q : queues_) {
    // What the queue's guaranteed work holds or waits for, and its pending jobs that could run
    // inside the guarantee (not borrow-only ones, ones larger than it or ones that never fit),
    // up to the guarantee: a job submitted by mistake must not shut out every borrower.
    // Borrowers' reservations are counted below. The longest-waiting kRoomScan pending jobs
    // only: a deep queue of jobs that cannot use the guarantee costs no more.
    constexpr int kRoomScan = 1000;
    double asked = q.committed_guaranteed;
    int scanned = 0;
    for (auto it = q.pending.begin();
         it != q.pending.end() && asked < q.guarantee_gpus && scanned < kRoomScan;
         ++it, ++scanned) {
      const JobRecord& p = **it;
      const double need = JobGpus(p.spec, TotalReplicas(p.spec));
      const Reservations::Reservation* r = reservations_.Of(p.id);
      if (&p != &job && p.committed_gpus == 0 && p.spec.priority >= 0 && p.never_fits.empty() &&
          need <= q.guarantee_gpus + kEps && !(r && r->starving() && r->yields))
        asked += need;
    }
    room -= std::min(q.guarantee_gpus, asked);
  }
  for (const auto& [id, r] : reservations_.all())
    if (r.starving() && r.yields) room -= static_cast<double>(r.gpus.size());
  return room;
}

void Scheduler::MoveForReservations(const std::vector<double>& fair, double now,
                                    std::vector<Decision>* out) {
  const double after = pipeline_->policy().reserve_after_s;
  std::vector<int> due;
  for (const auto& [id, r] : reservations_.all()) {
    const JobRecord& j = jobs_.at(id);
    if (r.starving() && now - r.since >= after && j.state == JobState::kPending &&
        j.waiting_for.empty() && j.next_try <= now && j.move_tried_at != version_)
      due.push_back(id);
  }
  for (int id : due) {
    JobRecord& job = jobs_.at(id);
    job.move_tried_at = version_;
    const Reservations::Reservation* r = reservations_.Of(id);
    if (r == nullptr || !MayMoveFor(job, fair)) continue;
    const Reservations::Reservation held = *r;
    // Occupants that cannot move never leave under steady demand: GPUs whose occupants can,
    // or borrowed GPUs reclaimed where the queue's own jobs can move aside, are then the job's
    // only way in.
    if (TryMoveFor(job, held.gpus, now, out)) continue;
    // Set aside meanwhile: the jobs that move for it may go to its reserved GPUs.
    DropReservation(job.id);
    if (!MoveOnOtherGpus(job, held, now, out)) {
      reclaim_with_moves_ = true;
      preempt_deferred_ = false;
      TryPreempt(job, now, fair, false, out);
      reclaim_with_moves_ = false;
    }
    if (job.state == JobState::kPending && !reservations_.Of(job.id))
      Reserve(job.id, held.gpus, held);
  }
}

bool Scheduler::MoveOnOtherGpus(JobRecord& job, const Reservations::Reservation& held, double now,
                                std::vector<Decision>* out) {
  const std::optional<VictimPlan> movable = PlanAmongMovable(job, now);
  if (!movable) return false;
  const std::vector<std::pair<int, int>> gpus = ReservedGpus(movable->placement);
  // Taking another's reserved GPU would drop that reservation, which no undo brings back.
  if (std::any_of(gpus.begin(), gpus.end(), [&](const auto& ng) {
        const int owner = reservations_.OwnerOf(ng.first, ng.second);
        return owner >= 0 && owner != job.id;
      }))
    return false;
  Reserve(job.id, gpus, held);
  // The plan may move a job off another node too, to make room for one moved off these GPUs.
  if (TryMoveFor(job, gpus, now, out, movable->victims)) return true;
  DropReservation(job.id);
  return false;
}

void Scheduler::MoveAway(JobRecord& o, int for_job,
                         const std::vector<ReplicaPlacement>& destination, const std::string& why,
                         double now, std::vector<Decision>* out) {
  const bool guaranteed = !o.borrowed;
  const double holds = o.gpu_equivalents;
  TellToStop(o, Decision::Kind::kPreempt, for_job, why, now, out);
  o.moved = true;
  // Its queue keeps what it holds counted while it stops (no reclaim for a dip that ends when it
  // starts again), and its destination is held for it.
  CommitWaiting(o, holds, guaranteed, {});
  Reservations::Reservation kind;
  kind.for_move = true;
  kind.priority = WholePriority(o, now);
  kind.queue = o.queue;
  kind.since = now;
  Reserve(o.id, GpusOf(destination), kind);
  o.destination = destination;
}

bool Scheduler::StartMoved(JobRecord& o, double now, std::vector<Decision>* out) {
  // The jobs of its plan that it replaces there may still be stopping: it waits for them, still
  // counted where it goes.
  const std::vector<std::pair<int, int>> gpus = GpusOf(o.destination);
  const std::set<std::pair<int, int>> gpu_set(gpus.begin(), gpus.end());
  for (const auto& [id, j] : running_)
    if (j->state == JobState::kStopping)
      for (const ReplicaPlacement& p : j->placements)
        for (int g : p.gpus)
          if (gpu_set.count({p.node, g})) {
            o.reason = "waiting for job " + std::to_string(id) + " to leave its destination";
            return false;
          }
  const std::vector<ReplicaPlacement> destination = o.destination;
  const bool guaranteed = o.reserved_guaranteed;
  UncommitWaiting(o);  // its start takes its count over
  // Placed afresh, its guarantee or priority could take it back onto the GPUs it left and break
  // the plan it left them for (seed 312 of the water-fill test, 12253 of the thrash test). Its
  // queue counted it where it goes, inside the guarantee or not as it ran: started so, it takes
  // no room of the guarantee or the cap that it did not hold a moment before (the counts would
  // refuse it while its fellow movers still stop: a stopping mover is counted both where it
  // holds and where it goes).
  const int replicas = static_cast<int>(destination.size());
  if ((guaranteed && StartOn(o, true, replicas, destination, now, out)) ||
      StartOn(o, false, replicas, destination, now, out))
    return true;
  // It no longer fits there (hardware changed), or its queue's model caps judge it: placed as
  // any job is.
  DropReservation(o.id);
  ++version_;  // its GPUs may fit jobs that failed before
  return false;
}

void Scheduler::StartStoppedMovers(double now, std::vector<Decision>* out) {
  std::vector<int> movers;
  for (const auto& [id, r] : reservations_.all())
    if (r.for_move && jobs_.at(id).state == JobState::kPending) movers.push_back(id);
  for (int id : movers) StartMoved(jobs_.at(id), now, out);
}

bool Scheduler::FitsAfterMovers(JobRecord& job, bool guaranteed, int replicas,
                                const std::vector<ReplicaPlacement>& where,
                                const std::vector<JobRecord*>& gone,
                                const std::vector<JobRecord*>& movers,
                                const std::vector<std::vector<ReplicaPlacement>>& destinations) {
  // A queue with model caps has its jobs placed afresh (StartOn), judged then.
  if (!queues_[job.queue].spec.model_caps.empty()) return true;
  Allocator after = *allocator_;
  for (const JobRecord* o : gone)
    for (int a : o->allocations) after.Release(a);
  std::vector<int> ids;
  std::vector<ReplicaPlacement> placed;
  placing_plan_ = true;
  bool fits = true;
  for (size_t i = 0; fits && i < movers.size(); ++i) {
    JobRecord& o = *movers[i];
    if (!queues_[o.queue].spec.model_caps.empty()) continue;  // placed afresh (StartMoved)
    const int n = static_cast<int>(destinations[i].size());
    fits = (!o.borrowed && TryPlace(o, true, n, after, &ids, &placed, &destinations[i])) ||
           TryPlace(o, false, n, after, &ids, &placed, &destinations[i]);
  }
  fits = fits && TryPlace(job, guaranteed, replicas, after, &ids, &placed, &where);
  placing_plan_ = false;
  return fits;
}

bool Scheduler::MayMoveFor(const JobRecord& job, const std::vector<double>& fair) const {
  const double need = JobGpus(job.spec, TotalReplicas(job.spec));
  if (job.spec.priority >= 0 && MayGuarantee(job, need)) return true;
  return UnderCap(job, need, nullptr) &&
         queues_[job.queue].committed.gpu + need <=
             fair[job.queue] * (1 + pipeline_->policy().reclaim_hysteresis) + kEps;
}

bool Scheduler::Movable(const JobRecord& o, const JobRecord& job, double now) {
  // Work that may be stopped and restarted, once, and that is the job's own queue's or
  // borrowed (another queue's guaranteed work stays in its cells); none started in this cycle:
  // nothing is started and stopped in one cycle (review).
  return o.state == JobState::kRunning && !o.moved && o.spec.preemptible &&
         (o.queue == job.queue || o.borrowed) && o.start_time < now;
}

bool Scheduler::PlaceMoved(JobRecord& o, Allocator& trial, std::vector<ReplicaPlacement>* placed) {
  std::vector<int> ids;
  // Guaranteed work that finds no guarantee cell left may borrow, as it would if it started now.
  placing_plan_ = true;
  const bool fits = (!o.borrowed && TryPlace(o, true, o.replicas, trial, &ids, placed)) ||
                    TryPlace(o, false, o.replicas, trial, &ids, placed);
  placing_plan_ = false;
  return fits;
}

std::optional<VictimPlan> Scheduler::PlanAmongMovable(JobRecord& job, double now) {
  const double need = JobGpus(job.spec, TotalReplicas(job.spec));
  const bool guaranteed = job.spec.priority >= 0 && MayGuarantee(job, need);
  std::vector<JobRecord*> movable;
  for (const auto& [id, o] : running_)
    if (Movable(*o, job, now)) movable.push_back(o);
  VictimSearch search;
  search.alloc = allocator_.get();
  search.spec = &job.spec;
  search.vc = guaranteed ? job.queue : -1;
  search.now = now;
  search.every_node = true;
  search.allowed = [](const std::vector<JobRecord*>&) { return true; };
  search.fits = [&](Allocator& trial, const std::vector<JobRecord*>& gone, TrialPlacement* where) {
    // On a copy: a search that goes on after a refusal reuses `trial`, which must then hold
    // neither the job nor the occupants placed before one found no room (review).
    Allocator probe = trial;
    if (!TryPlaceOn(job, guaranteed, TotalReplicas(job.spec), probe, FreedByModel(job.queue, gone),
                    where))
      return false;
    std::vector<ReplicaPlacement> placed;
    return std::all_of(gone.begin(), gone.end(),
                       [&](JobRecord* o) { return PlaceMoved(*o, probe, &placed); });
  };
  planning_reservation_ = true;
  std::optional<VictimPlan> found = FindVictims(search, movable);
  planning_reservation_ = false;
  return found;
}

// Under steady demand nothing ends: a reservation waiting for its occupants would wait for
// ever while the GPUs they could use sit idle elsewhere (fragmentation). Moving them costs each
// one restart, once in its life; a job is moved only for a job whose queue then stays within
// its guarantee or fair share, so moves do not feed reclaims.
bool Scheduler::TryMoveFor(JobRecord& job, const std::vector<std::pair<int, int>>& reserved_gpus,
                           double now, std::vector<Decision>* out,
                           const std::vector<JobRecord*>& also) {
  const double need = JobGpus(job.spec, TotalReplicas(job.spec));
  const bool guaranteed = job.spec.priority >= 0 && MayGuarantee(job, need);
  const std::set<std::pair<int, int>> reserved(reserved_gpus.begin(), reserved_gpus.end());
  std::vector<JobRecord*> occupants;
  for (const auto& [id, o] : running_) {
    const bool on_it = std::any_of(o->placements.begin(), o->placements.end(), [&](const auto& p) {
      return std::any_of(p.gpus.begin(), p.gpus.end(), [&](int g) {
        return reserved.count({p.node, g}) > 0;
      });
    });
    if (!on_it) continue;
    if (!Movable(*o, job, now)) return false;
    occupants.push_back(o);
  }
  for (JobRecord* o : also)
    if (std::find(occupants.begin(), occupants.end(), o) == occupants.end()) {
      if (!Movable(*o, job, now)) return false;
      occupants.push_back(o);
    }
  if (occupants.empty()) return true;  // it starts as soon as its turn comes
  // Starving reservations of the job's queue that rank no higher give way to the occupants'
  // destinations (two of them could each hold the GPUs the other's occupants would move to);
  // one a destination takes is dropped whole (Reserve) and planned anew.
  std::vector<std::pair<int, Reservations::Reservation>> set_aside;
  const double rank = WholePriority(job, now);
  for (const auto& [id, other] : reservations_.all())
    if (id != job.id && other.starving() && other.queue == job.queue &&
        (other.priority < rank ||
         (other.priority == rank &&
          std::tie(jobs_.at(id).pending_since, id) > std::tie(job.pending_since, job.id))))
      set_aside.push_back({id, other});
  for (const auto& [id, other] : set_aside) reservations_.Drop(id);
  auto restore = [&] {
    for (const auto& [id, other] : set_aside)
      reservations_.Reserve(id, other.gpus, other, cluster_->nodes.size());
  };
  // The job first, on what the occupants leave; then each occupant where it fits now.
  Allocator trial = *allocator_;
  for (const JobRecord* o : occupants)
    for (int a : o->allocations) trial.Release(a);
  TrialPlacement where;
  std::vector<std::vector<ReplicaPlacement>> destinations;
  bool fits = TryPlaceOn(job, guaranteed, TotalReplicas(job.spec), trial,
                         FreedByModel(job.queue, occupants), &where);
  for (size_t i = 0; fits && i < occupants.size(); ++i) {
    std::vector<ReplicaPlacement> placed;
    fits = PlaceMoved(*occupants[i], trial, &placed);
    destinations.push_back(std::move(placed));
  }
  restore();
  if (!fits || !FitsAfterMovers(job, guaranteed, TotalReplicas(job.spec), where.where, occupants,
                                occupants, destinations))
    return false;
  // Nobody else's reserved GPUs but those set aside (an occupant outranking a reservation may
  // be placed on it).
  auto others = [&](const std::vector<std::pair<int, int>>& gpus) {
    return std::any_of(gpus.begin(), gpus.end(), [&](const auto& ng) {
      const int owner = reservations_.OwnerOf(ng.first, ng.second);
      return owner >= 0 && owner != job.id &&
             std::none_of(set_aside.begin(), set_aside.end(),
                          [&](const auto& a) { return a.first == owner; });
    });
  };
  std::vector<std::vector<std::pair<int, int>>> destination_gpus;
  for (const std::vector<ReplicaPlacement>& d : destinations) {
    destination_gpus.push_back(GpusOf(d));
    if (others(destination_gpus.back())) return false;
  }
  const std::vector<std::pair<int, int>> plan_gpus = ReservedGpus(where);
  if (others(plan_gpus)) return false;
  // A destination inside a guarantee cell the plan binds would be taken back by the plan's
  // reservation (review).
  const std::set<std::pair<int, int>> planned(plan_gpus.begin(), plan_gpus.end());
  for (const auto& gpus : destination_gpus)
    for (const auto& ng : gpus)
      if (planned.count(ng)) return false;
  job.waiting_for.clear();
  for (size_t i = 0; i < occupants.size(); ++i) {
    MoveAway(*occupants[i], job.id, destinations[i],
             "moved to free the GPUs reserved for a long-waiting job", now, out);
    job.waiting_for.push_back(occupants[i]->id);
  }
  CommitWaiting(job, need, guaranteed, where.bound_cells);
  job.planned = where.where;
  Reservations::Reservation kind;
  kind.yields = !guaranteed;
  kind.for_preemption = true;
  kind.priority = WholePriority(job, now);
  kind.queue = job.queue;
  kind.since = now;
  Reserve(job.id, plan_gpus, kind);
  job.preempting = true;
  job.reason = "waiting for " + std::to_string(occupants.size()) +
               " job(s) moved off its reserved GPUs to stop";
  Emit(now, job.id, "waiting", job.reason);
  return true;
}

}  // namespace berth
