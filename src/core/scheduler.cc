// The engine's cycle (Schedule, TryJob) and a job's life from Submit to its end; scheduler.h
// states the contract. The rest of the engine, by concept:
//   scheduler_accounting.cc    what each queue holds and commits; guarantees, caps, fair shares
//   scheduler_pending.cc       the pending lists; what a deep queue's cycle knows will fail
//   scheduler_preemption.cc    victims and plans for a guarantee, a fair share, a priority
//   scheduler_reservations.cc  reservations for starving jobs, and the moves they make
//   scheduler_elastic.cc       elastic sizes: start, grow, shrink
//   scheduler_changes.cc       cluster, queues, health, crash recovery, the extender's dry run
//   scheduler_consistency.cc   the self-check the tests run
#include "core/scheduler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "core/plugins/factories.h"
#include "core/preemption.h"

namespace berth {
namespace {

constexpr double kAnyPriority = std::numeric_limits<double>::infinity();

}  // namespace

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "pending";
    case JobState::kRunning:
      return "running";
    case JobState::kStopping:
      return "stopping";
    case JobState::kDone:
      return "done";
  }
  return "?";
}

const char* JobEndName(JobEnd end) {
  switch (end) {
    case JobEnd::kNone:
      return "";
    case JobEnd::kSucceeded:
      return "succeeded";
    case JobEnd::kFailed:
      return "failed";
    case JobEnd::kCancelled:
      return "cancelled";
    case JobEnd::kLost:
      return "lost";
  }
  return "?";
}

const char* DecisionKindName(Decision::Kind kind) {
  switch (kind) {
    case Decision::Kind::kStart:
      return "start";
    case Decision::Kind::kPreempt:
      return "preempt";
    case Decision::Kind::kEvict:
      return "evict";
    case Decision::Kind::kKill:
      return "kill";
    case Decision::Kind::kGrow:
      return "grow";
    case Decision::Kind::kShrink:
      return "shrink";
  }
  return "?";
}

namespace {

// The gpu-memory-threshold filter's ratio in `policy`, or -1 when it has none.
double CrowdedRatio(const Policy& policy) {
  for (const PluginConfig& f : policy.filters)
    if (f.name == "gpu-memory-threshold") {
      const auto ratio = f.params.find("ratio");
      return ratio == f.params.end() ? kDefaultGpuMemoryRatio : ratio->second;
    }
  return -1;
}

}  // namespace

Scheduler::Scheduler(const Cluster* cluster, const std::vector<QueueSpec>& queues,
                     const Policy& policy)
    : cluster_(cluster) {
  std::vector<VirtualClusterSpec> vcs;
  for (const QueueSpec& q : queues) {
    if (queue_index_.count(q.name)) {
      error_ = "queues: \"" + q.name + "\" is declared twice";
      return;
    }
    if (!(q.weight > 0)) {
      error_ = "queues." + q.name + ".weight: must be > 0";
      return;
    }
    queue_index_[q.name] = static_cast<int>(queues_.size());
    Queue queue;
    queue.spec = q;
    queues_.push_back(queue);
    vcs.push_back({q.name, q.guarantees});
  }
  running_by_queue_.resize(queues_.size());
  allocator_ = std::make_unique<Allocator>(cluster, vcs);
  if (!allocator_->error().empty()) {
    error_ = allocator_->error();
    return;
  }
  std::vector<std::string> errors;
  pipeline_ = PlacementPipeline::Make(policy, &errors);
  if (!pipeline_) {
    error_ = "policy: " + errors.front();
    return;
  }
  CountGuarantees();
  CountCapacity();
  crowded_ratio_ = CrowdedRatio(policy);
  gpus_by_priority_.resize(cluster->nodes.size());
}

std::vector<std::string> Scheduler::SetPolicy(const Policy& policy) {
  std::vector<std::string> errors;
  auto next = PlacementPipeline::Make(policy, &errors);
  if (next) {
    pipeline_ = std::move(next);
    crowded_ratio_ = CrowdedRatio(policy);
    crowding_known_ = false;
  }
  ++version_;
  return errors;
}

