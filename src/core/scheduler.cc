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

constexpr double kEps = 1e-9;
constexpr double kAnyPriority = std::numeric_limits<double>::infinity();

ResourceVector& operator+=(ResourceVector& a, const ResourceVector& b) {
  a.gpu += b.gpu;
  a.cpu_milli += b.cpu_milli;
  a.memory_mib += b.memory_mib;
  return a;
}
ResourceVector Scaled(const ResourceVector& r, double k) {
  return {r.gpu * k, r.cpu_milli * k, r.memory_mib * k};
}

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

void Scheduler::CountGuarantees() {
  const CellTree& tree = allocator_->tree();
  for (size_t q = 0; q < queues_.size(); ++q) {
    queues_[q].guarantee_gpus = 0;
    const VirtualCluster& vc = allocator_->vcs()[q];
    for (size_t i = 0; i < vc.guarantee_types.size(); ++i)
      queues_[q].guarantee_gpus +=
          vc.guarantee_counts[i] * tree.types()[vc.guarantee_types[i]].leaf_count;
  }
}

void Scheduler::CountCapacity() {
  capacity_ = {};
  capacity_.gpu = cluster_->gpu_count();
  for (const Node& node : cluster_->nodes) {
    capacity_.cpu_milli += node.cpu_milli;
    capacity_.memory_mib += node.memory_mib;
  }
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

// Every running job placed again, exactly where it runs, on a fresh allocator for `cluster`
// and the queues `specs` (guaranteed work first, since it binds the cells); then health carried
// over by node name. `node_map`: old node index -> new (-1: gone).
std::string Scheduler::Rebuild(const Cluster* cluster, const std::vector<QueueSpec>& specs,
                               const std::map<std::string, int>& index,
                               const std::vector<int>& node_map, bool keep_all, Rebuilt* out) {
  std::vector<VirtualClusterSpec> vcs;
  for (const QueueSpec& q : specs) vcs.push_back({q.name, q.guarantees});
  out->allocator = std::make_unique<Allocator>(cluster, vcs);
  if (!out->allocator->error().empty()) return out->allocator->error();
  std::vector<JobRecord*> holders;
  for (const auto& [id, j] : running_) holders.push_back(j);
  std::stable_sort(holders.begin(), holders.end(), [](const JobRecord* a, const JobRecord* b) {
    return !a->borrowed && b->borrowed;
  });
  for (JobRecord* j : holders) {
    JobRecord moved = *j;
    moved.queue = index.at(j->spec.queue);
    std::vector<ReplicaPlacement> where = j->placements;
    bool on_cluster = true;
    for (ReplicaPlacement& r : where) {
      r.node = node_map[r.node];
      on_cluster = on_cluster && r.node >= 0;
    }
    std::vector<ReplicaPlacement>& placed = out->placements[j->id];
    if (on_cluster && TryPlace(moved, !j->borrowed, j->replicas, *out->allocator,
                               &out->allocations[j->id], &placed, &where))
      continue;
    if (keep_all)
      return "queues." + j->spec.queue + ": job " + std::to_string(j->id) + " would no longer " +
             (j->borrowed ? "fit where it runs" : "fit inside the guarantee") + " (" +
             moved.reason + ")";
    out->lost.push_back(j->id);
    out->placements.erase(j->id);
    out->allocations.erase(j->id);
  }
  for (size_t old = 0; old < node_map.size(); ++old) {
    const int n = node_map[old];
    if (n < 0) continue;
    const int o = static_cast<int>(old);
    out->allocator->SetNodeCordoned(n, allocator_->node_cordoned(o));
    const size_t gpus = std::min(cluster->nodes[n].gpus.size(), cluster_->nodes[o].gpus.size());
    for (size_t g = 0; g < gpus; ++g)
      if (allocator_->gpu_bad(o, static_cast<int>(g)))
        out->allocator->SetGpuBad(n, static_cast<int>(g), true);
  }
  return "";
}

void Scheduler::Install(Rebuilt& rebuilt, const std::vector<int>& node_map) {
  for (auto& [id, j] : running_) {
    j->allocations = std::move(rebuilt.allocations.at(id));
    j->placements = std::move(rebuilt.placements.at(id));
  }
  // Preemptors' exact plans name nodes by index, which may have moved: they are placed afresh.
  // The fresh allocator holds no promises either.
  for (auto& [id, j] : jobs_) {
    j.planned.clear();
    j.promised_cells.clear();
  }
  // Reservations follow their GPUs; one that touches a node that is gone is dropped whole.
  Reservations moved;
  for (const auto& [job, r] : reservations_.all()) {
    Reservations::Reservation kind = r;
    kind.gpus.clear();
    kind.queue = jobs_.at(job).queue;  // queues may have moved
    bool whole = true;
    const Cluster& next = rebuilt.allocator->cluster();
    for (const auto& [n, g] : r.gpus) {
      whole =
          whole && node_map[n] >= 0 && g < static_cast<int>(next.nodes[node_map[n]].gpus.size());
      if (whole) kind.gpus.push_back({node_map[n], g});
    }
    if (whole) moved.Reserve(job, kind.gpus, kind, rebuilt.allocator->cluster().nodes.size());
  }
  reservations_ = std::move(moved);
  allocator_ = std::move(rebuilt.allocator);
  MarkReservedNodes();
  crowding_known_ = false;
  ++version_;
}

std::string Scheduler::SetQueues(const std::vector<QueueSpec>& specs) {
  std::map<std::string, int> index;
  for (const QueueSpec& q : specs) {
    if (!index.emplace(q.name, static_cast<int>(index.size())).second)
      return "queues: \"" + q.name + "\" is declared twice";
    if (!(q.weight > 0)) return "queues." + q.name + ".weight: must be > 0";
  }
  for (const Queue& q : queues_)
    if (!index.count(q.spec.name) && (q.running > 0 || !q.pending.empty()))
      return "queues." + q.spec.name + ": still has jobs; keep it until they end";
  std::vector<int> same_nodes(cluster_->nodes.size());
  for (size_t n = 0; n < same_nodes.size(); ++n) same_nodes[n] = static_cast<int>(n);
  Rebuilt rebuilt;
  const std::string why = Rebuild(cluster_, specs, index, same_nodes, true, &rebuilt);
  if (!why.empty()) return why;
  // Accepted: the queues move to their new indices with their accounting.
  std::vector<Queue> queues(specs.size());
  for (Queue& q : queues_) {
    auto it = index.find(q.spec.name);
    if (it != index.end()) queues[it->second] = std::move(q);
  }
  for (size_t q = 0; q < specs.size(); ++q) queues[q].spec = specs[q];
  for (auto& [id, j] : jobs_)
    if (j.state != JobState::kDone) j.queue = index.at(j.spec.queue);
  queues_ = std::move(queues);
  running_by_queue_.assign(queues_.size(), {});
  for (const auto& [id, j] : running_) running_by_queue_[j->queue][id] = j;
  queue_index_ = std::move(index);
  Install(rebuilt, same_nodes);
  CountGuarantees();
  return "";
}

std::string Scheduler::SetCluster(const Cluster* cluster, double now) {
  now_ = now;
  const std::string invalid = ValidateCluster(*cluster);
  if (!invalid.empty()) return "cluster: " + invalid;
  std::vector<int> node_map(cluster_->nodes.size());
  for (size_t n = 0; n < node_map.size(); ++n)
    node_map[n] = cluster->FindNode(cluster_->nodes[n].name);
  std::vector<QueueSpec> specs;
  for (const Queue& q : queues_) specs.push_back(q.spec);
  Rebuilt rebuilt;
  const std::string why = Rebuild(cluster, specs, queue_index_, node_map, false, &rebuilt);
  if (!why.empty()) return why;
  // Jobs on nodes that are gone (or on GPUs a node no longer has) go back to pending; a victim
  // among them frees its preemptor as if it had stopped.
  for (int id : rebuilt.lost) {
    JobRecord& job = jobs_.at(id);
    std::string node = "?";
    for (const ReplicaPlacement& r : job.placements)
      if (node_map[r.node] < 0) node = cluster_->nodes[r.node].name;
    if (job.state == JobState::kStopping) WakePreemptor(job);
    Release(job);
    UncommitWaiting(job);  // a moved job's, while it stopped (review)
    Emit(now, id, "lost", "node " + node + " was removed or changed under it");
    ToPending(job, now, "lost: node " + node + " was removed or changed under it");
  }
  // Per-node state follows its node by name.
  std::vector<std::map<int, double>> by_priority(cluster->nodes.size());
  Telemetry telemetry;
  for (size_t old = 0; old < node_map.size(); ++old) {
    const int n = node_map[old];
    if (n < 0) continue;
    by_priority[n] = std::move(gpus_by_priority_[old]);
    const auto carry = [&](auto& from, auto& to) {
      if (old >= from.size()) return;
      to.resize(cluster->nodes.size());
      to[n] = std::move(from[old]);
    };
    carry(telemetry_.gpus, telemetry.gpus);
    carry(telemetry_.node_images, telemetry.node_images);
    carry(telemetry_.node_layers, telemetry.node_layers);
  }
  telemetry.image_layers = std::move(telemetry_.image_layers);
  gpus_by_priority_ = std::move(by_priority);
  telemetry_ = std::move(telemetry);
  Install(rebuilt, node_map);
  cluster_ = cluster;
  for (Queue& q : queues_) q.held_by_model.clear();
  for (const auto& [id, j] : running_)
    for (const auto& [model, gpus] : ModelGpus(*j)) queues_[j->queue].held_by_model[model] += gpus;
  // What no node could hold may fit the new nodes, and the other way round.
  for (auto& [id, j] : jobs_) {
    if (j.state != JobState::kPending) continue;
    WaitingJobs& waiting = queues_[j.queue].waiting;
    waiting.Remove(WaitingOf(j));
    j.never_fits = WhyJobNeverFits(*cluster_, j.spec);
    if (!j.never_fits.empty()) j.reason = j.never_fits;
    if (j.never_fits.empty()) waiting.Add(WaitingOf(j));
  }
  CountCapacity();
  CountGuarantees();
  Emit(now, -1, "cluster", std::to_string(cluster->nodes.size()) + " nodes");
  return "";
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

double Scheduler::JobGpus(const JobSpec& spec, int replicas) const {
  return GpuEquivalents(*cluster_, spec, replicas);
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
  if (queue.cap_gpus >= 0 && smallest > queue.cap_gpus + kEps) {
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

std::map<std::string, double> Scheduler::ModelGpus(const JobRecord& job) const {
  return ModelGpus(job.spec, job.placements);
}

std::map<std::string, double> Scheduler::ModelGpus(
    const JobSpec& spec, const std::vector<ReplicaPlacement>& placements) const {
  std::map<std::string, double> by_model;
  size_t next = 0;
  for (const TaskGroup& g : spec.groups) {
    const double each = GpuEquivalents(*cluster_, g.demand);
    for (int i = 0; i < g.replicas && next < placements.size(); ++i, ++next) {
      const ReplicaPlacement& r = placements[next];
      if (!r.gpus.empty() && each > 0)
        by_model[cluster_->nodes[r.node].gpus[r.gpus[0]].model] += each;
    }
  }
  return by_model;
}

bool Scheduler::ModelsUnderCap(const JobRecord& job, double gpus, const Demand& demand,
                               std::vector<std::string>* models, std::string* capped) const {
  const Queue& q = queues_[job.queue];
  models->clear();
  std::string full;
  for (const GpuModel& m : cluster_->models) {
    if (!demand.models.empty() &&
        std::find(demand.models.begin(), demand.models.end(), m.name) == demand.models.end())
      continue;
    auto cap = q.spec.model_caps.find(m.name);
    auto held = q.held_by_model.find(m.name);
    auto credit = model_credit_.find(m.name);
    const double used = (held == q.held_by_model.end() ? 0 : held->second) -
                        (credit == model_credit_.end() ? 0 : credit->second);
    if (cap == q.spec.model_caps.end() || used + gpus <= cap->second + kEps) {
      models->push_back(m.name);
    } else {
      char text[160];
      std::snprintf(text, sizeof text, "%s%s holds %g of %g", full.empty() ? "" : ", ",
                    m.name.c_str(), used, cap->second);
      full += text;
    }
  }
  if (full.empty()) return true;
  char need[32];
  std::snprintf(need, sizeof need, "%g", gpus);
  *capped = "queue " + q.spec.name + "'s modelCaps: " + full + ", and the job needs " + need;
  return !models->empty();
}

// Held counts running and stopping jobs; committed counts running jobs that are not stopping.
void Scheduler::Account(const JobRecord& job, int sign) {
  Queue& q = queues_[job.queue];
  const ResourceVector r = Scaled(JobResources(job), sign);
  q.held += r;
  for (const auto& [model, gpus] : ModelGpus(job)) q.held_by_model[model] += sign * gpus;
  q.committed += r;
  if (!job.borrowed) q.committed_guaranteed += r.gpu;
  q.user_usage[job.user] += r;
  CountPriority(q, job.spec.priority, sign);
  if (job.borrowed) q.borrowed_gpus += r.gpu;
  q.running += sign;
  for (const ReplicaPlacement& p : job.placements) {
    auto& on_node = gpus_by_priority_[p.node];
    double& gpus = on_node[job.spec.priority];
    gpus += sign * job.gpu_equivalents / static_cast<double>(job.placements.size());
    if (gpus < kEps) on_node.erase(job.spec.priority);
  }
}

void Scheduler::Uncommit(const JobRecord& job) {
  Queue& q = queues_[job.queue];
  const ResourceVector r = Scaled(JobResources(job), -1);
  q.committed += r;
  if (!job.borrowed) q.committed_guaranteed += r.gpu;
  q.user_usage[job.user] += r;
  CountPriority(q, job.spec.priority, -1);
}

void Scheduler::CountPriority(Queue& q, int priority, int sign) {
  int& n = q.committed_by_priority[priority];
  n += sign;
  if (n == 0) q.committed_by_priority.erase(priority);
}

void Scheduler::CommitWaiting(JobRecord& p, double gpus, bool guaranteed,
                              const std::vector<int>& binds) {
  Queue& q = queues_[p.queue];
  // The guarantee cells its plan binds stay unbound for it: its queue's other guaranteed work
  // binding them first would break the plan after its victims had stopped.
  // (A cell bound to the queue now, which the plan's trial unbound and bound again, needs none.)
  p.promised_cells.clear();
  for (int cell : binds)
    if (allocator_->buddy().pool(cell) != p.queue + 1) p.promised_cells.push_back(cell);
  allocator_->Promise(p.queue, p.promised_cells, +1);
  p.committed_gpus = gpus;
  p.reserved_guaranteed = guaranteed;
  q.waiting_gpus += gpus;
  q.committed.gpu += gpus;
  if (guaranteed) q.committed_guaranteed += gpus;
}

void Scheduler::UncommitWaiting(JobRecord& p) {
  Queue& q = queues_[p.queue];
  allocator_->Promise(p.queue, p.promised_cells, -1);
  p.promised_cells.clear();
  q.committed.gpu -= p.committed_gpus;
  q.waiting_gpus -= p.committed_gpus;
  if (p.reserved_guaranteed) q.committed_guaranteed -= p.committed_gpus;
  p.committed_gpus = 0;
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

WaitingJobs::Job Scheduler::WaitingOf(JobRecord& job) {
  return {job.id, job.user, job.spec.priority, job.submit_time, job.shape_class, job.shape, &job};
}

WaitingJobs::Job Scheduler::WaitingOf(const JobRecord& job) {
  return {job.id, job.user, job.spec.priority, job.submit_time, job.shape_class, job.shape};
}

void Scheduler::AddPending(JobRecord& job) {
  Queue& queue = queues_[job.queue];
  job.pending_at = queue.pending.insert(queue.pending.end(), &job);
  queue.pending_gpus += JobGpus(job.spec, TotalReplicas(job.spec));
  pending_by_id_[job.id] = &job;
  if (job.never_fits.empty()) queue.waiting.Add(WaitingOf(job));
}

void Scheduler::RemovePending(JobRecord& job) {
  Queue& queue = queues_[job.queue];
  queue.pending.erase(job.pending_at);
  queue.pending_gpus -= JobGpus(job.spec, TotalReplicas(job.spec));
  if (queue.pending.empty()) queue.pending_gpus = 0;  // no rounding left behind
  pending_by_id_.erase(job.id);
  queue.waiting.Remove(WaitingOf(job));
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

void Scheduler::WakePreemptor(JobRecord& victim) {
  if (victim.preempted_by < 0) return;
  auto p = jobs_.find(victim.preempted_by);
  if (p != jobs_.end()) {
    std::erase(p->second.waiting_for, victim.id);
    if (p->second.waiting_for.empty()) ready_preemptors_.push_back(p->first);
  }
  victim.preempted_by = -1;
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
  job.reason.clear();
  Account(job, +1);
  running_[job.id] = &job;
  running_by_queue_[job.queue][job.id] = &job;
  if (job.spec.min_replicas > 0) elastic_running_.insert(job.id);
  if (job.borrowed) ++version_;
  RemovePending(job);
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

int Scheduler::LargestFitting(int least, int most, const std::function<bool(int)>& fits) {
  if (fits(most)) return most;
  if (least <= 0 || least >= most || !fits(least)) return -1;
  // Placement is monotone in the replica count: bisect between what fits and what does not.
  int lo = least, hi = most - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

int Scheduler::MostUnderCap(const JobRecord& job) const {
  const Queue& q = queues_[job.queue];
  const int total = TotalReplicas(job.spec);
  if (q.spec.cap_gpus < 0) return total;
  const double room = q.spec.cap_gpus - q.held.gpu - q.waiting_gpus + kEps;
  int most = total;
  while (most > 0 && JobGpus(job.spec, most) > room) --most;
  return most;
}

int Scheduler::MostInShareBand(const JobRecord& job, const std::vector<double>& fair,
                               double now) const {
  const int total = TotalReplicas(job.spec);
  if (job.spec.min_replicas == 0 || !OthersWaitOutABackOff(job.queue, fair, now)) return total;
  const double room = fair[job.queue] * (1 + pipeline_->policy().reclaim_hysteresis) -
                      queues_[job.queue].committed.gpu + job.gpu_equivalents + kEps;
  int most = total;
  while (most > job.spec.min_replicas && JobGpus(job.spec, most) > room) --most;
  return most;
}

bool Scheduler::OthersWaitOutABackOff(int queue, const std::vector<double>& fair,
                                      double now) const {
  // Which queues do is read once a cycle (Schedule clears it): a deep queue is not walked for
  // every elastic job; a back-off that begins later in the cycle counts from the next.
  if (backing_off_.empty()) {
    backing_off_.assign(queues_.size(), false);
    for (size_t q = 0; q < queues_.size(); ++q)
      for (const JobRecord* j : queues_[q].pending)
        if (j->next_try > now) {
          backing_off_[q] = true;
          break;
        }
  }
  for (size_t q = 0; q < queues_.size(); ++q)
    if (static_cast<int>(q) != queue && backing_off_[q] &&
        queues_[q].committed.gpu + kEps < fair[q])
      return true;
  return false;
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

bool Scheduler::Resize(JobRecord& job, int replicas, double now, std::vector<Decision>* out) {
  const int before = job.replicas;
  if (replicas == before) return false;
  // A shrink places the kept replicas again exactly, which unhealthy hardware refuses.
  if (replicas < before)
    for (const ReplicaPlacement& r : job.placements)
      if (!allocator_->node_healthy(r.node)) return false;
  std::vector<int> ids = job.allocations;
  std::vector<ReplicaPlacement> placed = job.placements;
  if (replicas > before) {
    // The job's own usage still counts against its queue's model caps while it grows.
    if (!TryPlace(job, !job.borrowed, replicas, *allocator_, &ids, &placed, nullptr, -1, before))
      return false;
  } else {
    // The first replicas stay exactly where they are, on the GPUs just freed; tried on a copy,
    // so that a refusal leaves the job as it was.
    Allocator next = *allocator_;
    for (int a : job.allocations) next.Release(a);
    const std::vector<ReplicaPlacement> keep(job.placements.begin(),
                                             job.placements.begin() + replicas);
    if (!TryPlace(job, !job.borrowed, replicas, next, &ids, &placed, &keep)) return false;
    *allocator_ = std::move(next);
    job.shrunk_at = now;
    ++version_;
  }
  Decision d;
  d.kind = replicas > before ? Decision::Kind::kGrow : Decision::Kind::kShrink;
  d.job = job.id;
  d.reason = "to " + std::to_string(replicas) + " of " + std::to_string(TotalReplicas(job.spec)) +
             " replicas";
  const auto lo = std::min(before, replicas), hi = std::max(before, replicas);
  const std::vector<ReplicaPlacement>& longer = replicas > before ? placed : job.placements;
  d.placements.assign(longer.begin() + lo, longer.begin() + hi);
  d.gpu_ids = GpuIds(d.placements);
  if (replicas > before && !job.borrowed) DisplaceYieldingPlans(job, d.placements, now);
  Account(job, -1);
  job.allocations = std::move(ids);
  job.placements = std::move(placed);
  job.replicas = replicas;
  job.gpu_equivalents = JobGpus(job.spec, replicas);
  job.reason.clear();
  Account(job, +1);
  Emit(now, job.id, DecisionKindName(d.kind), d.reason);
  out->push_back(std::move(d));
  return true;
}

// Elastic jobs below their full size grow into what the pending jobs left free, the queue
// furthest below its share first; within the guarantee for guaranteed jobs, under the cap
// and within MostInShareBand for borrowers.
void Scheduler::GrowElastic(const std::vector<double>& fair, double now,
                            std::vector<Decision>* out) {
  std::vector<JobRecord*> growing;
  for (int id : elastic_running_) {
    JobRecord* j = running_.at(id);
    if (j->state == JobState::kRunning && !j->spec.gang_affinity &&
        j->replicas < TotalReplicas(j->spec) && j->shrunk_at != now && j->start_time != now)
      growing.push_back(j);
  }
  auto share = [&](const JobRecord* j) {
    const Queue& q = queues_[j->queue];
    return q.committed.gpu / q.spec.weight;
  };
  std::stable_sort(growing.begin(), growing.end(),
                   [&](const JobRecord* a, const JobRecord* b) { return share(a) < share(b); });
  for (JobRecord* j : growing) {
    const int before = j->replicas;
    const int most = j->borrowed ? std::min(MostUnderCap(*j), MostInShareBand(*j, fair, now))
                                 : TotalReplicas(j->spec);
    if (most <= before) continue;
    // Probes place the added replicas and take them back; the largest that fits is kept.
    const int grown = LargestFitting(before + 1, most, [&](int n) {
      if (!j->borrowed && !MayGuarantee(*j, JobGpus(j->spec, n) - j->gpu_equivalents)) return false;
      std::vector<int> ids = j->allocations;
      std::vector<ReplicaPlacement> placed = j->placements;
      if (!TryPlace(*j, !j->borrowed, n, *allocator_, &ids, &placed, nullptr, -1, before))
        return false;
      for (size_t i = j->allocations.size(); i < ids.size(); ++i) allocator_->Release(ids[i]);
      return true;
    });
    if (grown > before) Resize(*j, grown, now, out);
  }
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
  // Exactly where its plan placed it, while its reservation holds (every GPU of the plan is its
  // own then): a fresh placement's candidates may be another preemptor's reserved GPUs. Not on
  // a GPU observed crowded since, nor in a queue with model caps (exact placements are not
  // steered by them): placed afresh, the filters and caps judge it.
  std::vector<ReplicaPlacement> planned = std::move(p.planned);
  p.planned.clear();
  const bool crowded = std::any_of(planned.begin(), planned.end(), [&](const ReplicaPlacement& r) {
    return std::any_of(r.gpus.begin(), r.gpus.end(),
                       [&](int g) { return allocator_->gpu_crowded(r.node, g); });
  });
  if (reservations_.Of(p.id) && static_cast<int>(planned.size()) == most && !crowded &&
      queues_[p.queue].spec.model_caps.empty()) {
    std::vector<int> ids;
    std::vector<ReplicaPlacement> placed;
    if (TryPlace(p, guaranteed, most, *allocator_, &ids, &placed, &planned)) {
      Run(p, guaranteed, most, std::move(ids), std::move(placed), now, out);
      return true;
    }
  }
  if (Start(p, guaranteed, now, out, most)) return true;
  // The plan broke (hardware failed under it, or guaranteed work took a borrower's plan): the
  // job waits like any other.
  DropReservation(p.id);
  p.preempting = false;
  p.reason = "its planned placement broke before its victims stopped; waiting again";
  Emit(now, p.id, "pending", p.reason);
  return false;
}

bool Scheduler::MayGuarantee(const JobRecord& job, double need) const {
  return MayGuarantee(job.queue, job.spec.priority, need);
}

bool Scheduler::MayGuarantee(int queue, int priority, double need) const {
  const Queue& q = queues_[queue];
  return priority >= 0 && q.committed_guaranteed + need <= q.guarantee_gpus + kEps &&
         (q.spec.cap_gpus < 0 || q.held.gpu + q.waiting_gpus + need <= q.spec.cap_gpus + kEps);
}

bool Scheduler::UnderCap(const JobRecord& job, double need, std::string* why) const {
  const Queue& q = queues_[job.queue];
  if (q.spec.cap_gpus < 0 || q.held.gpu + q.waiting_gpus + need <= q.spec.cap_gpus + kEps)
    return true;
  if (why) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "queue %s is at its cap: it holds %g of %g GPUs and the job needs %g",
                  q.spec.name.c_str(), q.held.gpu, q.spec.cap_gpus, need);
    *why = text;
  }
  return false;
}

std::vector<double> Scheduler::FairShares() const {
  std::vector<FairClaim> claims;
  for (const Queue& q : queues_) {
    FairClaim c;
    c.weight = q.spec.weight;
    c.guarantee = q.guarantee_gpus;
    c.demand = q.demand_gpus;
    if (q.spec.cap_gpus >= 0) c.cap = q.spec.cap_gpus;
    claims.push_back(c);
  }
  return WaterFill(SharedGpus(), claims);
}

double Scheduler::SharedGpus() const {
  double gpus = capacity_.gpu;
  const Allocator& a = *allocator_;
  for (int n = 0; n < static_cast<int>(cluster_->nodes.size()); ++n) {
    if (a.node_healthy(n)) continue;
    for (int g = 0; g < static_cast<int>(cluster_->nodes[n].gpus.size()); ++g)
      if (a.gpu_idle(n, g) && !a.gpu_usable(n, g)) --gpus;
  }
  return gpus;
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
  // Preemptors whose last victim ended instead of stopping go before anyone else.
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
    for (const Queue& queue : queues_) {
      const bool sits_out =
          guarantee_pass && queue.committed_guaranteed + kEps >= queue.guarantee_gpus;
      views.push_back({&queue.committed, queue.spec.weight, &queue.user_usage,
                       sits_out ? nullptr : &queue.waiting});
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

bool Scheduler::KnownToFail(int cls, const ShapeSize& size, int priority, double submit,
                            bool guarantee_pass, double now) const {
  const double whole = WholePriority(priority, submit, now);
  return failed_shapes_.Dominated(cls, size, whole) ||
         (guarantee_pass && not_guaranteed_.Dominated(cls, size, whole));
}

bool Scheduler::ShapeFails(int queue, int cls, const ShapeSize& size, int priority, double submit,
                           bool guarantee_pass, const std::vector<double>& fair, double now) {
  if (KnownToFail(cls, size, priority, submit, guarantee_pass, now)) return true;
  if (cls < 0 || !class_bounded_[cls] || size.units <= 0 || size.replicas <= 0) return false;
  // What fails by the room to preempt and the free GPUs is known as a tried job's failure would
  // be: for both passes, while what the cycle frees or makes later is tried in the next cycle
  // (job_shape.h). An elastic shape counts its minimum.
  const double gpus = static_cast<double>(size.units) * size.replicas;
  auto reclaim_may_fit = [&] {
    return ReplicaBound::MayFitReclaiming(*allocator_, size.units, size.replicas, queue);
  };
  auto may_preempt = [&](bool guarantee_only) {
    return RoomToPreempt(queue, priority, gpus, gpus, guarantee_only, fair, reclaim_may_fit).any();
  };
  const double whole = WholePriority(priority, submit, now);
  // The guarantee pass places only inside the guarantee and preempts only to reclaim for it: a
  // shape too large for the guarantee room left (which only shrinks within a pass; an elastic
  // shape's minimum failing says its full size does too) fails this pass, as does one that
  // neither fits the queue's cells nor may reclaim.
  if (guarantee_pass && !MayGuarantee(queue, priority, gpus)) {
    not_guaranteed_.Add(cls, size, whole, version_);
    return true;
  }
  const bool fits_guaranteed =
      ReplicaBound::MayFitNow(*allocator_, size.units, size.replicas, queue);
  if (!may_preempt(false) && !fits_guaranteed &&
      !ReplicaBound::MayFitNow(*allocator_, size.units, size.replicas, -1)) {
    failed_shapes_.Add(cls, size, whole, version_);
    return true;
  }
  if (guarantee_pass && !fits_guaranteed && !may_preempt(true)) {
    not_guaranteed_.Add(cls, size, whole, version_);
    return true;
  }
  return false;
}

std::vector<WaitingJobs::Job> Scheduler::StillWorthTrying(int queue, double now) const {
  std::vector<WaitingJobs::Job> still;
  for (const auto& [id, r] : reservations_.all()) {
    const JobRecord& j = jobs_.at(id);
    if (j.queue == queue && j.never_fits.empty()) still.push_back(WaitingOf(j));
  }
  // While reservation slots are free, the first job of each shape without a reservation is
  // offered once it has waited long enough, to reserve; it stands for its whole shape (no plan
  // for it, none for the others), so a cycle costs the shapes waiting, not the jobs (a first
  // job back from preemption delays its shape by reserveAfterSeconds at most). Longest waiting
  // first, as when the whole queue was walked.
  const Policy& policy = pipeline_->policy();
  const auto& pending = queues_[queue].pending;  // longest waiting first
  if (reservations_.starving() >= policy.max_reservations || pending.empty() ||
      now - pending.front()->pending_since < policy.reserve_after_s)
    return still;
  std::vector<const JobRecord*> due;
  queues_[queue].waiting.ForEachShape([&](int id) {
    if (reservations_.Of(id)) return true;
    const JobRecord& j = *pending_by_id_.at(id);
    if (now - j.pending_since >= policy.reserve_after_s) due.push_back(&j);
    return false;
  });
  std::sort(due.begin(), due.end(), [](const JobRecord* a, const JobRecord* b) {
    return std::tie(a->pending_since, a->id) < std::tie(b->pending_since, b->id);
  });
  for (const JobRecord* j : due) still.push_back(WaitingOf(*j));
  return still;
}

// The start of TryJob, for a job whose turn comes to nothing but what this does (noting that
// it failed): true when TryJob would return false at once with nothing else to do, neither
// noting a failure of its shape (which may end the queue's walk) nor trying to reserve.
bool Scheduler::TurnComesToNothing(JobRecord& job, double priority, bool guarantee_pass,
                                   double now) {
  const Policy& policy = pipeline_->policy();
  if (job.state != JobState::kPending || job.next_try > now || !job.waiting_for.empty() ||
      !job.never_fits.empty())
    return true;
  if (job.failed_at == version_ || reservations_.Of(job.id)) return false;
  if (uint64_t as_of; failed_shapes_.Dominated(job.shape_class, job.shape, priority, &as_of)) {
    if (now - job.pending_since >= policy.reserve_after_s &&
        reservations_.starving() < policy.max_reservations)
      return false;  // TryReserve may plan one
    job.failed_at = as_of;
    return true;
  }
  return guarantee_pass && not_guaranteed_.Dominated(job.shape_class, job.shape, priority);
}

// One pending job's turn in a cycle; true when it started or preempted (usage changed).
bool Scheduler::TryJob(JobRecord& job, double priority, bool guarantee_pass,
                       const std::vector<double>& fair, double now, std::vector<Decision>* out) {
  if (job.state != JobState::kPending || job.next_try > now || !job.waiting_for.empty() ||
      !job.never_fits.empty())
    return false;
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
  if (preempt_deferred_) return false;  // tried again later in the cycle
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

// A guaranteed preemptor whose plan binds a new guarantee cell has the whole cell reserved; the
// queue's other guaranteed work waits for that cell instead of reclaiming another one.
const JobRecord* Scheduler::CellBeingReclaimed(int queue) const {
  for (const auto& [id, r] : reservations_.all()) {
    const JobRecord& p = jobs_.at(id);
    if (p.queue != queue || p.committed_gpus <= 0 || !p.reserved_guaranteed) continue;
    if (static_cast<double>(r.gpus.size()) > p.committed_gpus + kEps) return &p;
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
  room.within_guarantee = borrowers && MayGuarantee(queue, priority, need) && reclaim_may_fit();
  room.below_fair_share =
      over_share && !guarantee_only && own.committed.gpu + share_need <= fair[queue] + kEps;
  room.lower_exists = !guarantee_only && !own.committed_by_priority.empty() &&
                      own.committed_by_priority.begin()->first < priority;
  return room;
}

bool Scheduler::TryPreempt(JobRecord& job, double now, const std::vector<double>& fair,
                           bool guarantee_only, std::vector<Decision>* out) {
  Queue& queue = queues_[job.queue];
  const Policy& policy = pipeline_->policy();
  const int full = TotalReplicas(job.spec);
  // An elastic job reclaims its guarantee at the size the guarantee leaves room for, and toward
  // its fair share at the size that share leaves room for, each down to its minimum: its full
  // size may be past them while its minimum is not.
  int guarantee_replicas = full, share_replicas = full;
  if (job.spec.min_replicas > 0) {
    while (guarantee_replicas > job.spec.min_replicas &&
           !MayGuarantee(job, JobGpus(job.spec, guarantee_replicas)))
      --guarantee_replicas;
    while (share_replicas > job.spec.min_replicas &&
           queue.committed.gpu + JobGpus(job.spec, share_replicas) > fair[job.queue] + kEps)
      --share_replicas;
  }
  const JobSpec guarantee_sized = FirstReplicas(job.spec, guarantee_replicas);
  const PreemptionRoom room = RoomToPreempt(
      job.queue, job.spec.priority, JobGpus(job.spec, guarantee_replicas),
      JobGpus(job.spec, share_replicas), guarantee_only, fair,
      [&] { return ReplicaBound::MayFitReclaiming(*allocator_, guarantee_sized, job.queue); });
  // No victim can exist: the common case in a deep queue, answered without looking at the
  // running jobs.
  if (!room.any()) {
    if (job.reason.empty()) job.reason = "no capacity fits the job";
    return false;
  }
  const bool within_guarantee = room.within_guarantee, below_fair_share = room.below_fair_share;
  if (within_guarantee) {
    if (const JobRecord* p = CellBeingReclaimed(job.queue)) {
      job.reason = "waiting for the guarantee cell job " + std::to_string(p->id) + " reclaims";
      return false;
    }
  }

  using Victims = std::vector<JobRecord*>;
  enum class Why { kGuarantee, kFairShare, kPriority };
  struct Plan {
    Victims victims;
    bool guaranteed;
    Why why;
    int replicas;         // the size the job is placed at
    Victims movers = {};  // of `victims`, the job's own queue's, which start again elsewhere
  };
  Victims reclaim, fair_reclaim, lower;
  // Only the queues that may give a victim are visited: the job's own where lower priority runs
  // there, others when reclaiming the guarantee, and those above their share by the band for
  // the fair share.
  for (size_t q = 0; q < queues_.size(); ++q) {
    const bool gives =
        static_cast<int>(q) == job.queue
            ? room.lower_exists
            : within_guarantee ||
                  (below_fair_share &&
                   queues_[q].committed.gpu > fair[q] * (1 + policy.reclaim_hysteresis) + kEps);
    if (!gives) continue;
    for (const auto& [id, v] : running_by_queue_[q]) {
      if (v->state != JobState::kRunning || !v->spec.preemptible) continue;
      // A job started in this very call is no victim yet (nothing starts and stops in one
      // cycle); the job that would take it is tried again next cycle instead of failing.
      const bool fresh = v->start_time == now;
      auto add = [&, v = v](Victims& list) {
        if (fresh)
          preempt_deferred_ = true;
        else
          list.push_back(v);
      };
      if (v->queue != job.queue && v->borrowed) {
        // (a) Reclaim the guarantee from borrowers; (a') restore the fair share from queues
        // above theirs by the hysteresis band (how far, `allowed` checks for the whole set).
        if (within_guarantee) add(reclaim);
        const Queue& other = queues_[v->queue];
        if (below_fair_share &&
            other.committed.gpu > fair[v->queue] * (1 + policy.reclaim_hysteresis) + kEps)
          add(fair_reclaim);
      }
      // (b) Strictly lower priority inside the queue, by raw priority and by the whole points
      // (aging included) that order the queue: a job that got ahead by aging is not taken back.
      if (!guarantee_only && v->queue == job.queue && v->spec.priority < job.spec.priority &&
          WholePriority(*v, now) < WholePriority(job, now))
        add(lower);
    }
  }
  std::vector<Plan> plans;
  if (!reclaim.empty()) plans.push_back({reclaim, true, Why::kGuarantee, guarantee_replicas});
  if (!fair_reclaim.empty())
    plans.push_back({fair_reclaim, false, Why::kFairShare, share_replicas});
  if (!lower.empty()) {
    // Inside the guarantee when the victims' guaranteed GPUs make room there, else borrowing.
    if (job.spec.priority >= 0 && queue.guarantee_gpus > 0)
      plans.push_back({lower, true, Why::kPriority, full});
    plans.push_back({lower, false, Why::kPriority, full});
    // A fair-share reclaim may also take the queue's own borrowed lower-priority work: a node
    // often holds some of each, and neither alone frees it. Not guaranteed work, nor for a
    // guarantee reclaim: the queue's own victims would take its guarantee again as they
    // restart, before the job, and break its plan (review: a preemption loop).
    Victims borrowed_lower;
    for (JobRecord* v : lower)
      if (v->borrowed) borrowed_lower.push_back(v);
    for (size_t i = 0, reclaims = plans.size(); i < reclaims && !borrowed_lower.empty(); ++i)
      if (plans[i].why == Why::kFairShare) {
        Plan both = plans[i];
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
        Plan moving = plans[i];
        for (JobRecord* v : movers)  // one the plan stops already does not move
          if (std::find(moving.victims.begin(), moving.victims.end(), v) == moving.victims.end()) {
            moving.victims.push_back(v);
            moving.movers.push_back(v);
          }
        if (!moving.movers.empty()) plans.push_back(std::move(moving));
      }
  }
  for (const Plan& plan : plans) {
    auto moves = [&](const JobRecord* v) {
      return std::find(plan.movers.begin(), plan.movers.end(), v) != plan.movers.end();
    };
    // Where the movers go once the job is placed on `trial`, in the order of `gone`; false
    // when one finds no place, or only one on the job's planned GPUs or another's reservation.
    auto place_movers = [&](Allocator& trial, const Victims& gone, const TrialPlacement& where,
                            std::vector<std::vector<std::pair<int, int>>>* destinations) {
      const std::vector<std::pair<int, int>> planned_gpus = ReservedGpus(where);
      const std::set<std::pair<int, int>> planned(planned_gpus.begin(), planned_gpus.end());
      for (JobRecord* v : gone) {
        if (!moves(v)) continue;
        std::vector<ReplicaPlacement> placed;
        if (!PlaceMoved(*v, trial, &placed)) return false;
        destinations->emplace_back();
        for (const ReplicaPlacement& r : placed)
          for (int g : r.gpus) {
            const int owner = reservations_.OwnerOf(r.node, g);
            if (planned.count({r.node, g}) || (owner >= 0 && owner != job.id)) return false;
            destinations->back().push_back({r.node, g});
          }
      }
      return true;
    };
    auto stopping_for_good = [&](const Victims& gone) {
      Victims out;
      for (JobRecord* v : gone)
        if (!moves(v)) out.push_back(v);
      return out;
    };
    const double plan_need = JobGpus(job.spec, plan.replicas);
    const JobSpec sized = FirstReplicas(job.spec, plan.replicas);  // what the search places
    // Whether the queue may hold the preemptor once `taken` GPUs (by queue) are given back, as
    // Schedule asks of a start; and for a fair-share reclaim, whether every victim's queue
    // keeps its share. `own`: the preemptor's queue's part, `own_guaranteed` of it guaranteed.
    auto allowed = [&](const std::map<int, double>& taken, double own, double own_guaranteed) {
      // A fair-share reclaim must shrink the total shortfall below the shares by at least half
      // of what the job gets (it gets all of `plan_need` toward its own share): a victim's queue
      // may end a little below its share, when its excess was too fragmented to give whole
      // jobs, but every reclaim moves the cluster toward the water-fill by a fixed amount, so
      // reclaims end.
      if (plan.why == Why::kFairShare) {
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
               queue.committed_guaranteed - own_guaranteed + plan_need <=
                   queue.guarantee_gpus + kEps;
      return under_cap;
    };
    auto allowed_giving = [&](const JobRecord& v, double gpus, std::map<int, double>& taken,
                              double& own, double& own_guaranteed) {
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
        allowed_giving(*s.job, s.job->gpu_equivalents - JobGpus(s.job->spec, s.replicas), taken,
                       own, own_guaranteed);
      return allowed(taken, own, own_guaranteed);
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
        if (!moves(v)) allowed_giving(*v, v->gpu_equivalents, taken, own, own_guaranteed);
      return allowed(taken, own, own_guaranteed);
    };
    search.fits = [&](Allocator& trial, const Victims& gone, TrialPlacement* where) {
      if (plan.movers.empty()) return fits(trial, FreedByModel(job.queue, gone), where);
      // On a copy, as in PlanAmongMovable: a refusal must leave `trial` as it was.
      Allocator probe = trial;
      std::vector<std::vector<std::pair<int, int>>> destinations;
      return fits(probe, FreedByModel(job.queue, stopping_for_good(gone)), where) &&
             place_movers(probe, gone, *where, &destinations);
    };
    std::optional<VictimPlan> found = FindVictims(search, plan.victims);
    if (!found) continue;
    // The movers' destinations, found again as the search found them.
    std::vector<std::vector<std::pair<int, int>>> destinations;
    if (!plan.movers.empty()) {
      Allocator trial = *allocator_;
      for (const JobRecord* v : found->victims)
        for (int a : v->allocations) trial.Release(a);
      TrialPlacement where;
      if (!fits(trial, FreedByModel(job.queue, stopping_for_good(found->victims)), &where) ||
          !place_movers(trial, found->victims, where, &destinations))
        continue;
      found->placement = where;  // the placement the destinations were checked against
    }
    // It fits with no victim at all (an elastic job at the size it reclaims for, inside a
    // guarantee its full size would not fit): it starts now.
    if (found->victims.empty()) {
      if (Start(job, plan.guaranteed, now, out, plan.replicas)) return true;
      continue;
    }
    const char* why = plan.why == Why::kGuarantee   ? "reclaimed for the guarantee of queue "
                      : plan.why == Why::kFairShare ? "reclaimed for the fair share of queue "
                                                    : "preempted by higher priority in queue ";
    job.waiting_for.clear();
    size_t moved = 0;
    for (JobRecord* victim : found->victims) {
      if (moves(victim))
        MoveAway(*victim, job.id, destinations[moved++],
                 "moved to make room for a long-waiting job of its queue where borrowed GPUs "
                 "were reclaimed",
                 now, out);
      else
        TellToStop(*victim, Decision::Kind::kPreempt, job.id,
                   (victim->queue == job.queue ? "preempted by higher priority in queue " : why) +
                       queue.spec.name,
                   now, out);
      job.waiting_for.push_back(victim->id);
    }
    CommitWaiting(job, plan_need, plan.guaranteed, found->placement.bound_cells);
    job.planned = found->placement.where;
    // A borrower's plan this guaranteed one overlaps (another queue's, or its own queue's of
    // lower priority: the search goes around the rest) loses its reservation; its victims still
    // stop, and it then starts wherever it fits.
    Reservations::Reservation kind;
    kind.yields = !plan.guaranteed;
    kind.for_preemption = true;
    kind.priority = WholePriority(job, now);
    kind.queue = job.queue;
    Reserve(job.id, ReservedGpus(found->placement), kind);
    job.preempting = true;
    job.reason =
        "waiting for " + std::to_string(found->victims.size()) + " preempted job(s) to stop";
    Emit(now, job.id, "waiting", job.reason);
    return true;
  }
  if (job.reason.empty()) job.reason = "no capacity fits the job";
  return false;
}

void Scheduler::Reserve(int job, const std::vector<std::pair<int, int>>& gpus,
                        const Reservations::Reservation& kind) {
  // A reservation displaced here (guaranteed work's plan over a borrower's) is told why: its
  // victims stopped for nothing, and it waits like any other job.
  for (int displaced : reservations_.Reserve(job, gpus, kind, cluster_->nodes.size()))
    Emit(now_, displaced, "plan-displaced",
         "its reserved GPUs went to the plan of job " + std::to_string(job));
  MarkReservedNodes();  // reservations it displaced may have left other nodes
}

void Scheduler::DisplaceYieldingPlans(const JobRecord& job,
                                      const std::vector<ReplicaPlacement>& placements, double now) {
  std::set<int> displaced;
  for (const ReplicaPlacement& r : placements)
    for (int g : r.gpus)
      if (const int owner = reservations_.OwnerOf(r.node, g); owner >= 0 && owner != job.id) {
        const Reservations::Reservation* plan = reservations_.Of(owner);
        if (plan->for_preemption && plan->yields &&
            (plan->queue != job.queue || WholePriority(job, now) > plan->priority))
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
  // only grow within a cycle).
  FailedShapes& unreservable = unreservable_[guaranteed];
  const double priority = WholePriority(job, now);
  if (unreservable.Dominated(job.shape_class, job.shape, priority)) return;
  std::vector<JobRecord*> occupants;
  for (const auto& [id, v] : running_)
    if (v->state == JobState::kRunning) occupants.push_back(v);
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
                         const std::vector<std::pair<int, int>>& destination,
                         const std::string& why, double now, std::vector<Decision>* out) {
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
  Reserve(o.id, destination, kind);
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
  if (!fits) return false;
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
    destination_gpus.emplace_back();
    for (const ReplicaPlacement& p : d)
      for (int g : p.gpus) destination_gpus.back().push_back({p.node, g});
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
    MoveAway(*occupants[i], job.id, destination_gpus[i],
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
  UncommitWaiting(victim);  // a moved job's: it now waits to start at its destination
  ++victim.preemptions;
  Emit(now, id, "stopped", victim.reason);
  ToPending(victim, now, "stopped: " + victim.reason);
  if (preemptor != nullptr) StartPreemptor(*preemptor, now, &out);
  return out;
}

void Scheduler::HealthChanged(int node) {
  ++version_;
  // A starving job's reservation on hardware that cannot be used is planned anew.
  std::vector<int> broken;
  for (const auto& [job, r] : reservations_.all()) {
    if (r.for_preemption) continue;
    for (const auto& [n, g] : r.gpus)
      if (n == node && !allocator_->gpu_usable(n, g)) {
        broken.push_back(job);
        break;
      }
  }
  for (int job : broken) DropReservation(job);
}

void Scheduler::EvictFrom(int node, int gpu, const std::string& why, double now,
                          std::vector<Decision>* out) {
  std::vector<JobRecord*> on_it;
  for (const auto& [id, j] : running_) {
    if (j->state != JobState::kRunning) continue;
    for (const ReplicaPlacement& r : j->placements)
      if (r.node == node && (gpu < 0 || std::count(r.gpus.begin(), r.gpus.end(), gpu))) {
        on_it.push_back(j);
        break;
      }
  }
  for (JobRecord* j : on_it) TellToStop(*j, Decision::Kind::kEvict, -1, why, now, out);
}

std::vector<Decision> Scheduler::SetNodeCordoned(int node, bool cordoned, double now) {
  allocator_->SetNodeCordoned(node, cordoned);
  HealthChanged(node);
  Emit(now, -1, cordoned ? "cordon" : "uncordon", cluster_->nodes[node].name);
  return {};
}

std::vector<Decision> Scheduler::Drain(int node, double now) {
  std::vector<Decision> out = SetNodeCordoned(node, true, now);
  EvictFrom(node, -1, "node " + cluster_->nodes[node].name + " drained", now, &out);
  return out;
}

std::vector<Decision> Scheduler::SetGpuBad(int node, int gpu, bool bad, double now) {
  std::vector<Decision> out;
  allocator_->SetGpuBad(node, gpu, bad);
  HealthChanged(node);
  const std::string name = cluster_->nodes[node].name + "/" + std::to_string(gpu);
  Emit(now, -1, bad ? "gpu-bad" : "gpu-recovered", name);
  if (bad) EvictFrom(node, gpu, "GPU " + name + " went bad", now, &out);
  return out;
}

std::vector<Decision> Scheduler::SetNodeBad(int node, bool bad, double now) {
  std::vector<Decision> out;
  for (size_t g = 0; g < cluster_->nodes[node].gpus.size(); ++g) {
    std::vector<Decision> more = SetGpuBad(node, static_cast<int>(g), bad, now);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

int Scheduler::Adopt(const JobSpec& spec, const std::vector<ReplicaPlacement>& placements,
                     bool borrowed, double submit_time, double start_time, std::string* why) {
  const int id = Submit(spec, submit_time, why);
  if (id < 0) return -1;
  JobRecord& job = jobs_.at(id);
  const int replicas = static_cast<int>(placements.size());
  const int least = job.spec.min_replicas > 0 ? job.spec.min_replicas : TotalReplicas(job.spec);
  if (replicas < least || replicas > TotalReplicas(job.spec)) {
    *why = "placements: " + std::to_string(replicas) + " replicas, the job asks for " +
           std::to_string(TotalReplicas(job.spec));
  } else {
    std::vector<int> ids;
    std::vector<ReplicaPlacement> placed;
    if (TryPlace(job, !borrowed, replicas, *allocator_, &ids, &placed, &placements)) {
      std::vector<Decision> ignored;
      Run(job, !borrowed, replicas, std::move(ids), std::move(placed), start_time, &ignored);
      return id;
    }
    *why = "placements: not free as given (" + job.reason + ")";
  }
  // Not adopted: the job leaves no trace.
  RemovePending(job);
  queues_[job.queue].demand_gpus -= JobGpus(job.spec, TotalReplicas(job.spec));
  jobs_.erase(id);
  return -1;
}

std::vector<NodeVerdict> Scheduler::Evaluate(const JobSpec& spec, const std::vector<int>& nodes) {
  std::vector<NodeVerdict> out;
  JobRecord probe;
  probe.spec = spec;
  auto q = queue_index_.find(spec.queue);
  probe.queue = q == queue_index_.end() ? -1 : q->second;
  for (int node : nodes) {
    NodeVerdict v;
    v.node = node;
    if (probe.queue < 0 || node < 0 || node >= static_cast<int>(cluster_->nodes.size())) {
      v.reason = probe.queue < 0 ? "unknown queue" : "unknown node";
      out.push_back(std::move(v));
      continue;
    }
    const double need = JobGpus(spec, TotalReplicas(spec));
    const bool guaranteed = MayGuarantee(probe, need);
    if (!guaranteed && !UnderCap(probe, need, &v.reason)) {
      out.push_back(std::move(v));
      continue;
    }
    // Every replica on this one node, on a what-if copy only, placed as a start would be.
    Allocator trial = *allocator_;
    std::vector<int> ids;
    v.feasible =
        TryPlace(probe, guaranteed, TotalReplicas(spec), trial, &ids, &v.placements, nullptr, node);
    if (v.feasible)
      v.score = pipeline_->best_score();
    else
      v.reason = probe.reason;
    out.push_back(std::move(v));
  }
  return out;
}

bool Scheduler::StartAt(int id, const std::vector<ReplicaPlacement>& placements, double now,
                        std::string* why) {
  now_ = now;
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kPending ||
      !it->second.waiting_for.empty()) {
    *why = "job " + std::to_string(id) + " is not pending";
    return false;
  }
  JobRecord& job = it->second;
  const int replicas = static_cast<int>(placements.size());
  const double need = JobGpus(job.spec, replicas);
  const bool guaranteed = MayGuarantee(job, need);
  if (!guaranteed && !UnderCap(job, need, why)) return false;
  std::vector<int> ids;
  std::vector<ReplicaPlacement> placed;
  const int least = job.spec.min_replicas > 0 ? job.spec.min_replicas : TotalReplicas(job.spec);
  if (replicas < least || replicas > TotalReplicas(job.spec) ||
      !TryPlace(job, guaranteed, replicas, *allocator_, &ids, &placed, &placements)) {
    *why = "placements: not free as given";
    return false;
  }
  // Exact placements are not steered by the queue's model caps (TryPlace): checked here.
  const Queue& q = queues_[job.queue];
  for (const auto& [model, gpus] : ModelGpus(job.spec, placed)) {
    auto cap = q.spec.model_caps.find(model);
    auto held = q.held_by_model.find(model);
    const double used = held == q.held_by_model.end() ? 0 : held->second;
    if (cap == q.spec.model_caps.end() || used + gpus <= cap->second + kEps) continue;
    for (int a : ids) allocator_->Release(a);
    char text[200];
    std::snprintf(text, sizeof text,
                  "cap: queue %s's modelCaps: %s holds %g of %g, and the job needs %g",
                  q.spec.name.c_str(), model.c_str(), used, cap->second, gpus);
    *why = text;
    return false;
  }
  std::vector<Decision> ignored;
  Run(job, guaranteed, replicas, std::move(ids), std::move(placed), now, &ignored);
  return true;
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

std::string Scheduler::CheckConsistency() const {
  std::vector<Queue> want(queues_.size());
  for (const auto& [id, j] : jobs_) {
    if (j.state == JobState::kDone) continue;
    Queue& q = want[j.queue];
    q.demand_gpus += JobGpus(j.spec, TotalReplicas(j.spec));
    // Waiting preemptors, and moved jobs while they stop, commit what they will hold.
    q.committed.gpu += j.committed_gpus;
    q.waiting_gpus += j.committed_gpus;
    if (j.reserved_guaranteed) q.committed_guaranteed += j.committed_gpus;
    if (j.state == JobState::kPending) {
      q.pending.push_back(const_cast<JobRecord*>(&j));
      q.pending_gpus += JobGpus(j.spec, TotalReplicas(j.spec));
      continue;
    }
    const ResourceVector r = JobResources(j);
    q.held += r;
    for (const auto& [model, gpus] : ModelGpus(j)) q.held_by_model[model] += gpus;
    ++q.running;
    if (j.borrowed) q.borrowed_gpus += r.gpu;
    if (j.state == JobState::kRunning) {
      q.committed += r;
      if (!j.borrowed) q.committed_guaranteed += r.gpu;
      ++q.committed_by_priority[j.spec.priority];
    }
    if (!running_.count(id)) return "job " + std::to_string(id) + " runs but is not listed";
    for (int a : j.allocations)
      if (!allocator_->Find(a))
        return "job " + std::to_string(id) + " holds allocation " + std::to_string(a) +
               " the allocator does not have";
  }
  auto near = [](double a, double b) { return std::fabs(a - b) < 1e-6 * std::max(1.0, b); };
  for (size_t i = 0; i < queues_.size(); ++i) {
    const Queue& have = queues_[i];
    Queue& w = want[i];
    const std::string name = "queue " + have.spec.name + ": ";
    std::vector<JobRecord*> pending(have.pending.begin(), have.pending.end());
    std::vector<JobRecord*> wanted(w.pending.begin(), w.pending.end());
    std::sort(pending.begin(), pending.end());
    std::sort(wanted.begin(), wanted.end());
    if (pending != wanted) return name + "pending list differs from the pending jobs";
    const auto indexed = std::count_if(pending.begin(), pending.end(),
                                       [](const JobRecord* j) { return j->never_fits.empty(); });
    if (have.waiting.size() != static_cast<size_t>(indexed))
      return name + "the waiting index holds " + std::to_string(have.waiting.size()) + " jobs, " +
             std::to_string(indexed) + " may be tried";
    if (!near(have.held.gpu, w.held.gpu) || !near(have.held.cpu_milli, w.held.cpu_milli) ||
        !near(have.held.memory_mib, w.held.memory_mib))
      return name + "held " + std::to_string(have.held.gpu) + " GPUs, jobs hold " +
             std::to_string(w.held.gpu);
    if (!near(have.committed.gpu, w.committed.gpu) ||
        !near(have.committed_guaranteed, w.committed_guaranteed))
      return name + "committed " + std::to_string(have.committed.gpu) + " GPUs, jobs commit " +
             std::to_string(w.committed.gpu);
    if (!near(have.borrowed_gpus, w.borrowed_gpus)) return name + "borrowed GPUs differ";
    for (const auto& [model, gpus] : have.held_by_model) {
      auto want_model = w.held_by_model.find(model);
      if (!near(gpus, want_model == w.held_by_model.end() ? 0 : want_model->second))
        return name + "held " + model + " GPUs differ";
    }
    if (!near(have.waiting_gpus, w.waiting_gpus)) return name + "waiting preemptors' GPUs differ";
    if (!near(have.demand_gpus, w.demand_gpus)) return name + "demand differs";
    if (!near(have.pending_gpus, w.pending_gpus)) return name + "pending GPUs differ";
    if (have.running != w.running) return name + "running count differs";
    if (have.committed_by_priority != w.committed_by_priority)
      return name + "running jobs by priority differ";
  }
  // The allocator's promised guarantee cells are the waiting preemptors' plans'.
  Allocator promised = *allocator_;
  for (const auto& [id, j] : jobs_) promised.Promise(j.queue, j.promised_cells, -1);
  for (const VirtualCluster& vc : promised.vcs())
    for (int left : vc.promised_counts)
      if (left != 0) return "VC " + vc.name + ": promised cells differ from the plans'";
  for (const auto& [id, r] : reservations_.all()) {
    const JobRecord* j = job(id);
    if (!j || (j->state != JobState::kPending && !(r.for_move && j->state == JobState::kStopping)))
      return "reservation of job " + std::to_string(id) + ", which is not pending";
  }
  for (int n = 0; n < static_cast<int>(allocator_->cluster().nodes.size()); ++n)
    if (allocator_->node_reserved(n) != reservations_.reserved(n))
      return "node " + std::to_string(n) + "'s reserved mark differs from the reservations";
  if (running_.size() !=
      static_cast<size_t>(std::count_if(jobs_.begin(), jobs_.end(), [](const auto& e) {
        return e.second.state == JobState::kRunning || e.second.state == JobState::kStopping;
      })))
    return "running list differs from the running jobs";
  size_t by_queue = 0;
  for (size_t q = 0; q < running_by_queue_.size(); ++q)
    for (const auto& [id, j] : running_by_queue_[q]) {
      ++by_queue;
      if (j->queue != static_cast<int>(q) || !running_.count(id))
        return "job " + std::to_string(id) + " is listed running in the wrong queue";
    }
  if (by_queue != running_.size()) return "running jobs by queue differ from the running list";
  return "";
}

}  // namespace berth
