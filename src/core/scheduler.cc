#include "core/scheduler.h"

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>

namespace berth {
namespace {

// An upper bound on how many replicas of a job could be placed once some victims are gone: a
// node hosts (its free GPUs + what the victims free there) / the smallest replica's GPUs,
// counting only GPUs the placement may use: a guaranteed one uses its VC's bound cells, and
// the physical pool only as far as its guarantee has cells left to bind. What-if trials copy
// the allocator, so they run only where this bound reaches the job's replicas. Jobs asking for
// shares, MIG slices or no GPU are not bounded.
class ReplicaBound {
 public:
  ReplicaBound(const Allocator& alloc, const JobSpec& spec, int vc) : vc_(vc) {
    if (!Measure(alloc, spec)) return;
    for (int pool : {kPhysical, kOwn}) {
      free_[pool].assign(alloc.cluster().nodes.size(), 0);
      if (pool == kOwn && vc < 0) continue;
      for (size_t n = 0; n < free_[pool].size(); ++n) {
        free_[pool][n] = alloc.FreeGpusOn(static_cast<int>(n), pool == kOwn ? vc : -1);
        slots_[pool] += free_[pool][n] / smallest_;
      }
    }
  }
  // may_fit() of a fresh bound, without building one: stops counting at the first proof, and
  // visits only nodes the placement may use (this runs before every try of a whole gang).
  static bool MayFitNow(const Allocator& alloc, const JobSpec& spec, int vc) {
    ReplicaBound b(vc);
    if (!b.Measure(alloc, spec)) return true;
    if (vc >= 0) b.slots_[kOwn] = alloc.ReplicaSlots(vc, b.smallest_, b.replicas_);
    const int wanted = std::min(b.physical_cap_, b.replicas_ - b.slots_[kOwn]);
    if (wanted > 0) b.slots_[kPhysical] = alloc.ReplicaSlots(-1, b.smallest_, wanted);
    return b.may_fit();
  }
  int free_on(int node) const {
    return smallest_ == 0 ? 0 : free_[kPhysical][node] + free_[kOwn][node];
  }
  int smallest() const { return smallest_; }

  // Counts what the victim holds as free. A released cell of the VC's own may go back to the
  // physical pool; counting it in either is still an upper bound.
  void Free(const JobRecord& victim) {
    if (smallest_ == 0) return;
    const int pool = vc_ >= 0 && !victim.borrowed && victim.queue == vc_ ? kOwn : kPhysical;
    for (const ReplicaPlacement& r : victim.placements) {
      int& free = free_[pool][r.node];
      slots_[pool] -= free / smallest_;
      free += static_cast<int>(r.gpus.size());
      slots_[pool] += free / smallest_;
    }
  }
  bool may_fit() const {
    return smallest_ == 0 || slots_[kOwn] + std::min(slots_[kPhysical], physical_cap_) >= replicas_;
  }
  bool MayFitWithout(const std::vector<JobRecord*>& victims) const {
    ReplicaBound after = *this;
    for (const JobRecord* v : victims) after.Free(*v);
    return after.may_fit();
  }