std::vector<int> Scheduler::pending(int queue) const {
  std::vector<int> ids;
  for (const JobRecord* j : queues_[queue].pending) ids.push_back(j->id);
  return ids;
}

const JobRecord* Scheduler::job(int id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void Scheduler::Emit(double now, int job, const std::string& kind, const std::string& reason) {
  events_.push_back({next_event_++, now, job, kind, reason});
  if (events_.size() > kKeptEvents) events_.pop_front();
}

std::vector<EngineEvent> Scheduler::EventsSince(uint64_t seq) const {
  std::vector<EngineEvent> out;
  auto it = std::upper_bound(events_.begin(), events_.end(), seq,
                             [](uint64_t s, const EngineEvent& e) { return s < e.seq; });
  out.assign(it, events_.end());
  return out;
}

std::string WhyRefused(const Cluster& cluster, const Policy& policy, const QueueSpec& queue,
                       const JobSpec& spec) {
  if (spec.groups.empty() || TotalReplicas(spec) < 1)
    return "groups: a job needs at least one task group with replicas >= 1";
  if (spec.min_replicas < 0 || spec.min_replicas > TotalReplicas(spec))
    return "minReplicas: must be between 0 and the job's replicas";
  for (const TaskGroup& g : spec.groups) {
    if (g.replicas < 1) return "groups." + g.name + ".replicas: must be >= 1";
    if (g.demand.gpu_milli < 0 || g.demand.gpu_milli > 1000)
      return "groups." + g.name + ".gpuMilli: must be between 1 and 1000 (1000: one whole GPU)";
  }
  const double smallest = GpuEquivalents(
      cluster, spec, spec.min_replicas > 0 ? spec.min_replicas : TotalReplicas(spec));
  if (queue.cap_gpus >= 0 && smallest > queue.cap_gpus + Scheduler::kEps) {
    char text[240];
    std::snprintf(text, sizeof text,
                  "cap: queue %s may hold at most %g GPUs and the job needs %g; ask for fewer "
                  "GPUs or replicas, or raise the queue's cap",
                  queue.name.c_str(), queue.cap_gpus, smallest);
    return text;
  }
  if (!spec.priority_class.empty() && !policy.priority_classes.count(spec.priority_class)) {
    std::string known;
    for (const auto& [name, value] : policy.priority_classes)
      known += (known.empty() ? "" : ", ") + name;
    return "priorityClass: unknown class \"" + spec.priority_class + "\"; the policy defines: " +
           (known.empty() ? "none (add priorityClasses to the policy file)" : known);
  }
  return "";
}

int Scheduler::Submit(const JobSpec& spec, double now, std::string* why) {
  auto q = queue_index_.find(spec.queue);
  if (q == queue_index_.end()) {
    std::string known;
    for (const auto& [name, i] : queue_index_) known += (known.empty() ? "" : ", ") + name;
    *why = "queue: unknown queue \"" + spec.queue + "\"; known queues: " + known;
    return -1;
  }
  *why = WhyRefused(*cluster_, pipeline_->policy(), queues_[q->second].spec, spec);
  if (!why->empty()) return -1;
  JobRecord job;
  job.spec = spec;
  // A share of a whole GPU is the GPU.
  for (TaskGroup& g : job.spec.groups)
    if (g.demand.gpu_milli == 1000) {
      g.demand.gpu_milli = 0;
      g.demand.gpus = 1;
    }
  if (!spec.priority_class.empty())
    job.spec.priority = pipeline_->policy().priority_classes.at(spec.priority_class);
  job.id = next_job_++;
  job.queue = q->second;
  job.submit_time = now;
  job.pending_since = now;
  Queue& queue = queues_[job.queue];
  auto [user, added] =
      queue.user_index.emplace(spec.user, static_cast<int>(queue.user_usage.size()));
  if (added) queue.user_usage.emplace_back();
  job.user = user->second;
  // Remembered classes are bounded; a job beyond them is simply never skipped.
  constexpr size_t kMaxShapeClasses = 1 << 16;
  const std::string key = ShapeClassKey(job.spec);
  auto cls = shape_classes_.find(key);
  if (cls == shape_classes_.end() && shape_classes_.size() < kMaxShapeClasses) {
    cls = shape_classes_.emplace(key, static_cast<int>(shape_classes_.size())).first;
    class_bounded_.push_back(spec.groups.size() == 1 && spec.groups[0].demand.gpus > 0);
  }
  job.shape_class = cls == shape_classes_.end() ? -1 : cls->second;
  job.shape = ShapeSizeOf(job.spec);
  job.never_fits = WhyJobNeverFits(*cluster_, job.spec);
  if (!job.never_fits.empty()) job.reason = job.never_fits;
  queue.demand_gpus += JobGpus(job.spec, TotalReplicas(job.spec));
  Emit(now, job.id, "submitted", "queue " + queue.spec.name);
  JobRecord& stored = jobs_[job.id] = std::move(job);
  AddPending(stored);
  return stored.id;
}

void Scheduler::Release(JobRecord& job) {
  Queue& q = queues_[job.queue];
  const ResourceVector r = Scaled(JobResources(job), -1);
  q.held += r;
  for (const auto& [model, gpus] : ModelGpus(job)) q.held_by_model[model] -= gpus;
  if (job.borrowed) q.borrowed_gpus += r.gpu;
  --q.running;
  if (job.state == JobState::kRunning) Uncommit(job);
  for (const ReplicaPlacement& p : job.placements) {
    auto& on_node = gpus_by_priority_[p.node];
    double& gpus = on_node[job.spec.priority];
    gpus -= job.gpu_equivalents / static_cast<double>(job.placements.size());
    if (gpus < kEps) on_node.erase(job.spec.priority);
  }
  running_.erase(job.id);
  running_by_queue_[job.queue].erase(job.id);
  elastic_running_.erase(job.id);
  if (job.stop_deadline >= 0) deadlines_.erase({job.stop_deadline, job.id});
  job.stop_deadline = -1;
  ++version_;
  for (int id : job.allocations) allocator_->Release(id);
  job.allocations.clear();
  job.placements.clear();
  job.replicas = 0;
  job.gpu_equivalents = 0;
  job.borrowed = false;
}

void Scheduler::ToPending(JobRecord& job, double now, const std::string& why) {
  job.state = JobState::kPending;
  job.pending_since = now;
  job.stop_deadline = -1;
  job.failed_at = UINT64_MAX;
  // How it came back (preempted, lost) is the event's; the reason says why it waits, once a try
  // says, unless a back-off is that reason.
  job.reason = job.next_try > now ? why : "";
  AddPending(job);
  Emit(now, job.id, "pending", why);
}

void Scheduler::Forget(int id) {
  finished_.push_back(id);
  while (finished_.size() > kKeptFinished) {
    auto it = jobs_.find(finished_.front());
    if (it != jobs_.end()) {
      if (!it->second.external_id.empty()) by_external_.erase(it->second.external_id);
      jobs_.erase(it);
    }
    finished_.pop_front();
  }
}

void Scheduler::Stopping(int id, double now, const std::string& why) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  JobRecord& job = it->second;
  if (job.state == JobState::kStopping) {
    // A victim stopped for good: killed at no deadline, and never back to pending (review: its
    // grace period's end brought it back to run again). Its preemptor still waits for its
    // GPUs: Finish wakes it.
    if (job.stop_deadline >= 0) deadlines_.erase({job.stop_deadline, job.id});
    job.stop_deadline = -1;
    job.reason = why;
    Emit(now, id, "stopping", why);
    return;
  }
  if (job.state != JobState::kRunning) return;
  Uncommit(job);
  job.state = JobState::kStopping;
  job.preempted_by = -1;
  job.reason = why;
  job.stop_deadline = -1;
  Emit(now, id, "stopping", why);
}

