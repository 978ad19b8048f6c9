// The order in which one scheduling cycle tries pending jobs.
//
// Contract: the queue with the smallest weighted dominant share goes next (shares read live, so
// a queue that starts a job in this cycle moves back); inside a queue, the job with the highest
// whole priority point (priority plus aging, rounded down: aging reorders by whole points, not by
// seconds of waiting), then the job of the user with the smallest dominant share (read live:
// DRF among users inside the cycle, not only across cycles), then the earliest submitted.
// Every pending job is offered once per cycle.
#pragma once

#include <functional>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

namespace berth {

class CycleOrder {
 public:
  struct Entry {
    int job;
    int queue;
    std::string user;
    double priority;  // effective priority (with aging)
    double submit;
  };
  // Shares are asked again whenever a choice could depend on them.
  using QueueShare = std::function<double(int queue)>;
  using UserShare = std::function<double(int queue, const std::string& user)>;

  CycleOrder(int queues, const std::vector<Entry>& pending, QueueShare queue_share,
             UserShare user_share);
  // The next job to try, or -1 when every job was offered.
  int Next();

 private:
  struct UserJobs {
    std::vector<Entry> jobs;  // best first
    size_t next = 0;
  };
  // (-whole priority point, user share, submit, job, user index): smallest first.
  using Key = std::tuple<double, double, double, int, int>;
  struct PerQueue {
    std::vector<UserJobs> users;
    std::vector<std::string> names;
    std::priority_queue<Key, std::vector<Key>, std::greater<Key>> heads;
  };
  Key KeyOf(int queue, int user) const;

  std::vector<PerQueue> queues_;
  QueueShare queue_share_;
  UserShare user_share_;
};

}  // namespace berth
