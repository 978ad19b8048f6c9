#include "core/queue_order.h"

#include <algorithm>

namespace berth {

WaitingJobs::ShapeKey WaitingJobs::ShapeOf(const Job& job) {
  const ShapeSize& s = job.shape;
  return {job.shape_class, job.priority, s.units, s.replicas, s.cpu_milli, s.memory_mib};
}

void WaitingJobs::Add(const Job& job) {
  if (static_cast<size_t>(job.user) >= users_.size()) users_.resize(job.user + 1);
  if (!users_[job.user][job.priority].insert({job.submit, job.id}).second) return;
  ++size_;
  shapes_[ShapeOf(job)].insert({job.submit, job.id});
}

void WaitingJobs::Remove(const Job& job) {
  if (static_cast<size_t>(job.user) >= users_.size()) return;
  auto level = users_[job.user].find(job.priority);
  if (level == users_[job.user].end() || level->second.erase({job.submit, job.id}) == 0) return;
  if (level->second.empty()) users_[job.user].erase(level);
  --size_;
  auto shape = shapes_.find(ShapeOf(job));
  shape->second.erase({job.submit, job.id});
  if (shape->second.empty()) shapes_.erase(shape);
}

bool WaitingJobs::AllFail(
    const std::function<bool(int, const ShapeSize&, int, double)>& fails) const {
  for (const auto& [key, jobs] : shapes_) {
    const auto& [cls, priority, units, replicas, cpu, memory] = key;
    const ShapeSize size{units, replicas, cpu, memory};
    if (!fails(cls, size, priority, jobs.begin()->first)) return false;
  }
  return true;
}

void WaitingJobs::ForEachShape(const std::function<bool(int id)>& visit) const {
  for (const auto& [key, jobs] : shapes_)
    for (const auto& [submit, id] : jobs)
      if (!visit(id)) break;
}

CycleOrder::CycleOrder(std::vector<QueueView> queues, const ResourceVector& capacity,
                       PriorityOf priority_of)
    : views_(std::move(queues)),
      capacity_(capacity),
      priority_of_(std::move(priority_of)),
      queues_(views_.size()) {
  for (size_t q = 0; q < queues_.size(); ++q) {
    if (!views_[q].waiting) continue;
    const int users = static_cast<int>(views_[q].waiting->users_.size());
    for (int u = 0; u < users; ++u)
      if (std::optional<Head> head = HeadOf(static_cast<int>(q), u)) queues_[q].heads.push(*head);
  }
}

std::optional<CycleOrder::Head> CycleOrder::HeadOf(int queue, int user) const {
  const auto& levels = views_[queue].waiting->users_[user];
  const PerQueue& pq = queues_[queue];
  std::optional<Head> best;
  for (const auto& [priority, jobs] : levels) {
    auto last = pq.offered.find({user, priority});
    auto next = last == pq.offered.end() ? jobs.begin() : jobs.upper_bound(last->second);
    if (next == jobs.end()) continue;
    const auto& [submit, id] = *next;
    const Head head{-priority_of_(priority, submit), 0.0, submit, id, user, priority};
    if (!best || head < *best) best = head;
  }
  if (best) std::get<1>(*best) = DominantShare((*views_[queue].users)[user], capacity_);
  return best;
}

bool CycleOrder::Offered(int queue, const WaitingJobs::Job& job) const {
  const PerQueue& pq = queues_[queue];
  auto last = pq.offered.find({job.user, job.priority});
  return last != pq.offered.end() && WaitingJobs::Key{job.submit, job.id} <= last->second;
}

bool CycleOrder::HasMore(int queue) const {
  const PerQueue& pq = queues_[queue];
  return pq.exhausted ? pq.next_still < pq.still.size() : !pq.heads.empty();
}

void CycleOrder::Exhaust(int queue, std::vector<WaitingJobs::Job> still) {
  PerQueue& pq = queues_[queue];
  if (pq.exhausted) return;  // what is still to come was named already
  pq.exhausted = true;
  pq.still = std::move(still);
  pq.next_still = 0;
}

int CycleOrder::Next() {
  if (stale_) {
    queue_share_.resize(queues_.size());
    for (size_t q = 0; q < queues_.size(); ++q)
      queue_share_[q] = DominantShare(*views_[q].usage, capacity_) / views_[q].weight;
    stale_ = false;
  }
  while (true) {
    int pick = -1;
    for (size_t q = 0; q < queues_.size(); ++q)
      if (HasMore(static_cast<int>(q)) && (pick < 0 || queue_share_[q] < queue_share_[pick]))
        pick = static_cast<int>(q);
    if (pick < 0) return -1;
    PerQueue& pq = queues_[pick];
    if (pq.exhausted) {
      const WaitingJobs::Job& job = pq.still[pq.next_still++];
      if (!Offered(pick, job)) return job.id;
      continue;
    }
    const Head top = pq.heads.top();
    pq.heads.pop();
    const int user = std::get<4>(top);
    // A user whose share grew, or whose jobs changed, since the head was made goes back in
    // line as it is now.
    const std::optional<Head> now = HeadOf(pick, user);
    if (!now) continue;
    if (*now != top) {
      pq.heads.push(*now);
      continue;
    }
    const int job = std::get<3>(top);
    pq.offered[{user, std::get<5>(top)}] = {std::get<2>(top), job};
    if (std::optional<Head> again = HeadOf(pick, user)) pq.heads.push(*again);
    return job;
  }
}

}  // namespace berth