void Scheduler::Finish(int id, double now, JobEnd end, int exit_code) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state == JobState::kDone) return;
  JobRecord& job = it->second;
  Queue& queue = queues_[job.queue];
  // A victim that ends while stopping frees its preemptor as if it had stopped; the preemptor
  // starts first thing in the next cycle (Finish returns no decisions).
  if (job.state == JobState::kStopping) {
    WakePreemptor(job);
    UncommitWaiting(job);  // a moved job's destination goes with it
    DropReservation(job.id);
  }
  if (job.state == JobState::kRunning || job.state == JobState::kStopping) Release(job);
  if (job.state == JobState::kPending) {
    RemovePending(job);
    DropPreemptor(job);
  }
  queue.demand_gpus -= JobGpus(job.spec, TotalReplicas(job.spec));
  job.state = JobState::kDone;
  job.end = end;
  job.exit_code = exit_code;
  job.end_time = now;
  job.reason = JobEndName(end);
  Emit(now, id, JobEndName(end),
       end == JobEnd::kFailed ? "exit code " + std::to_string(exit_code) : "");
  Forget(id);
}

void Scheduler::StartFailed(int id, double now, const std::string& reason) {
  BackToPending(id, now, "start failed: " + reason + "; retrying with back-off", true);
}

void Scheduler::NodeLost(int id, double now, const std::string& reason) {
  BackToPending(id, now, reason, false);
}

