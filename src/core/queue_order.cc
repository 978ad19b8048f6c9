#include "core/queue_order.h"

#include <algorithm>

namespace berth {

CycleOrder::CycleOrder(std::vector<QueueView> queues, const ResourceVector& capacity,
                       std::vector<Entry> pending)
    : views_(std::move(queues)), capacity_(capacity), queues_(views_.size()) {
  for (size_t q = 0; q < queues_.size(); ++q) {
    queues_[q].users.resize(views_[q].users->size());
    queues_[q].next.assign(views_[q].users->size(), 0);
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    pending[i].index = static_cast<int>(i);
    queues_[pending[i].queue].users[pending[i].user].push_back(pending[i]);
  }
  for (size_t q = 0; q < queues_.size(); ++q) {
    PerQueue& pq = queues_[q];
    for (size_t u = 0; u < pq.users.size(); ++u) {
      std::vector<Entry>& jobs = pq.users[u];
      if (jobs.empty()) continue;
      std::sort(jobs.begin(), jobs.end(), [](const Entry& a, const Entry& b) {
        if (a.priority != b.priority) return a.priority > b.priority;
        if (a.submit != b.submit) return a.submit < b.submit;
        return a.job < b.job;
      });
      pq.heads.push(KeyOf(static_cast<int>(q), static_cast<int>(u)));
    }
  }
}

CycleOrder::Key CycleOrder::KeyOf(int queue, int user) const {
  const PerQueue& q = queues_[queue];
  const Entry& e = q.users[user][q.next[user]];
  const double share = DominantShare((*views_[queue].users)[user], capacity_);
  return {-e.priority, share, e.submit, e.job, user};
}

int CycleOrder::Next() {
  if (stale_) {
    queue_share_.resize(queues_.size());
    for (size_t q = 0; q < queues_.size(); ++q)
      queue_share_[q] = DominantShare(*views_[q].usage, capacity_) / views_[q].weight;
    stale_ = false;
  }
  int pick = -1;
  for (size_t q = 0; q < queues_.size(); ++q)
    if (!queues_[q].heads.empty() && (pick < 0 || queue_share_[q] < queue_share_[pick]))
      pick = static_cast<int>(q);
  if (pick < 0) return -1;
  PerQueue& q = queues_[pick];
  while (true) {
    const Key top = q.heads.top();
    q.heads.pop();
    const int user = std::get<4>(top);
    // A user whose share grew since the key was made goes back in line with its new share.
    const Key now = KeyOf(pick, user);
    if (now != top) {
      q.heads.push(now);
      continue;
    }
    const int index = q.users[user][q.next[user]++].index;
    if (q.next[user] < q.users[user].size()) q.heads.push(KeyOf(pick, user));
    return index;
  }
}

}  // namespace berth
