// Elastic jobs (scheduler.h, "Elastic jobs"): the size a job starts at, growing into what the
// cycle left free, and shrinking to a given size keeping its first replicas where they are.
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/scheduler.h"

namespace berth {

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

}  // namespace berth