void Scheduler::BackToPending(int id, double now, const std::string& reason, bool back_off) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kRunning) return;
  JobRecord& job = it->second;
  Release(job);
  if (back_off) BackOff(job, now);
  ToPending(job, now, reason);
}

void Scheduler::BackOff(JobRecord& job, double now) const {
  const Policy& p = pipeline_->policy();
  job.backoff = job.backoff == 0 ? p.retry_backoff_s : std::min(p.max_backoff_s, 2 * job.backoff);
  job.next_try = now + job.backoff;
}

bool Scheduler::TryPlace(JobRecord& job, bool guaranteed, int replicas, Allocator& alloc,
                         std::vector<int>* ids, std::vector<ReplicaPlacement>* placements,
                         const std::vector<ReplicaPlacement>* exact, int only_node, int first) {
  if (first == 0) {
    ids->clear();
    placements->clear();
  }
  const size_t kept_ids = ids->size(), kept_placements = placements->size();
  const bool model_capped = !exact && !queues_[job.queue].spec.model_caps.empty();
  const double added = model_capped ? JobGpus(job.spec, replicas) - JobGpus(job.spec, first) : 0;
  auto give_up = [&](const std::string& why) {
    for (size_t i = kept_ids; i < ids->size(); ++i) alloc.Release((*ids)[i]);
    ids->resize(kept_ids);
    placements->resize(kept_placements);
    job.reason = why;
    return false;
  };
  std::vector<ReplicaPlacement> exact_group;
  int skip = first, left = replicas - first;
  for (const TaskGroup& group : job.spec.groups) {
    if (left <= 0) break;
    const int here = std::min(left, group.replicas - skip);
    skip = std::max(0, skip - group.replicas);
    if (here <= 0) continue;
    AllocationRequest req;
    req.replicas = here;
    left -= req.replicas;
    req.demand = group.demand;
    std::string why, capped;
    if (model_capped && GpuEquivalents(*cluster_, group.demand) > 0 &&
        !ModelsUnderCap(job, added, group.demand, &req.demand.models, &capped))
      return give_up("cap: " + capped);
    req.gang_affinity = job.spec.gang_affinity;
    req.vc = job.queue;
    req.opportunistic = !guaranteed;
    // A job that cannot be preempted would keep lent GPUs from the VC that lends them.
    req.lent = !placing_plan_ && job.spec.preemptible;
    req.only_node = only_node;
    PlacementContext ctx;
    ctx.alloc = &alloc;
    ctx.telemetry = &telemetry_;
    ctx.job = &job.spec;
    ctx.group = &group;
    ctx.job_placed = placements;
    ctx.typical_pods = typical_pods_.empty() ? nullptr : &typical_pods_;
    ctx.typical_pods_version = typical_pods_version_;
    ctx.gpus_by_priority = &gpus_by_priority_;
    ctx.reservations = reservations_.size() > 0 ? &reservations_ : nullptr;
    ctx.job_id = job.id;
    ctx.queue = job.queue;
    // A reservation being planned keeps clear of every other one, yielding or not.
    ctx.guaranteed = guaranteed && !planning_reservation_;
    ctx.priority = WholePriority(job, now_);
    pipeline_->SetContext(ctx);
    if (exact) {
      const auto from = exact->begin() + static_cast<long>(placements->size());
      exact_group.assign(from, from + req.replicas);
      req.exact = &exact_group;
    }
    const auto id = alloc.Allocate(req, &why, pipeline_.get(), pipeline_->policy().candidates);
    if (!id) return give_up(capped.empty() ? why : why + "; on the other models (" + capped + ")");
    ids->push_back(*id);
    const Allocation* a = alloc.Find(*id);
    placements->insert(placements->end(), a->replicas.begin(), a->replicas.end());
  }
  return true;
}

