// Preemption inside the engine (scheduler.h, "Preemption" and "No thrash"): which victims a
// job may take and why (a guarantee, a fair share, a higher priority), the plans tried in turn,
// and the waiting preemptor's life until its last victim stops. The victim search itself is
// preemption.h's; this file decides what it may search among and commits what it finds.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/preemption.h"
#include "core/scheduler.h"

namespace berth {

void Scheduler::TellToStop(JobRecord& job, Decision::Kind kind, int preemptor,
                           const std::string& why, double now, std::vector<Decision>* out) {
  Uncommit(job);
  job.state = JobState::kStopping;
  job.preempted_by = preemptor;
  job.reason = why;
  job.stop_deadline = kind == Decision::Kind::kPreempt ? now + job.spec.grace_period_s : -1;
  if (job.stop_deadline >= 0) deadlines_.insert({job.stop_deadline, job.id});
  Decision d;
  d.kind = kind;
  d.job = job.id;
  d.preemptor = preemptor;
  d.grace_period_s = kind == Decision::Kind::kPreempt ? job.spec.grace_period_s : 0;
  d.reason = why;
  Emit(now, job.id, DecisionKindName(kind),
       preemptor >= 0 ? why + " (job " + std::to_string(preemptor) + ")" : why);
  out->push_back(std::move(d));
}

// A waiting preemptor goes away or gives up: its victims keep stopping (they were told), but
// for nobody; its reservation and committed GPUs go.
void Scheduler::DropPreemptor(JobRecord& p) {
  for (int v : p.waiting_for) {
    auto it = jobs_.find(v);
    if (it != jobs_.end() && it->second.preempted_by == p.id) it->second.preempted_by = -1;
  }
  p.waiting_for.clear();
  p.preempting = false;
  p.planned.clear();
  UncommitWaiting(p);
  // What it held back (its plan, or a starving reservation) is open to others again.
  if (reservations_.Of(p.id)) ++version_;
  DropReservation(p.id);
}

void Scheduler::WakePreemptor(JobRecord& victim) {
  if (victim.preempted_by < 0) return;
  auto p = jobs_.find(victim.preempted_by);
  if (p != jobs_.end()) {
    std::erase(p->second.waiting_for, victim.id);
    if (p->second.waiting_for.empty()) ready_preemptors_.push_back(p->first);
  }
  victim.preempted_by = -1;
}

// The last victim is gone: the preemptor takes its planned GPUs, reserved for it since.
bool Scheduler::StartPreemptor(JobRecord& p, double now, std::vector<Decision>* out) {
  const bool guaranteed = p.reserved_guaranteed;
  // An elastic preemptor starts at the size it reclaimed for, not past it.
  int most = TotalReplicas(p.spec);
  if (p.spec.min_replicas > 0)
    while (most > p.spec.min_replicas && JobGpus(p.spec, most) > p.committed_gpus + kEps) --most;
  UncommitWaiting(p);
  ++version_;  // what it binds or leaves free may fit jobs that failed before
  // Exactly where its plan placed it, while its reservation holds: a fresh placement's
  // candidates may be another preemptor's reserved GPUs.
  std::vector<ReplicaPlacement> planned = std::move(p.planned);
  p.planned.clear();
  const bool exact = static_cast<int>(planned.size()) == most;
  auto start_as_planned = [&](bool as_guaranteed) {
    return StartOn(p, as_guaranteed, most, planned, now, out);
  };
  if (exact && start_as_planned(guaranteed)) return true;
  if (Start(p, guaranteed, now, out, most)) return true;
  // The queue's guarantee may be bound elsewhere by now, though the cells this plan binds were
  // promised to it (seeds 6645 and 12002 of the steady-demand test). Its victims stopped for it
  // and its GPUs are held for it: it runs there, borrowed, as far as its queue's cap allows.
  if (exact && guaranteed && UnderCap(p, JobGpus(p.spec, most), nullptr) && start_as_planned(false))
    return true;
  // The plan broke (hardware failed under it, guaranteed work took a borrower's plan, or a
  // guaranteed plan's cells were bound elsewhere and it may not borrow): the job waits like any
  // other.
  DropReservation(p.id);
  p.preempting = false;
  p.reason = "its planned placement broke before its victims stopped; waiting again";
  Emit(now, p.id, "pending", p.reason);
  return false;
}

bool Scheduler::StartOn(JobRecord& job, bool guaranteed, int replicas,
                        const std::vector<ReplicaPlacement>& where, double now,
                        std::vector<Decision>* out) {
  // An exact placement skips the filters, the reservations and the model caps: it is made only
  // on GPUs the job's reservation holds (all of them are its own then), none observed crowded
  // since, in a queue with no model caps. Placed afresh, those judge it.
  const bool crowded = std::any_of(where.begin(), where.end(), [&](const ReplicaPlacement& r) {
    return std::any_of(r.gpus.begin(), r.gpus.end(),
                       [&](int g) { return allocator_->gpu_crowded(r.node, g); });
  });
  if (!reservations_.Of(job.id) || crowded || !queues_[job.queue].spec.model_caps.empty())
    return false;
  std::vector<int> ids;
  std::vector<ReplicaPlacement> placed;
  if (!TryPlace(job, guaranteed, replicas, *allocator_, &ids, &placed, &where)) return false;
  Run(job, guaranteed, replicas, std::move(ids), std::move(placed), now, out);
  return true;
}

std::map<std::string, double> Scheduler::FreedByModel(int queue,
                                                      const std::vector<JobRecord*>& gone) const {
  std::map<std::string, double> freed;
  if (queues_[queue].spec.model_caps.empty()) return freed;
  for (const JobRecord* g : gone)
    if (g->queue == queue)
      for (const auto& [model, gpus] : ModelGpus(*g)) freed[model] += gpus;
  return freed;
}

std::map<std::string, double> Scheduler::FreedByModel(int queue,
                                                      const std::vector<Shrink>& shrinks) const {
  std::map<std::string, double> freed;
  if (queues_[queue].spec.model_caps.empty()) return freed;
  for (const Shrink& s : shrinks) {
    if (s.job->queue != queue) continue;
    const std::vector<ReplicaPlacement> kept(s.job->placements.begin(),
                                             s.job->placements.begin() + s.replicas);
    for (const auto& [model, gpus] : ModelGpus(*s.job)) freed[model] += gpus;
    for (const auto& [model, gpus] : ModelGpus(s.job->spec, kept)) freed[model] -= gpus;
  }
  return freed;
}

bool Scheduler::TryPlaceOn(JobRecord& job, bool guaranteed, int replicas, Allocator& trial,
                           const std::map<std::string, double>& freed, TrialPlacement* placement) {
  std::vector<int> ids;
  model_credit_ = freed;
  placing_plan_ = true;
  const bool placed = TryPlace(job, guaranteed, replicas, trial, &ids, &placement->where);
  placing_plan_ = false;
  model_credit_.clear();
  if (!placed) return false;
  placement->bound_gpus.clear();
  placement->bound_cells.clear();
  const auto& cells = trial.tree().cells();
  for (int id : ids)
    for (int bound : trial.Find(id)->bound_here) {
      placement->bound_cells.push_back(bound);
      for (int c = bound; c < trial.tree().subtree_end(bound); ++c)
        if (cells[c].gpu >= 0) placement->bound_gpus.push_back({cells[c].node, cells[c].gpu});
    }
  return true;
}

std::vector<std::pair<int, int>> Scheduler::ReservedGpus(const TrialPlacement& placement) {
  std::set<std::pair<int, int>> gpus(placement.bound_gpus.begin(), placement.bound_gpus.end());
  for (const ReplicaPlacement& r : placement.where)
    for (int g : r.gpus) gpus.insert({r.node, g});
  return {gpus.begin(), gpus.end()};
}

// A guaranteed preemptor whose plan binds a guarantee cell has the whole cell reserved; the
// queue's other guaranteed work waits for what the job leaves of that cell instead of
// reclaiming another one. A plan binds a cell when it promises one (CommitWaiting) or reserves
// GPUs past its placement; a GPU share in a cell its queue binds already does neither, though
// its reserved GPU holds more than it commits. A plan a cluster or queue change dropped
// (Install) is read by its reservation alone, kept whole. A moved job's destination binds
// nothing past its GPUs.
const JobRecord* Scheduler::CellBeingReclaimed(int queue) const {
  for (const auto& [id, r] : reservations_.all()) {
    const JobRecord& p = jobs_.at(id);
    if (p.queue != queue || !r.for_preemption || !p.reserved_guaranteed) continue;
    if (static_cast<double>(r.gpus.size()) <= p.committed_gpus + kEps) continue;  // no room left
    std::set<std::pair<int, int>> placed;
    for (const ReplicaPlacement& replica : p.planned)
      for (int g : replica.gpus) placed.insert({replica.node, g});
    // A cell the queue binds now, which the plan's trial freed and bound again, is not promised
    // but is reserved past the placement.
    if (p.planned.empty() || !p.promised_cells.empty() || r.gpus.size() > placed.size()) return &p;
  }
  return nullptr;
}

Scheduler::PreemptionRoom Scheduler::RoomToPreempt(
    int queue, int priority, double need, double share_need, bool guarantee_only,
    const std::vector<double>& fair, const std::function<bool()>& reclaim_may_fit) const {
  // Reclaim needs a borrower in another queue, and a fair-share reclaim one whose queue is
  // above its share by the hysteresis band.
  const double hysteresis = pipeline_->policy().reclaim_hysteresis;
  bool borrowers = false, over_share = false;
  for (size_t q = 0; q < queues_.size(); ++q) {
    const Queue& other = queues_[q];
    if (static_cast<int>(q) == queue || other.borrowed_gpus <= kEps) continue;
    borrowers = true;
    over_share = over_share || other.committed.gpu > fair[q] * (1 + hysteresis) + kEps;
  }
  const Queue& own = queues_[queue];
  PreemptionRoom room;
  // Guarantees and fair shares are GPUs: a reclaim for no GPUs is none (review: a CPU-only job
  // took borrowers' GPU jobs "for the guarantee" of a queue that had none). Each reason at its
  // own size: an elastic job's guarantee size may be a launcher that asks for no GPU.
  room.within_guarantee =
      need > kEps && borrowers && MayGuarantee(queue, priority, need) && reclaim_may_fit();
  room.below_fair_share = share_need > kEps && over_share && !guarantee_only &&
                          own.committed.gpu + share_need <= fair[queue] + kEps;
  room.lower_exists = !guarantee_only && !own.committed_by_priority.empty() &&
                      own.committed_by_priority.begin()->first < priority;
  return room;
}

bool Scheduler::TryPreempt(JobRecord& job, double now, const std::vector<double>& fair,
                           bool guarantee_only, std::vector<Decision>* out) {
  const Queue& queue = queues_[job.queue];
  const int full = TotalReplicas(job.spec);
  // An elastic job reclaims its guarantee at the size the guarantee leaves room for, and toward
  // its fair share at the size that share leaves room for, each down to its minimum: its full
  // size may be past them while its minimum is not.
  PreemptionSizes sizes{full, full, full};
  if (job.spec.min_replicas > 0) {
    while (sizes.guarantee > job.spec.min_replicas &&
           !MayGuarantee(job, JobGpus(job.spec, sizes.guarantee)))
      --sizes.guarantee;
    while (sizes.share > job.spec.min_replicas &&
           queue.committed.gpu + JobGpus(job.spec, sizes.share) > fair[job.queue] + kEps)
      --sizes.share;
  }
  const JobSpec guarantee_sized = FirstReplicas(job.spec, sizes.guarantee);
  const PreemptionRoom room = RoomToPreempt(
      job.queue, job.spec.priority, JobGpus(job.spec, sizes.guarantee),
      JobGpus(job.spec, sizes.share), guarantee_only, fair,
      [&] { return ReplicaBound::MayFitReclaiming(*allocator_, guarantee_sized, job.queue); });
  // No victim can exist: the common case in a deep queue, answered without looking at the
  // running jobs.
  if (!room.any()) {
    if (job.reason.empty()) job.reason = "no capacity fits the job";
    return false;
  }
  if (room.within_guarantee) {
    if (const JobRecord* p = CellBeingReclaimed(job.queue)) {
      job.reason = "waiting for the guarantee cell job " + std::to_string(p->id) + " reclaims";
      return false;
    }
  }
  for (const PreemptionPlan& plan : PreemptionPlans(job, room, sizes, fair, guarantee_only, now))
    if (TryPreemptionPlan(job, plan, fair, now, out)) return true;
  if (job.reason.empty()) job.reason = "no capacity fits the job";
  return false;
}

std::vector<Scheduler::PreemptionPlan> Scheduler::PreemptionPlans(JobRecord& job,
                                                                  const PreemptionRoom& room,
                                                                  const PreemptionSizes& sizes,
                                                                  const std::vector<double>& fair,
                                                                  bool guarantee_only, double now) {
  using Victims = std::vector<JobRecord*>;
  using Why = PreemptionPlan::Why;
  const double hysteresis = pipeline_->policy().reclaim_hysteresis;
  Victims reclaim, fair_reclaim, lower;
  // Only the queues that may give a victim are visited: the job's own where lower priority runs
  // there, others when reclaiming the guarantee, and those above their share by the band for
  // the fair share.
  const bool may_hold_back = job.held_back_at < 0 || job.held_back_at == now;
  for (size_t q = 0; q < queues_.size(); ++q) {
    const bool gives = static_cast<int>(q) == job.queue
                           ? room.lower_exists
                           : room.within_guarantee ||
                                 (room.below_fair_share &&
                                  queues_[q].committed.gpu > fair[q] * (1 + hysteresis) + kEps);
    if (!gives) continue;
    // Who may give here: (a) another queue's borrowed work; (b) strictly lower priority inside
    // the job's queue, by raw priority and by the whole points (aging included) that order the
    // queue: a job that got ahead by aging is not taken back.
    auto may_give = [&](const JobRecord& v) {
      if (v.state != JobState::kRunning || !v.spec.preemptible) return false;
      if (v.queue != job.queue) return v.borrowed;
      return !guarantee_only && v.spec.priority < job.spec.priority &&
             WholePriority(v, now) < WholePriority(job, now);
    };
    // A job started in this very call is no victim yet (nothing starts and stops in one cycle);
    // the job that would take it is tried again next cycle instead of failing. Nor, in one
    // Schedule call of the preemptor's wait (may_hold_back), is one that could come straight
    // back over it by priority preemption: the preemptor would stop both, where next cycle it
    // may take the lower one alone (FindVictimsLowestFirst).
    std::vector<const JobRecord*> started_now;
    for (const auto& [id, v] : running_by_queue_[q])
      if (v->start_time == now && may_give(*v)) started_now.push_back(v);
    for (const auto& [id, v] : running_by_queue_[q]) {
      if (!may_give(*v)) continue;
      const JobRecord& candidate = *v;  // a structured binding is not captured (clang 14)
      const bool above_started =
          may_hold_back && std::any_of(started_now.begin(), started_now.end(), [&](const auto* f) {
            return f->spec.priority < candidate.spec.priority &&
                   WholePriority(*f, now) < WholePriority(candidate, now);
          });
      const bool fresh = v->start_time == now;
      auto add = [&, v = v](Victims& list) {
        if (above_started) job.held_back_at = now;
        if (fresh || above_started)
          preempt_deferred_ = true;
        else
          list.push_back(v);
      };
      if (v->queue == job.queue) {
        add(lower);
        continue;
      }
      // Reclaim the guarantee; restore the fair share from queues above theirs by the
      // hysteresis band (how far, PlanAllowed checks for the whole set).
      if (room.within_guarantee) add(reclaim);
      if (room.below_fair_share && queues_[q].committed.gpu > fair[q] * (1 + hysteresis) + kEps)
        add(fair_reclaim);
    }
  }
  std::vector<PreemptionPlan> plans;
  if (!reclaim.empty()) plans.push_back({reclaim, true, Why::kGuarantee, sizes.guarantee});
  if (!fair_reclaim.empty()) plans.push_back({fair_reclaim, false, Why::kFairShare, sizes.share});
  if (!lower.empty()) {
    // Inside the guarantee when the victims' guaranteed GPUs make room there, else borrowing.
    if (job.spec.priority >= 0 && queues_[job.queue].guarantee_gpus > 0)
      plans.push_back({lower, true, Why::kPriority, sizes.full});
    plans.push_back({lower, false, Why::kPriority, sizes.full});
    // A fair-share reclaim may also take the queue's own borrowed lower-priority work: a node
    // often holds some of each, and neither alone frees it. Not guaranteed work, nor for a
    // guarantee reclaim: the queue's own victims would take its guarantee again as they
    // restart, before the job, and break its plan (review: a preemption loop).
    Victims borrowed_lower;
    for (JobRecord* v : lower)
      if (v->borrowed) borrowed_lower.push_back(v);
    for (size_t i = 0, reclaims = plans.size(); i < reclaims && !borrowed_lower.empty(); ++i)
      if (plans[i].why == Why::kFairShare) {
        PreemptionPlan both = plans[i];
        both.victims.insert(both.victims.end(), borrowed_lower.begin(), borrowed_lower.end());
        plans.push_back(std::move(both));
      }
  }
  // A starving job (MoveForReservations) may also move its own queue's jobs aside where a
  // reclaim leaves room: the GPUs borrowers give back are often scattered between the queue's
  // own small jobs, and under steady demand nothing else frees a whole node for it.
  if (reclaim_with_moves_) {
    Victims movers;
    for (const auto& [id, v] : running_by_queue_[job.queue])
      if (Movable(*v, job, now)) movers.push_back(v);
    const size_t plain = plans.size();
    for (size_t i = 0; i < plain; ++i)
      if (plans[i].why != Why::kPriority) {
        PreemptionPlan moving = plans[i];
        for (JobRecord* v : movers)  // one the plan stops already does not move
          if (std::find(moving.victims.begin(), moving.victims.end(), v) == moving.victims.end()) {
            moving.victims.push_back(v);
            moving.movers.push_back(v);
          }
        if (!moving.movers.empty()) plans.push_back(std::move(moving));
      }
  }
  return plans;
}

bool Scheduler::PlanAllowed(const JobRecord& job, const PreemptionPlan& plan,
                            const std::vector<double>& fair, const std::map<int, double>& taken,
                            double own, double own_guaranteed) const {
  const Queue& queue = queues_[job.queue];
  const double plan_need = JobGpus(job.spec, plan.replicas);
  // A fair-share reclaim must shrink the total shortfall below the shares by at least half of
  // what the job gets (it gets all of `plan_need` toward its own share): a victim's queue may
  // end a little below its share, when its excess was too fragmented to give whole jobs, but
  // every reclaim moves the cluster toward the water-fill by a fixed amount, so reclaims end.
  if (plan.why == PreemptionPlan::Why::kFairShare) {
    double shortfall_made = 0;
    for (const auto& [q, gpus] : taken) {
      const double held = queues_[q].committed.gpu;
      shortfall_made += std::max(0.0, fair[q] - (held - gpus)) - std::max(0.0, fair[q] - held);
    }
    if (shortfall_made > plan_need / 2 + kEps) return false;
  }
  const bool under_cap =
      queue.spec.cap_gpus < 0 ||
      queue.held.gpu + queue.waiting_gpus - own + plan_need <= queue.spec.cap_gpus + kEps;
  if (plan.guaranteed)
    return job.spec.priority >= 0 && under_cap &&
           queue.committed_guaranteed - own_guaranteed + plan_need <= queue.guarantee_gpus + kEps;
  return under_cap;
}

bool Scheduler::TryPreemptionPlan(JobRecord& job, const PreemptionPlan& plan,
                                  const std::vector<double>& fair, double now,
                                  std::vector<Decision>* out) {
  using Victims = std::vector<JobRecord*>;
  auto moves = [&](const JobRecord* v) {
    return std::find(plan.movers.begin(), plan.movers.end(), v) != plan.movers.end();
  };
  // Where the movers go once the job is placed on `trial`, in the order of `gone`; false when
  // one finds no place, or only one on the job's planned GPUs or another's reservation.
  auto place_movers = [&](Allocator& trial, const Victims& gone, const TrialPlacement& where,
                          std::vector<std::vector<ReplicaPlacement>>* destinations) {
    const std::vector<std::pair<int, int>> planned_gpus = ReservedGpus(where);
    const std::set<std::pair<int, int>> planned(planned_gpus.begin(), planned_gpus.end());
    for (JobRecord* v : gone) {
      if (!moves(v)) continue;
      std::vector<ReplicaPlacement> placed;
      if (!PlaceMoved(*v, trial, &placed)) return false;
      for (const ReplicaPlacement& r : placed)
        for (int g : r.gpus) {
          const int owner = reservations_.OwnerOf(r.node, g);
          if (planned.count({r.node, g}) || (owner >= 0 && owner != job.id)) return false;
        }
      destinations->push_back(std::move(placed));
    }
    return true;
  };
  auto stopping_for_good = [&](const Victims& gone) {
    Victims out;
    for (JobRecord* v : gone)
      if (!moves(v)) out.push_back(v);
    return out;
  };
  const JobSpec sized = FirstReplicas(job.spec, plan.replicas);  // what the search places
  // What giving `gpus` of `v` takes from each queue, and from the job's own (`own`,
  // `own_guaranteed` of it guaranteed), as PlanAllowed counts it.
  auto giving = [&](const JobRecord& v, double gpus, std::map<int, double>& taken, double& own,
                    double& own_guaranteed) {
    taken[v.queue] += gpus;
    if (v.queue != job.queue) return;
    own += gpus;
    if (!v.borrowed) own_guaranteed += gpus;
  };
  auto fits = [&](Allocator& trial, const std::map<std::string, double>& freed,
                  TrialPlacement* where) {
    return TryPlaceOn(job, plan.guaranteed, plan.replicas, trial, freed, where);
  };
  // Elastic victims give back replicas first; the job then starts at once on what they freed.
  ShrinkSearch shrinking;
  shrinking.alloc = allocator_.get();
  shrinking.allowed = [&](const std::vector<Shrink>& shrinks) {
    std::map<int, double> taken;
    double own = 0, own_guaranteed = 0;
    for (const Shrink& s : shrinks)
      giving(*s.job, s.job->gpu_equivalents - JobGpus(s.job->spec, s.replicas), taken, own,
             own_guaranteed);
    return PlanAllowed(job, plan, fair, taken, own, own_guaranteed);
  };
  shrinking.shrink = [&](Allocator& trial, const Shrink& s, std::vector<int>* ids) {
    for (int a : *ids) trial.Release(a);
    const std::vector<ReplicaPlacement> keep(s.job->placements.begin(),
                                             s.job->placements.begin() + s.replicas);
    std::vector<ReplicaPlacement> placed;
    return TryPlace(*s.job, !s.job->borrowed, s.replicas, trial, ids, &placed, &keep);
  };
  shrinking.fits = [&](Allocator& trial, const std::vector<Shrink>& shrinks,
                       TrialPlacement* where) {
    return fits(trial, FreedByModel(job.queue, shrinks), where);
  };
  std::optional<ShrinkPlan> shrunk;
  if (plan.movers.empty()) shrunk = FindShrinks(shrinking, plan.victims);
  if (shrunk) {
    for (const Shrink& s : shrunk->shrinks) Resize(*s.job, s.replicas, now, out);
    if (Start(job, plan.guaranteed, now, out, plan.replicas)) return true;
  }
  VictimSearch search;
  search.alloc = allocator_.get();
  search.spec = &sized;
  search.vc = plan.guaranteed ? job.queue : -1;
  search.now = now;
  search.every_node = !plan.movers.empty();
  search.allowed = [&](const Victims& victims) {
    std::map<int, double> taken;
    double own = 0, own_guaranteed = 0;
    for (const JobRecord* v : victims)
      if (!moves(v)) giving(*v, v->gpu_equivalents, taken, own, own_guaranteed);
    return PlanAllowed(job, plan, fair, taken, own, own_guaranteed);
  };
  search.fits = [&](Allocator& trial, const Victims& gone, TrialPlacement* where) {
    if (plan.movers.empty()) return fits(trial, FreedByModel(job.queue, gone), where);
    // On a copy, as in PlanAmongMovable: a refusal must leave `trial` as it was.
    Allocator probe = trial;
    std::vector<std::vector<ReplicaPlacement>> destinations;
    return fits(probe, FreedByModel(job.queue, stopping_for_good(gone)), where) &&
           place_movers(probe, gone, *where, &destinations);
  };
  std::optional<VictimPlan> found = FindVictimsLowestFirst(
      search, plan.victims, [&](const JobRecord& v) { return WholePriority(v, now); }, plan.movers);
  if (!found) return false;
  // The movers' destinations, found again as the search found them.
  std::vector<std::vector<ReplicaPlacement>> destinations;
  if (!plan.movers.empty()) {
    Allocator trial = *allocator_;
    for (const JobRecord* v : found->victims)
      for (int a : v->allocations) trial.Release(a);
    TrialPlacement where;
    Victims movers;
    for (JobRecord* v : found->victims)
      if (moves(v)) movers.push_back(v);
    if (!fits(trial, FreedByModel(job.queue, stopping_for_good(found->victims)), &where) ||
        !place_movers(trial, found->victims, where, &destinations) ||
        !FitsAfterMovers(job, plan.guaranteed, plan.replicas, where.where, found->victims, movers,
                         destinations))
      return false;
    found->placement = where;  // the placement the destinations were checked against
  }
  // It fits with no victim at all (an elastic job at the size it reclaims for, inside a
  // guarantee its full size would not fit): it starts now.
  if (found->victims.empty()) return Start(job, plan.guaranteed, now, out, plan.replicas);
  WaitForVictims(job, plan, *found, destinations, now, out);
  return true;
}

void Scheduler::WaitForVictims(JobRecord& job, const PreemptionPlan& plan, const VictimPlan& found,
                               const std::vector<std::vector<ReplicaPlacement>>& destinations,
                               double now, std::vector<Decision>* out) {
  using Why = PreemptionPlan::Why;
  const std::string& queue = queues_[job.queue].spec.name;
  const char* why = plan.why == Why::kGuarantee   ? "reclaimed for the guarantee of queue "
                    : plan.why == Why::kFairShare ? "reclaimed for the fair share of queue "
                                                  : "preempted by higher priority in queue ";
  job.waiting_for.clear();
  size_t moved = 0;
  for (JobRecord* victim : found.victims) {
    if (std::find(plan.movers.begin(), plan.movers.end(), victim) != plan.movers.end())
      MoveAway(*victim, job.id, destinations[moved++],
               "moved to make room for a long-waiting job of its queue where borrowed GPUs "
               "were reclaimed",
               now, out);
    else
      TellToStop(
          *victim, Decision::Kind::kPreempt, job.id,
          (victim->queue == job.queue ? "preempted by higher priority in queue " : why) + queue,
          now, out);
    job.waiting_for.push_back(victim->id);
  }
  CommitWaiting(job, JobGpus(job.spec, plan.replicas), plan.guaranteed,
                found.placement.bound_cells);
  job.planned = found.placement.where;
  // A borrower's plan this guaranteed one overlaps (another queue's, or its own queue's of
  // lower priority: the search goes around the rest) loses its reservation; its victims still
  // stop, and it then starts wherever it fits.
  Reservations::Reservation kind;
  kind.yields = !plan.guaranteed;
  kind.for_preemption = true;
  kind.priority = WholePriority(job, now);
  kind.queue = job.queue;
  Reserve(job.id, ReservedGpus(found.placement), kind);
  job.preempting = true;
  job.reason = "waiting for " + std::to_string(found.victims.size()) + " preempted job(s) to stop";
  Emit(now, job.id, "waiting", job.reason);
}

}  // namespace berth
