// The pending lists, and how a cycle over a deep queue skips what is known to fail: a failed
// shape says every larger job of the same class fails too (queue_order.h, job_shape.h), so a
// queue's walk ends at its first failure rather than trying each job.
#include <algorithm>
#include <tuple>
#include <vector>

#include "core/scheduler.h"

namespace berth {

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

}  // namespace berth