void Scheduler::Run(JobRecord& job, bool guaranteed, int replicas, std::vector<int> ids,
                    std::vector<ReplicaPlacement> placements, double now,
                    std::vector<Decision>* out) {
  job.state = JobState::kRunning;
  job.start_time = now;
  job.borrowed = !guaranteed;
  job.allocations = std::move(ids);
  job.placements = std::move(placements);
  job.replicas = replicas;
  job.gpu_equivalents = JobGpus(job.spec, replicas);
  job.backoff = 0;
  job.held_back_at = -1;
  job.reason.clear();
  Account(job, +1);
  running_[job.id] = &job;
  running_by_queue_[job.queue][job.id] = &job;
  if (job.spec.min_replicas > 0) elastic_running_.insert(job.id);
  if (job.borrowed) ++version_;
  RemovePending(job);
  UncommitWaiting(job);  // a start ends any wait (StartAt may start a moved job elsewhere)
  DropReservation(job.id);
  if (guaranteed) DisplaceYieldingPlans(job, job.placements, now);
  job.preempting = false;
  Decision d;
  d.kind = Decision::Kind::kStart;
  d.job = job.id;
  d.placements = job.placements;
  d.gpu_ids = GpuIds(job.placements);
  Emit(now, job.id, "start", job.borrowed ? "borrowed" : "guaranteed");
  out->push_back(std::move(d));
}

bool Scheduler::Start(JobRecord& job, bool guaranteed, double now, std::vector<Decision>* out,
                      int most) {
  if (most < 0) most = TotalReplicas(job.spec);
  std::vector<int> ids;
  std::vector<ReplicaPlacement> placements;
  int placed = -1;  // the size `ids` holds now
  const int replicas = LargestFitting(job.spec.min_replicas, most, [&](int n) {
    for (int id : ids) allocator_->Release(id);
    placed = -1;
    if (!TryPlace(job, guaranteed, n, *allocator_, &ids, &placements)) return false;
    placed = n;
    return true;
  });
  if (replicas < 0) return false;
  if (placed != replicas) {
    for (int id : ids) allocator_->Release(id);
    TryPlace(job, guaranteed, replicas, *allocator_, &ids, &placements);
  }
  Run(job, guaranteed, replicas, std::move(ids), std::move(placements), now, out);
  return true;
}

std::vector<std::string> Scheduler::GpuIds(const std::vector<ReplicaPlacement>& placements) const {
  std::vector<std::string> ids;
  for (const ReplicaPlacement& r : placements)
    for (int g : r.gpus) ids.push_back(cluster_->nodes[r.node].name + "/" + std::to_string(g));
  return ids;
}

double Scheduler::WholePriority(int priority, double submit, double now) const {
  const Policy& p = pipeline_->policy();
  const double hours = std::max(0.0, now - submit) / 3600.0;
  return std::floor(priority + std::min(p.aging_cap, p.aging_per_hour * hours));
}

double Scheduler::WholePriority(const JobRecord& job, double now) const {
  return WholePriority(job.spec.priority, job.submit_time, now);
}

