// What each queue holds and commits (running jobs, victims still stopping, preemptors waiting
// for theirs), and the checks that read it: guarantees, caps (whole and per GPU model) and the
// weighted max-min fair shares (scheduler.h, "Shares settle").
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/scheduler.h"

namespace berth {

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
  p.destination.clear();  // a moved job's count and destination go together
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

}  // namespace berth