 private:
  enum { kPhysical = 0, kOwn = 1 };  // the physical pool; the VC's bound cells
  explicit ReplicaBound(int vc) : vc_(vc) {}
  // The smallest replica, the replica count and the physical cap; false when unbounded.
  bool Measure(const Allocator& alloc, const JobSpec& spec) {
    for (const TaskGroup& g : spec.groups) {
      if (g.demand.gpus <= 0) {
        smallest_ = 0;
        return false;
      }
      smallest_ = smallest_ == 0 ? g.demand.gpus : std::min(smallest_, g.demand.gpus);
      replicas_ += g.replicas;
    }
    physical_cap_ = vc_ < 0 ? INT_MAX : alloc.UnboundGuaranteeGpus(vc_) / smallest_;
    return smallest_ > 0;
  }
  int vc_;
  int smallest_ = 0, replicas_ = 0, physical_cap_ = 0;  // smallest_ 0: unbounded
  std::vector<int> free_[2];                            // [pool][node] free GPUs
  int slots_[2] = {0, 0};
};

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
  const CellTree& tree = allocator_->tree();
  for (size_t q = 0; q < queues_.size(); ++q) {
    const VirtualCluster& vc = allocator_->vcs()[q];
    for (size_t i = 0; i < vc.guarantee_types.size(); ++i)
      queues_[q].guarantee_gpus +=
          vc.guarantee_counts[i] * tree.types()[vc.guarantee_types[i]].leaf_count;
  }
  capacity_.gpu = cluster->gpu_count();
  gpus_by_priority_.resize(cluster->nodes.size());
  for (size_t n = 0; n < cluster->nodes.size(); ++n) {
    capacity_.cpu_milli += cluster->nodes[n].cpu_milli;
    capacity_.memory_mib += cluster->nodes[n].memory_mib;
  }
}

std::vector<std::string> Scheduler::SetPolicy(const Policy& policy) {
  std::vector<std::string> errors;
  auto next = PlacementPipeline::Make(policy, &errors);
  if (next) pipeline_ = std::move(next);
  ++version_;
  return errors;
}

const JobRecord* Scheduler::job(int id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

double Scheduler::JobGpus(const JobSpec& spec, int replicas) const {
  double gpus = 0;
  int left = replicas;
  for (const TaskGroup& g : spec.groups) {
    const int n = std::min(left, g.replicas);
    gpus += n * GpuEquivalents(*cluster_, g.demand);
    left -= n;
  }
  return gpus;
}

ResourceVector Scheduler::JobResources(const JobRecord& job) const {
  ResourceVector r;
  r.gpu = job.gpu_equivalents;
  for (const ReplicaPlacement& p : job.placements) {
    r.cpu_milli += p.cpu_milli;
    r.memory_mib += p.memory_mib;
  }
  return r;
}

int Scheduler::Submit(const JobSpec& spec, double now, std::string* why) {
  auto q = queue_index_.find(spec.queue);
  if (q == queue_index_.end()) {
    std::string known;
    for (const auto& [name, i] : queue_index_) known += (known.empty() ? "" : ", ") + name;
    *why = "queue: unknown queue \"" + spec.queue + "\"; known queues: " + known;
    return -1;
  }
  if (spec.groups.empty() || TotalReplicas(spec) < 1) {
    *why = "groups: a job needs at least one task group with replicas >= 1";
    return -1;
  }
  if (spec.min_replicas < 0 || spec.min_replicas > TotalReplicas(spec)) {
    *why = "minReplicas: must be between 0 and the job's replicas";
    return -1;
  }
  for (const TaskGroup& g : spec.groups) {
    if (g.replicas < 1) {
      *why = "groups." + g.name + ".replicas: must be >= 1";
      return -1;
    }
  }
  JobRecord job;
  job.spec = spec;
  if (!spec.priority_class.empty()) {
    const auto& classes = pipeline_->policy().priority_classes;
    auto it = classes.find(spec.priority_class);
    if (it == classes.end()) {
      std::string known;
      for (const auto& [name, value] : classes) known += (known.empty() ? "" : ", ") + name;
      *why = "priorityClass: unknown class \"" + spec.priority_class + "\"; the policy defines: " +
             (known.empty() ? "none (add priorityClasses to the policy file)" : known);
      return -1;
    }
    job.spec.priority = it->second;
  }
  job.id = next_job_++;
  job.queue = q->second;
  job.submit_time = now;
  queues_[job.queue].pending.push_back(job.id);
  jobs_[job.id] = std::move(job);
  return next_job_ - 1;
}

void Scheduler::Account(const JobRecord& job, int sign) {
  Queue& q = queues_[job.queue];
  const ResourceVector r = JobResources(job);
  q.usage.gpu += sign * r.gpu;
  q.usage.cpu_milli += sign * r.cpu_milli;
  q.usage.memory_mib += sign * r.memory_mib;
  (job.borrowed ? q.borrowed_gpus : q.guaranteed_gpus) += sign * r.gpu;
  q.user_usage[job.spec.user] += sign * r.gpu;
  q.running += sign;
  for (const ReplicaPlacement& p : job.placements) {
    auto& on_node = gpus_by_priority_[p.node];
    double& gpus = on_node[job.spec.priority];
    gpus += sign * job.gpu_equivalents / static_cast<double>(job.placements.size());
    if (gpus < 1e-9) on_node.erase(job.spec.priority);
  }
}

void Scheduler::Release(JobRecord& job) {
  Account(job, -1);
  running_.erase(job.id);
  ++version_;
  for (int id : job.allocations) allocator_->Release(id);
  job.allocations.clear();
  job.placements.clear();
  job.replicas = 0;
  job.gpu_equivalents = 0;
}

// A victim has stopped (or ended while stopping): its allocations go to its preemptor, which
// still waits, so that nobody else takes them first. Returns the preemptor when this was its
// last victim, else null.
JobRecord* Scheduler::HandOver(JobRecord& victim) {
  auto it = jobs_.find(victim.preempted_by);
  victim.preempted_by = -1;
  if (it == jobs_.end() || it->second.state != JobState::kPending) return nullptr;
  JobRecord& p = it->second;
  p.held.insert(p.held.end(), victim.allocations.begin(), victim.allocations.end());
  victim.allocations.clear();  // Release(victim) then frees nothing in the allocator
  std::erase(p.waiting_for, victim.id);
  return p.waiting_for.empty() ? &p : nullptr;
}

void Scheduler::ReleaseHeld(JobRecord& job) {
  if (job.held.empty()) return;
  for (int id : job.held) allocator_->Release(id);
  job.held.clear();
  ++version_;
}

// The last victim is gone: the preemptor takes the freed cells before anyone else can.
bool Scheduler::StartPreemptor(JobRecord& p, double now, std::vector<Decision>* out) {
  ReleaseHeld(p);
  return Start(p, p.reserved_guaranteed, now, out);
}

void Scheduler::Finish(int id, double now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state == JobState::kDone) return;
  JobRecord& job = it->second;
  // A victim that ends while stopping frees its preemptor as if it had stopped; the preemptor
  // starts first thing in the next cycle (Finish returns no decisions).
  if (job.state == JobState::kStopping && job.preempted_by >= 0) HandOver(job);
  if (job.state == JobState::kRunning || job.state == JobState::kStopping) Release(job);
  if (job.state == JobState::kPending) {
    auto& pending = queues_[job.queue].pending;
    pending.erase(std::remove(pending.begin(), pending.end(), id), pending.end());
  }
  // A preemptor that goes away frees its victims from the reservation.
  for (int v : job.waiting_for)
    if (jobs_.count(v)) jobs_[v].preempted_by = -1;
  job.waiting_for.clear();
  ReleaseHeld(job);
  job.state = JobState::kDone;
  job.end_time = now;
}

bool Scheduler::TryPlace(JobRecord& job, bool guaranteed, int replicas, Allocator& alloc,
                         std::vector<int>* ids, std::vector<ReplicaPlacement>* placements) {
  ids->clear();
  placements->clear();
  int left = replicas;
  for (const TaskGroup& group : job.spec.groups) {
    if (left == 0) break;
    AllocationRequest req;
    req.replicas = std::min(left, group.replicas);
    left -= req.replicas;
    req.demand = group.demand;
    req.gang_affinity = job.spec.gang_affinity;
    req.vc = job.queue;
    req.opportunistic = !guaranteed;
    PlacementContext ctx;
    ctx.alloc = &alloc;
    ctx.telemetry = &telemetry_;
    ctx.job = &job.spec;
    ctx.group = &group;
    ctx.job_placed = placements;
    ctx.typical_pods = typical_pods_.empty() ? nullptr : &typical_pods_;
    ctx.gpus_by_priority = &gpus_by_priority_;
    pipeline_->SetContext(ctx);
    std::string why;
    const auto id = alloc.Allocate(req, &why, pipeline_.get(), pipeline_->policy().candidates);
    if (!id) {
      for (int done : *ids) alloc.Release(done);
      ids->clear();
      placements->clear();
      job.reason = why;
      return false;
    }
    ids->push_back(*id);
    const Allocation* a = alloc.Find(*id);
    placements->insert(placements->end(), a->replicas.begin(), a->replicas.end());
  }
  return true;
}

bool Scheduler::Start(JobRecord& job, bool guaranteed, double now, std::vector<Decision>* out) {
  const int total = TotalReplicas(job.spec);
  std::vector<int> counts = {total};
  if (job.spec.min_replicas > 0 && job.spec.min_replicas < total)
    counts.push_back(job.spec.min_replicas);
  for (int replicas : counts) {
    std::vector<int> ids;
    std::vector<ReplicaPlacement> placements;
    if (!TryPlace(job, guaranteed, replicas, *allocator_, &ids, &placements)) continue;
    job.state = JobState::kRunning;
    job.start_time = now;
    job.borrowed = !guaranteed;
    job.allocations = std::move(ids);
    job.placements = std::move(placements);
    job.replicas = replicas;
    job.gpu_equivalents = JobGpus(job.spec, replicas);
    job.backoff = 0;
    job.reason.clear();
    Account(job, +1);
    running_[job.id] = &job;
    if (job.borrowed) ++version_;
    auto& pending = queues_[job.queue].pending;
    pending.erase(std::remove(pending.begin(), pending.end(), job.id), pending.end());
    Decision d;
    d.kind = Decision::Kind::kStart;
    d.job = job.id;
    d.placements = job.placements;
    out->push_back(std::move(d));
    return true;
  }
  return false;
}

std::vector<double> Scheduler::FairShares() const {
  std::vector<FairClaim> claims;
  for (const Queue& q : queues_) {
    double pending = 0;
    for (int id : q.pending)
      pending += JobGpus(jobs_.at(id).spec, TotalReplicas(jobs_.at(id).spec));
    FairClaim c;
    c.weight = q.spec.weight;
    c.guarantee = q.guarantee_gpus;
    c.demand = q.usage.gpu + pending;
    if (q.spec.cap_gpus >= 0) c.cap = q.spec.cap_gpus;
    claims.push_back(c);
  }
  return WaterFill(capacity_.gpu, claims);
}

double Scheduler::EffectivePriority(const JobRecord& job, double now) const {
  const Policy& p = pipeline_->policy();
  const double hours = std::max(0.0, now - job.submit_time) / 3600.0;
  return job.spec.priority + std::min(p.aging_cap, p.aging_per_hour * hours);
}

std::vector<Decision> Scheduler::Schedule(double now) {
  std::vector<Decision> out;
  // Preemptors whose last victim ended instead of stopping go before anyone else.
  for (Queue& q : queues_) {
    const std::vector<int> pending = q.pending;  // Start edits the list
    for (int id : pending) {
      JobRecord& j = jobs_.at(id);
      if (j.waiting_for.empty() && !j.held.empty()) StartPreemptor(j, now, &out);
    }
  }
  const std::vector<double> fair = FairShares();
  // Each queue's pending jobs in order: priority with aging, the user's share, submit time.
  std::vector<std::vector<int>> order(queues_.size());
  for (size_t q = 0; q < queues_.size(); ++q) {
    order[q] = queues_[q].pending;
    std::vector<std::pair<std::tuple<double, double, double, int>, int>> keyed;
    for (int id : order[q]) {
      const JobRecord& j = jobs_.at(id);
      auto user = queues_[q].user_usage.find(j.spec.user);
      keyed.push_back(
          {{-EffectivePriority(j, now), user == queues_[q].user_usage.end() ? 0.0 : user->second,
            j.submit_time, id},
           id});
    }
    std::sort(keyed.begin(), keyed.end());
    for (size_t i = 0; i < keyed.size(); ++i) order[q][i] = keyed[i].second;
  }
  std::vector<size_t> next(queues_.size(), 0);
  while (true) {
    // The queue with the smallest weighted dominant share that still has jobs to try.
    int pick = -1;
    double pick_share = 0;
    for (size_t q = 0; q < queues_.size(); ++q) {
      if (next[q] >= order[q].size()) continue;
      const double share = DominantShare(queues_[q].usage, capacity_) / queues_[q].spec.weight;
      if (pick < 0 || share < pick_share) pick = static_cast<int>(q), pick_share = share;
    }
    if (pick < 0) break;
    Queue& queue = queues_[pick];
    JobRecord& job = jobs_.at(order[pick][next[pick]++]);
    if (job.state != JobState::kPending || job.next_try > now || !job.waiting_for.empty() ||
        job.failed_at == version_)
      continue;
    const double need = JobGpus(job.spec, TotalReplicas(job.spec));
    const bool may_guarantee =
        job.spec.priority >= 0 && queue.guaranteed_gpus + need <= queue.guarantee_gpus + 1e-9;
    const bool under_cap = queue.spec.cap_gpus < 0 || queue.usage.gpu + need <= queue.spec.cap_gpus;
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
      started = Start(job, true, now, &out);
    }
    if (!started && under_cap && worth_trying(false)) {
      tried = true;
      started = Start(job, false, now, &out);
    }
    if (started) continue;
    if (tried && pipeline_->refused_by_retryable()) {
      const Policy& p = pipeline_->policy();
      job.backoff =
          job.backoff == 0 ? p.retry_backoff_s : std::min(p.max_backoff_s, 2 * job.backoff);
      job.next_try = now + job.backoff;
      job.reason = "refused by a telemetry filter; retrying with back-off";
      continue;
    }
    if (!TryPreempt(job, now, fair, &out)) job.failed_at = version_;
  }
  return out;
}