void Scheduler::MarkCrowdedGpus() {
  crowding_known_ = true;
  // Without the filter (a reload may drop it) no GPU is crowded.
  for (int n = 0; n < static_cast<int>(cluster_->nodes.size()); ++n) {
    const Node& node = cluster_->nodes[n];
    for (int g = 0; g < static_cast<int>(node.gpus.size()); ++g) {
      const GpuModel* model = cluster_->FindModel(node.gpus[g].model);
      const double used = n < static_cast<int>(telemetry_.gpus.size()) &&
                                  g < static_cast<int>(telemetry_.gpus[n].size())
                              ? telemetry_.gpus[n][g].fb_used_mib
                              : -1;
      allocator_->SetGpuCrowded(n, g,
                                crowded_ratio_ >= 0 && used >= 0 && model != nullptr &&
                                    model->memory_mib > 0 &&
                                    used > crowded_ratio_ * static_cast<double>(model->memory_mib));
    }
  }
}

std::vector<Decision> Scheduler::Schedule(double now) {
  std::vector<Decision> out;
  now_ = now;
  backing_off_.clear();
  if (!crowding_known_) MarkCrowdedGpus();
  // A reservation keeps away what its owner now outranks: it ages as all do.
  for (const auto& [id, r] : reservations_.all())
    reservations_.SetPriority(id, WholePriority(jobs_.at(id), now));
  // Victims past their grace deadline are killed (once).
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const int id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    jobs_.at(id).stop_deadline = -1;
    Decision d;
    d.kind = Decision::Kind::kKill;
    d.job = id;
    d.reason = "grace period over";
    Emit(now, id, "kill", d.reason);
    out.push_back(std::move(d));
  }
  // Preemptors whose last victim ended instead of stopping go before anyone else, after the
  // jobs moved for them.
  StartStoppedMovers(now, &out);
  std::vector<int> ready;
  ready.swap(ready_preemptors_);
  for (int id : ready) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    JobRecord& j = it->second;
    if (j.state == JobState::kPending && j.waiting_for.empty() && j.preempting)
      StartPreemptor(j, now, &out);
  }
  const std::vector<double> fair = FairShares();
  // A queue whose fair share grew may now reclaim what it could not: its failed jobs are tried
  // again (demand elsewhere changes shares without freeing anything).
  for (size_t q = 0; q < fair.size(); ++q)
    if (q >= last_fair_.size() || fair[q] > last_fair_[q] + kEps) {
      ++version_;
      break;
    }
  last_fair_ = fair;
  failed_shapes_.Clear();
  for (FailedShapes& f : unreservable_) f.Clear();
  // Guarantees first: only jobs that fit their queue's guarantee, placed or reclaiming inside
  // it, from the queues with guarantee room; then everyone, borrowing too.
  for (bool guarantee_pass : {true, false}) {
    not_guaranteed_.Clear();
    std::vector<CycleOrder::QueueView> views;
    for (size_t q = 0; q < queues_.size(); ++q) {
      const Queue& queue = queues_[q];
      const bool sits_out =
          guarantee_pass && queue.committed_guaranteed + kEps >= queue.guarantee_gpus;
      // A queue whose waiting jobs ask for no GPUs reclaims none with them: it ranks by dominant
      // share alone, with the queues below their shares (review: behind them, it starved). Less
      // the rounding: a queue holding its share counts as at it.
      const double fair_gpus =
          queue.pending_gpus > kEps ? fair[q] - kEps : std::numeric_limits<double>::infinity();
      views.push_back({&queue.committed, queue.spec.weight, &queue.user_usage,
                       sits_out ? nullptr : &queue.waiting, fair_gpus});
    }
    // The order takes the jobs whose turn comes to nothing (TryJob would return at once) as
    // offered, without returning them: the jobs behind a failed shape cost a step each, not a
    // call of Next, a lookup and a TryJob.
    auto skip = [&](int, JobRecord* job, int, const ShapeSize&, int, double) {
      return TurnComesToNothing(*job, WholePriority(*job, now), guarantee_pass, now);
    };
    CycleOrder order(
        std::move(views), capacity_,
        [&](int priority, double submit) { return WholePriority(priority, submit, now); }, skip);
    for (int id = order.Next(); id >= 0; id = order.Next()) {
      const auto pending = pending_by_id_.find(id);
      if (pending == pending_by_id_.end()) continue;  // it left pending earlier in the cycle
      JobRecord& job = *pending->second;
      const uint64_t failures = failed_shapes_.changes() + not_guaranteed_.changes();
      const bool started = TryJob(job, WholePriority(job, now), guarantee_pass, fair, now, &out);
      if (started) order.UsageChanged();
      auto fails = [&](int cls, const ShapeSize& size, int priority, double submit) {
        return ShapeFails(job.queue, cls, size, priority, submit, guarantee_pass, fair, now);
      };
      if ((started || failures != failed_shapes_.changes() + not_guaranteed_.changes()) &&
          !order.exhausted(job.queue) && order.AllFail(job.queue, fails))
        order.Exhaust(job.queue, StillWorthTrying(job.queue, now));
    }
  }
  MoveForReservations(fair, now, &out);
  GrowElastic(fair, now, &out);
  return out;
}

