#include "core/queue_order.h"

#include <algorithm>
#include <cmath>

namespace berth {

CycleOrder::CycleOrder(int queues, const std::vector<Entry>& pending, QueueShare queue_share,
                       UserShare user_share)
    : queues_(static_cast<size_t>(queues)),
      queue_share_(std::move(queue_share)),
      user_share_(std::move(user_share)) {
  std::vector<std::map<std::string, int>> user_index(queues_.size());
  for (const Entry& e : pending) {
    PerQueue& q = queues_[e.queue];
    auto [it, added] = user_index[e.queue].emplace(e.user, static_cast<int>(q.users.size()));
    if (added) {
      q.users.emplace_back();
      q.names.push_back(e.user);
    }
    q.users[it->second].jobs.push_back(e);
  }
  for (size_t qi = 0; qi < queues_.size(); ++qi) {
    PerQueue& q = queues_[qi];
    for (UserJobs& u : q.users)
      std::sort(u.jobs.begin(), u.jobs.end(), [](const Entry& a, const Entry& b) {
        const double pa = std::floor(a.priority), pb = std::floor(b.priority);
        if (pa != pb) return pa > pb;
        if (a.submit != b.submit) return a.submit < b.submit;
        return a.job < b.job;
      });
    for (size_t u = 0; u < q.users.size(); ++u)
      q.heads.push(KeyOf(static_cast<int>(qi), static_cast<int>(u)));
  }
}

CycleOrder::Key CycleOrder::KeyOf(int queue, int user) const {
  const PerQueue& q = queues_[queue];
  const Entry& e = q.users[user].jobs[q.users[user].next];
  return {-std::floor(e.priority), user_share_(queue, q.names[user]), e.submit, e.job, user};
}

int CycleOrder::Next() {
  int pick = -1;
  double pick_share = 0;
  for (size_t q = 0; q < queues_.size(); ++q) {
    if (queues_[q].heads.empty()) continue;
    const double share = queue_share_(static_cast<int>(q));
    if (pick < 0 || share < pick_share) pick = static_cast<int>(q), pick_share = share;
  }
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
    UserJobs& u = q.users[user];
    const int job = u.jobs[u.next++].job;
    if (u.next < u.jobs.size()) q.heads.push(KeyOf(pick, user));
    return job;
  }
}

}  // namespace berth
