// The order in which one scheduling cycle tries pending jobs.
//
// Contract: the queue with the smallest weighted dominant share goes next (shares read again
// whenever the caller says usage changed, so a queue that starts a job in this cycle moves back);
// inside a queue, the job with the highest whole priority point (priority plus aging, in whole
// points: aging reorders by points, not by seconds of waiting), then the job of the user with the
// smallest dominant share (read live: DRF among users inside the cycle, not only across cycles),
// then the earliest submitted. Every pending job is offered once per cycle.
#pragma once

#include <cstddef>
#include <queue>
#include <tuple>
#include <vector>

#include "core/fairness.h"

namespace berth {

class CycleOrder {
 public:
  struct Entry {
    int job;
    int queue;
    int user;         // index into the queue's users
    double priority;  // whole points, aging included
    double submit;
    int index = 0;  // filled in: the entry's position in `pending`
  };
  // Live usage the order reads: per queue, its usage and weight, and its users' usage.
  struct QueueView {
    const ResourceVector* usage;
    double weight;
    const std::vector<ResourceVector>* users;
  };

  CycleOrder(std::vector<QueueView> queues, const ResourceVector& capacity,
             std::vector<Entry> pending);
  // The next job to try, as its index in `pending`, or -1 when every job was offered.
  int Next();
  // Queue usage changed (a job started or was told to stop): read the shares again.
  void UsageChanged() { stale_ = true; }

 private:
  // (-priority, user share, submit, job, user): smallest first.
  using Key = std::tuple<double, double, double, int, int>;
  struct PerQueue {
    std::vector<std::vector<Entry>> users;  // [user] jobs, best first
    std::vector<size_t> next;               // [user] the next job to offer
    std::priority_queue<Key, std::vector<Key>, std::greater<Key>> heads;
  };
  Key KeyOf(int queue, int user) const;

  std::vector<QueueView> views_;
  ResourceVector capacity_;
  std::vector<double> queue_share_;  // [queue] weighted dominant share, when not stale
  bool stale_ = true;
  std::vector<PerQueue> queues_;
};

}  // namespace berth