// One pending job's turn in a cycle; true when it started or preempted (usage changed).
bool Scheduler::TryJob(JobRecord& job, double priority, bool guarantee_pass,
                       const std::vector<double>& fair, double now, std::vector<Decision>* out) {
  if (job.state != JobState::kPending || job.next_try > now || !job.waiting_for.empty() ||
      !job.never_fits.empty())
    return false;
  // A moved job waits for its destination (StartStoppedMovers).
  if (!job.destination.empty()) return false;
  if (job.failed_at == version_) {
    // Nothing that could help changed since it failed: its shape fails in this cycle too. It
    // may have waited long enough to reserve since (nothing changes in a steady cluster).
    failed_shapes_.Add(job.shape_class, job.shape, priority, version_);
    if (now - job.pending_since >= pipeline_->policy().reserve_after_s &&
        reservations_.starving() < pipeline_->policy().max_reservations &&
        LongestWaitingUnreserved(job.queue) == &job)
      TryReserve(job, now);
    return false;
  }
  // A job with a reservation may use GPUs the failed jobs could not: it is never skipped.
  const Reservations::Reservation* reserved = reservations_.Of(job.id);
  if (uint64_t as_of;
      !reserved && failed_shapes_.Dominated(job.shape_class, job.shape, priority, &as_of)) {
    job.failed_at = as_of;
    TryReserve(job, now);
    return false;
  }
  if (guarantee_pass && !reserved &&
      not_guaranteed_.Dominated(job.shape_class, job.shape, priority))
    return false;
  const double need = JobGpus(job.spec, TotalReplicas(job.spec));
  const bool may_guarantee = MayGuarantee(job, need);
  if (guarantee_pass && !may_guarantee) {
    // Room left in the guarantee only shrinks within a pass, and a larger job needs more of it
    // (an elastic job's minimum says nothing about the full size it asks the guarantee for).
    if (job.spec.min_replicas == 0)
      not_guaranteed_.Add(job.shape_class, job.shape, kAnyPriority, version_);
    return false;
  }
  job.reason.clear();  // this try says why it waits
  std::string cap_refusal;
  // An elastic job may start smaller, as far as its queue's cap leaves room.
  const int most = MostUnderCap(job);
  const bool under_cap =
      !guarantee_pass && (UnderCap(job, need, &cap_refusal) ||
                          (job.spec.min_replicas > 0 && most >= job.spec.min_replicas));
  // A gang that the replica bound rules out is not placed replica by replica only to be
  // undone at its last replica (elastic gangs may still start smaller: always tried).
  const int replicas = TotalReplicas(job.spec);
  const bool whole_gang =
      replicas > 1 && (job.spec.min_replicas == 0 || job.spec.min_replicas == replicas);
  auto worth_trying = [&](bool guaranteed) {
    return !whole_gang ||
           ReplicaBound::MayFitNow(*allocator_, job.spec, guaranteed ? job.queue : -1);
  };
  bool started = false, tried = false;
  if (may_guarantee && worth_trying(true)) {
    tried = true;
    started = Start(job, true, now, out);
  }
  if (!started && under_cap && worth_trying(false)) {
    tried = true;
    started = Start(job, false, now, out, std::min(most, MostInShareBand(job, fair, now)));
  }
  if (started) return true;
  if (tried && pipeline_->refused_by_retryable()) {
    BackOff(job, now);
    job.reason = "refused by the " + pipeline_->retryable_refusal() +
                 " filter (what the GPUs are observed doing); retrying with back-off";
    return false;
  }
  if (!may_guarantee && !under_cap) job.reason = cap_refusal;
  preempt_deferred_ = false;
  if (TryPreempt(job, now, fair, guarantee_pass, out)) return true;
  if (preempt_deferred_) return false;  // tried again in the next pass or cycle
  if (guarantee_pass) {                 // tried again in the next pass
    if (!reserved && job.spec.min_replicas == 0)
      not_guaranteed_.Add(job.shape_class, job.shape, priority, version_);
    return false;
  }
  job.failed_at = version_;
  if (reserved && !reserved->for_preemption) {
    // Every reserved GPU free and still no fit: the plan no longer holds (other reservations
    // interleave with it, hardware changed). Drop it; a new one is planned.
    bool all_free = true;
    for (const auto& [n, g] : reserved->gpus) all_free = all_free && allocator_->gpu_free(n, g);
    if (all_free) {
      DropReservation(job.id);
      ++version_;
    }
    reserved = nullptr;
  }
  if (!reservations_.Of(job.id)) failed_shapes_.Add(job.shape_class, job.shape, priority, version_);
  TryReserve(job, now);
  return false;
}

