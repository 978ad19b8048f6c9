// What changes the engine from outside, between cycles: the cluster and the queues (rebuilt
// with every running job where it runs), hardware health (cordon, drain, bad GPUs and nodes),
// crash recovery (Adopt), and the Kubernetes extender's dry run and bind (Evaluate, StartAt).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/scheduler.h"

namespace berth {

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
  // Preemptors' exact plans and moved jobs' destinations name nodes by index, which may have
  // moved: they are placed afresh.
  // The fresh allocator holds no promises either.
  for (auto& [id, j] : jobs_) {
    j.planned.clear();
    if (j.state == JobState::kPending && !j.destination.empty()) UncommitWaiting(j);
    j.destination.clear();  // a stopping mover's count goes when it stops (Stopped)
    j.promised_cells.clear();
  }
  // Reservations follow their GPUs; one that touches a node that is gone is dropped whole, and a
  // moved job's with its destination.
  Reservations moved;
  for (const auto& [job, r] : reservations_.all()) {
    if (r.for_move) continue;
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

}  // namespace berth
