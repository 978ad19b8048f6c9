#include "core/queue_order.h"

#include <algorithm>
#include <climits>

namespace berth {

WaitingJobs::ShapeKey WaitingJobs::ShapeOf(const Job& job) {
  const ShapeSize& s = job.shape;
  return {job.shape_class, job.priority, s.units, s.replicas, s.cpu_milli, s.memory_mib};
}

void WaitingJobs::Add(const Job& job) {
  if (static_cast<size_t>(job.user) >= users_.size()) users_.resize(job.user + 1);
  auto& jobs = users_[job.user][job.priority];
  const Key key{job.submit, job.id};
  if (jobs.count(key)) return;
  const auto [shape, new_shape] = shapes_.try_emplace(ShapeOf(job));
  shape->second.insert(key);
  Group& group = groups_[{job.shape_class, job.priority}];
  group.jobs.insert(key);
  if (new_shape) {
    group.units.insert(job.shape.units);
    group.replicas.insert(job.shape.replicas);
    group.cpu_milli.insert(job.shape.cpu_milli);
    group.memory_mib.insert(job.shape.memory_mib);
  }
  jobs.emplace(key, Entry{&shape->first, job.record});
  ++size_;
  ++adds_;
  ++changes_;
}

void WaitingJobs::Remove(const Job& job) {
  if (static_cast<size_t>(job.user) >= users_.size()) return;
  auto level = users_[job.user].find(job.priority);
  if (level == users_[job.user].end() || level->second.erase({job.submit, job.id}) == 0) return;
  ++changes_;
  if (level->second.empty()) users_[job.user].erase(level);
  --size_;
  auto shape = shapes_.find(ShapeOf(job));
  shape->second.erase({job.submit, job.id});
  auto group = groups_.find({job.shape_class, job.priority});
  group->second.jobs.erase({job.submit, job.id});
  if (!shape->second.empty()) return;
  shapes_.erase(shape);
  Group& g = group->second;
  g.units.erase(g.units.find(job.shape.units));
  g.replicas.erase(g.replicas.find(job.shape.replicas));
  g.cpu_milli.erase(g.cpu_milli.find(job.shape.cpu_milli));
  g.memory_mib.erase(g.memory_mib.find(job.shape.memory_mib));
  if (g.jobs.empty()) groups_.erase(group);
}

bool WaitingJobs::AllFail(const Fails& fails) const {
  std::optional<ShapeKey> from;
  return AllFailFrom(fails, &from);
}

bool WaitingJobs::AllFailFrom(const Fails& fails, std::optional<ShapeKey>* from) const {
  std::optional<std::pair<int, int>> in_group;
  auto it = *from ? shapes_.lower_bound(**from) : shapes_.begin();
  while (it != shapes_.end()) {
    const auto& [cls, priority, units, replicas, cpu, memory] = it->first;
    if (in_group != std::pair{cls, priority}) {
      in_group = {cls, priority};
      const Group& g = groups_.at(*in_group);
      const ShapeSize least{*g.units.begin(), *g.replicas.begin(), *g.cpu_milli.begin(),
                            *g.memory_mib.begin()};
      if (fails(cls, least, priority, g.jobs.begin()->first)) {  // the whole group: on past it
        it = shapes_.upper_bound({cls, priority, INT_MAX, INT_MAX, INT64_MAX, INT64_MAX});
        continue;
      }
    }
    const ShapeSize size{units, replicas, cpu, memory};
    if (!fails(cls, size, priority, it->second.begin()->first)) {
      *from = it->first;
      return false;
    }
    ++it;
  }
  if (!shapes_.empty()) *from = shapes_.rbegin()->first;  // the next call asks only the last
  return true;
}

void WaitingJobs::ForEachShape(const std::function<bool(int id)>& visit) const {
  for (const auto& [key, jobs] : shapes_)
    for (const auto& [submit, id] : jobs)
      if (!visit(id)) break;
}

CycleOrder::CycleOrder(std::vector<QueueView> queues, const ResourceVector& capacity,
                       PriorityOf priority_of, Skip skip)
    : views_(std::move(queues)),
      capacity_(capacity),
      priority_of_(std::move(priority_of)),
      skip_(std::move(skip)),
      queues_(views_.size()) {
  for (size_t q = 0; q < queues_.size(); ++q) {
    if (!views_[q].waiting) continue;
    const int users = static_cast<int>(views_[q].waiting->users_.size());
    queues_[q].offered.resize(users);
    for (int u = 0; u < users; ++u)
      if (std::optional<Head> head = HeadOf(static_cast<int>(q), u)) queues_[q].heads.push(*head);
  }
}

std::optional<CycleOrder::Head> CycleOrder::HeadOf(int queue, int user, const Head* until) {
  const WaitingJobs& waiting = *views_[queue].waiting;
  const auto& levels = waiting.users_[user];
  PerQueue& pq = queues_[queue];
  const double share = DominantShare((*views_[queue].users)[user], capacity_);
  auto head_at = [&](int priority, WaitingJobs::Jobs::const_iterator it) {
    const auto& [submit, id] = it->first;
    return Head{-priority_of_(priority, submit), share, submit, id, user, priority};
  };
  // The best of the user's priority levels, and the best of the others (kLast: none).
  Head best = kLast, second = kLast;
  const WaitingJobs::Jobs* jobs = nullptr;
  WaitingJobs::Jobs::const_iterator next;
  for (const auto& [priority, level] : levels) {
    auto first = level.begin();
    if (auto last = pq.offered[user].find(priority); last != pq.offered[user].end()) {
      PerQueue::Offered& o = last->second;
      if (o.changes != waiting.changes_) o = {o.last, level.upper_bound(o.last), waiting.changes_};
      first = o.next;
    }
    if (first == level.end()) continue;
    const Head head = head_at(priority, first);
    if (head < best) {
      second = best;
      best = head;
      jobs = &level;
      next = first;
    } else if (head < second) {
      second = head;
    }
  }
  if (!jobs) return std::nullopt;
  if (until && skip_) {
    // Jobs to skip whose turn it is (each comes before every other head, the user's other
    // levels' too) are offered here, to no effect, in one step each rather than a call of Next:
    // what Skip says of a job is asked when the job would be offered, as TryJob would be.
    const int priority = std::get<5>(best);
    auto offered = jobs->end();
    for (; next != jobs->end(); offered = next++) {
      best = head_at(priority, next);
      if (!(best < *until) || !(best < second)) break;
      const auto& [cls, raw, units, replicas, cpu, memory] = *next->second.shape;
      if (!skip_(std::get<3>(best), next->second.record, cls, {units, replicas, cpu, memory}, raw,
                 std::get<2>(best)))
        break;
    }
    if (offered != jobs->end())
      pq.offered[user][priority] = {offered->first, next, waiting.changes_};
    if (next == jobs->end() || second < best) best = second;
    if (best == kLast) return std::nullopt;
  }
  return best;
}

bool CycleOrder::Offered(int queue, const WaitingJobs::Job& job) const {
  const PerQueue& pq = queues_[queue];
  if (job.user < 0 || static_cast<size_t>(job.user) >= pq.offered.size()) return false;
  auto last = pq.offered[job.user].find(job.priority);
  return last != pq.offered[job.user].end() &&
         WaitingJobs::Key{job.submit, job.id} <= last->second.last;
}

bool CycleOrder::AllFail(int queue, const WaitingJobs::Fails& fails) {
  PerQueue& pq = queues_[queue];
  const WaitingJobs& waiting = *views_[queue].waiting;
  if (pq.checked_adds != waiting.adds_) {  // a new shape may sort before the mark: start over
    pq.failing_below.reset();
    pq.checked_adds = waiting.adds_;
  }
  return waiting.AllFailFrom(fails, &pq.failing_below);
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
    queue_rank_.resize(queues_.size());
    for (size_t q = 0; q < queues_.size(); ++q) {
      const QueueView& view = views_[q];
      queue_rank_[q] = {view.usage->gpu >= view.fair_gpus,
                        DominantShare(*view.usage, capacity_) / view.weight};
    }
    stale_ = false;
  }
  while (true) {
    int pick = -1;
    for (size_t q = 0; q < queues_.size(); ++q)
      if (HasMore(static_cast<int>(q)) && (pick < 0 || queue_rank_[q] < queue_rank_[pick]))
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
    // line as it is now, past the jobs to skip that come before every other user's head.
    const std::optional<Head> now = HeadOf(pick, user, pq.heads.empty() ? &kLast : &pq.heads.top());
    if (!now) continue;
    if (*now != top) {
      pq.heads.push(*now);
      continue;
    }
    const int job = std::get<3>(top);
    pq.offered[user][std::get<5>(top)] = {{std::get<2>(top), job}, {}, UINT64_MAX};
    if (std::optional<Head> again = HeadOf(pick, user)) pq.heads.push(*again);
    return job;
  }
}

}  // namespace berth