std::vector<Decision> Scheduler::Stopped(int id, double now) {
  std::vector<Decision> out;
  now_ = now;
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kStopping) return out;
  JobRecord& victim = it->second;
  JobRecord* preemptor = nullptr;
  if (victim.preempted_by >= 0) {
    auto p = jobs_.find(victim.preempted_by);
    if (p != jobs_.end() && p->second.state == JobState::kPending) {
      std::erase(p->second.waiting_for, id);
      if (p->second.waiting_for.empty()) preemptor = &p->second;
    }
    victim.preempted_by = -1;
  }
  Release(victim);
  // A moved job stays counted where it goes until it starts there (StartMoved).
  if (victim.destination.empty()) UncommitWaiting(victim);
  ++victim.preemptions;
  Emit(now, id, "stopped", victim.reason);
  ToPending(victim, now, "stopped: " + victim.reason);
  StartStoppedMovers(now, &out);
  if (preemptor != nullptr) StartPreemptor(*preemptor, now, &out);
  return out;
}

void Scheduler::SetExternalId(int id, const std::string& external_id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  if (!it->second.external_id.empty()) by_external_.erase(it->second.external_id);
  it->second.external_id = external_id;
  if (!external_id.empty()) by_external_[external_id] = id;
}

const JobRecord* Scheduler::FindExternal(const std::string& external_id) const {
  auto it = by_external_.find(external_id);
  return it == by_external_.end() ? nullptr : job(it->second);
}

std::vector<QueueStatus> Scheduler::Queues() const {
  const std::vector<double> fair = FairShares();
  std::vector<QueueStatus> out;
  for (size_t q = 0; q < queues_.size(); ++q) {
    const Queue& queue = queues_[q];
    QueueStatus s;
    s.name = queue.spec.name;
    s.weight = queue.spec.weight;
    s.guarantee_gpus = queue.guarantee_gpus;
    s.fair_share_gpus = fair[q];
    s.usage_gpus = queue.held.gpu;
    s.committed_gpus = queue.committed.gpu;
    s.borrowed_gpus = queue.borrowed_gpus;
    s.pending = static_cast<int>(queue.pending.size());
    // Kept as jobs come and go: a replay asks for it at every event.
    s.pending_gpus = std::max(0.0, queue.pending_gpus);
    s.running = queue.running;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace berth