bool Scheduler::TryPreempt(JobRecord& job, double now, const std::vector<double>& fair,
                           std::vector<Decision>* out) {
  Queue& queue = queues_[job.queue];
  const Policy& policy = pipeline_->policy();
  const double need = JobGpus(job.spec, TotalReplicas(job.spec));
  const bool within_guarantee =
      job.spec.priority >= 0 && queue.guaranteed_gpus + need <= queue.guarantee_gpus + 1e-9;
  const bool below_fair_share = queue.usage.gpu + need <= fair[job.queue] + 1e-9;

  using Victims = std::vector<JobRecord*>;
  struct Plan {
    Victims victims;
    bool guaranteed;
  };
  std::vector<Plan> plans;
  Victims reclaim, fair_reclaim, lower;
  for (const auto& [id, v] : running_) {
    if (v->state != JobState::kRunning || !v->spec.preemptible || v->preempted_by >= 0) continue;
    if (v->queue != job.queue && v->borrowed) {
      // (a) Reclaim the guarantee from borrowers; (a') restore the fair share from queues that
      // stay above theirs by the hysteresis margin after losing the victim.
      if (within_guarantee) reclaim.push_back(v);
      const Queue& other = queues_[v->queue];
      if (below_fair_share &&
          other.usage.gpu - v->gpu_equivalents >= fair[v->queue] * (1 + policy.reclaim_hysteresis))
        fair_reclaim.push_back(v);
    }
    // (b) Strictly lower priority inside the queue: equal priority never preempts.
    if (v->queue == job.queue && v->spec.priority < job.spec.priority) lower.push_back(v);
  }
  if (!reclaim.empty()) plans.push_back({reclaim, true});
  if (!fair_reclaim.empty()) plans.push_back({fair_reclaim, false});
  if (!lower.empty()) {
    // Inside the guarantee when the victims' guaranteed GPUs make room there, else borrowing.
    if (job.spec.priority >= 0 && queue.guarantee_gpus > 0) plans.push_back({lower, true});
    plans.push_back({lower, false});
  }
  // Whether the queue may hold the preemptor once `victims` are gone, as Schedule asks of a
  // start: inside its guarantee for a guaranteed placement, under its cap for a borrowed one.
  auto allowed = [&](const Plan& plan, const Victims& victims) {
    double own = 0, own_guaranteed = 0;
    for (const JobRecord* v : victims) {
      if (v->queue != job.queue) continue;
      own += v->gpu_equivalents;
      if (!v->borrowed) own_guaranteed += v->gpu_equivalents;
    }
    if (plan.guaranteed)
      return job.spec.priority >= 0 &&
             queue.guaranteed_gpus - own_guaranteed + need <= queue.guarantee_gpus + 1e-9;
    return queue.spec.cap_gpus < 0 || queue.usage.gpu - own + need <= queue.spec.cap_gpus + 1e-9;
  };
  auto fits_on = [&](Allocator& trial, const Plan& plan, std::vector<ReplicaPlacement>* where) {
    std::vector<int> ids;
    return TryPlace(job, plan.guaranteed, TotalReplicas(job.spec), trial, &ids, where);
  };
  auto fits_without = [&](const Plan& plan, const Victims& victims) {
    if (!allowed(plan, victims)) return false;
    Allocator trial = *allocator_;
    for (const JobRecord* v : victims)
      for (int a : v->allocations) trial.Release(a);
    std::vector<ReplicaPlacement> where;
    return fits_on(trial, plan, &where);
  };

  // GPU-time each candidate would lose: the cost a victim set minimizes after its size.
  std::map<const JobRecord*, double> lost;
  for (const Victims* list : {&reclaim, &fair_reclaim, &lower})
    for (const JobRecord* v : *list)
      lost[v] = v->gpu_equivalents * std::max(0.0, now - v->start_time);
  auto cheaper = [&](const JobRecord* x, const JobRecord* y) {
    if (lost[x] != lost[y]) return lost[x] < lost[y];
    if (x->spec.priority != y->spec.priority) return x->spec.priority < y->spec.priority;
    return x->id < y->id;
  };

  for (Plan& plan : plans) {
    if (!allowed(plan, plan.victims)) continue;  // not even with every victim gone
    const ReplicaBound bound(*allocator_, job.spec, plan.guaranteed ? job.queue : -1);
    if (!bound.MayFitWithout(plan.victims)) continue;
    // Victims grouped by node, so that a growing set empties nodes one at a time instead of
    // nibbling at every node: first the nodes that free a replica's GPUs with the fewest
    // victims, then the least GPU-time lost; inside a node, the cheapest victims first.
    std::map<int, Victims> on_node;  // a victim counts on the node of its first replica
    for (JobRecord* v : plan.victims) on_node[v->placements.front().node].push_back(v);
    std::vector<std::tuple<size_t, double, int>> nodes;  // (victims needed, lost, node)
    for (auto& [node, victims] : on_node) {
      std::sort(victims.begin(), victims.end(), cheaper);
      int free = bound.free_on(node);
      size_t needed = 0;
      double cost = 0;
      while (needed < victims.size() && free < bound.smallest()) {
        for (const ReplicaPlacement& r : victims[needed]->placements)
          if (r.node == node) free += static_cast<int>(r.gpus.size());
        cost += lost[victims[needed++]];
      }
      if (free < bound.smallest()) needed = plan.victims.size() + 1;  // cannot host a replica
      nodes.push_back({needed, cost, node});
    }
    std::sort(nodes.begin(), nodes.end());
    plan.victims.clear();
    for (const auto& [needed, cost, node] : nodes)
      plan.victims.insert(plan.victims.end(), on_node[node].begin(), on_node[node].end());

    // Grow the victim set until the preemptor fits on a what-if copy...
    Allocator trial = *allocator_;
    Victims chosen;
    std::vector<ReplicaPlacement> where;
    ReplicaBound growing = bound;
    bool fits = false;
    for (JobRecord* v : plan.victims) {
      for (int a : v->allocations) trial.Release(a);
      chosen.push_back(v);
      growing.Free(*v);
      if (growing.may_fit() && allowed(plan, chosen) && fits_on(trial, plan, &where)) {
        fits = true;
        break;
      }
    }
    if (!fits) continue;
    // ...then drop the victims the preemptor does not need (fewest victims): first, at once,
    // those with nothing on the nodes the trial placed it on; then one by one.
    std::set<int> used_nodes;
    for (const ReplicaPlacement& r : where) used_nodes.insert(r.node);
    Victims touching;
    for (JobRecord* v : chosen) {
      bool touches = false;
      for (const ReplicaPlacement& r : v->placements) touches |= used_nodes.count(r.node) > 0;
      if (touches) touching.push_back(v);
    }
    if (touching.size() < chosen.size() && fits_without(plan, touching)) chosen = touching;
    for (size_t i = chosen.size(); i-- > 1;) {
      Victims without = chosen;
      without.erase(without.begin() + static_cast<long>(i) - 1);
      if (bound.MayFitWithout(without) && fits_without(plan, without)) chosen = without;
    }
    job.waiting_for.clear();
    for (JobRecord* victim : chosen) {
      victim->state = JobState::kStopping;
      victim->preempted_by = job.id;
      job.waiting_for.push_back(victim->id);
      Decision d;
      d.kind = Decision::Kind::kPreempt;
      d.job = victim->id;
      d.preemptor = job.id;
      d.grace_period_s = victim->spec.grace_period_s;
      out->push_back(std::move(d));
    }
    job.reserved_guaranteed = plan.guaranteed;
    job.reason = "waiting for " + std::to_string(chosen.size()) + " preempted job(s) to stop";
    return true;
  }
  if (job.reason.empty()) job.reason = "no capacity fits the job";
  return false;
}

std::vector<Decision> Scheduler::Stopped(int id, double now) {
  std::vector<Decision> out;
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kStopping) return out;
  JobRecord& victim = it->second;
  JobRecord* preemptor = victim.preempted_by >= 0 ? HandOver(victim) : nullptr;
  Release(victim);
  victim.state = JobState::kPending;
  victim.borrowed = false;
  ++victim.preemptions;
  queues_[victim.queue].pending.push_back(id);
  if (preemptor != nullptr) StartPreemptor(*preemptor, now, &out);
  return out;
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
    s.usage_gpus = queue.usage.gpu;
    s.borrowed_gpus = queue.borrowed_gpus;
    s.pending = static_cast<int>(queue.pending.size());
    for (int id : queue.pending) {
      const JobRecord& j = jobs_.at(id);
      s.pending_gpus += JobGpus(j.spec, TotalReplicas(j.spec));
    }
    s.running = queue.running;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace berth
