// The engine's self-check (CheckConsistency): the per-queue accounting, the reservations and
// the allocator recomputed from the jobs alone, for tests that drive the engine over time.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/scheduler.h"

namespace berth {

std::string Scheduler::CheckConsistency() const {
  std::vector<Queue> want(queues_.size());
  for (const auto& [id, j] : jobs_) {
    if (j.state == JobState::kDone) continue;
    Queue& q = want[j.queue];
    q.demand_gpus += JobGpus(j.spec, TotalReplicas(j.spec));
    // Waiting preemptors, and moved jobs until they start again, commit what they will hold.
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
  // A moved job's destination and the reservation that holds it go together.
  for (const auto& [id, j] : jobs_) {
    const Reservations::Reservation* r = reservations_.Of(id);
    if (j.destination.empty() == (r != nullptr && r->for_move))
      return "job " + std::to_string(id) + ": its destination and move reservation differ";
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
