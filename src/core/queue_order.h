// The order in which one scheduling cycle tries pending jobs, and the index of pending jobs it
// walks.
//
// Contract: the queues below their fair share of GPUs go first (one the caller gives an
// infinite share, as it does a queue whose waiting jobs ask for no GPUs, counts as below), then
// the others; within each, the queue with the smallest weighted dominant share goes next (usage
// read again whenever the caller says it changed, so a queue that starts a job in this cycle
// moves back; the fair shares are the caller's, as of the cycle's start). The fair share is
// what reclaims restore: a queue at its share that took the last free GPUs ahead of one below
// it (whose dominant share may be CPU or memory) would lose them to that queue's reclaim in the
// next cycle, a job stopped for nothing. Inside a queue, the job with the highest whole
// priority point (priority plus aging, in whole points: aging reorders by points, not by seconds
// of waiting), then the job of the user with the smallest dominant share (read live: DRF among
// users inside the cycle, not only across cycles), then the earliest submitted. Every pending
// job is offered at most once per cycle.
//
// Deep queues: the index is kept between cycles, so a cycle walks it instead of sorting every
// waiting job. A job the caller says to skip (known to fail, owed nothing else) is taken as
// offered, to no effect, when its turn comes, without a call of Next: a shape that failed costs
// a step per waiting job, not a try. When the caller finds that every job left in a queue is
// known to fail this cycle (every shape waiting there is dominated by a failure: job_shape.h),
// it exhausts the queue, and from then on only the jobs it names (those holding or due a
// reservation) are still offered there. So a cycle costs about what it tries, not how many jobs
// wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "core/fairness.h"
#include "core/job_shape.h"

namespace berth {

struct JobRecord;

// One queue's pending jobs, kept between cycles: per user and raw priority, by submit time
// (within one raw priority an earlier submit has aged at least as far, so this is also the order
// of whole priority), and how many wait of each shape.
class WaitingJobs {
 public:
  struct Job {
    int id = -1;
    int user = 0;      // index into the queue's users
    int priority = 0;  // raw, before aging
    double submit = 0;
    int shape_class = -1;  // -1: never known to fail
    ShapeSize shape;
    JobRecord* record = nullptr;  // the caller's, handed back to Skip
  };

  // fails(shape_class, shape, raw priority, submit): whether a job of that shape submitted then
  // is known to fail. Failures dominate (job_shape.h): where it holds, it holds for every
  // shape of the class and raw priority at least as large in every dimension, submitted no
  // earlier.
  using Fails = std::function<bool(int, const ShapeSize&, int, double)>;

  // Remove takes the same Job that Add was given.
  void Add(const Job& job);
  void Remove(const Job& job);
  size_t size() const { return size_; }
  // Whether `fails(shape_class, shape, priority, oldest_submit)` holds for every shape waiting;
  // oldest_submit is that of the shape's earliest job (it gives the highest aging). Each group
  // of shapes (class and raw priority) is asked first at its least size in every dimension and
  // its oldest submit: where that fails, the whole group does, in one question.
  bool AllFail(const Fails& fails) const;
  // Calls `visit(id)` on the jobs of each shape (shape class, raw priority and size), earliest
  // submitted first, until it returns false; then goes on with the next shape. Jobs of one
  // shape fare alike, so a caller looking for candidates needs only the first of each.
  void ForEachShape(const std::function<bool(int id)>& visit) const;

 private:
  friend class CycleOrder;
  using Key = std::pair<double, int>;  // (submit, id)
  // (shape class, raw priority, units, replicas, cpu, memory)
  using ShapeKey = std::tuple<int, int, int, int, int64_t, int64_t>;
  static ShapeKey ShapeOf(const Job& job);
  // Whether fails(...) holds for every shape from `*from` on (nullopt: from the first); moves
  // `*from` to the first shape for which it does not, or to the last shape.
  bool AllFailFrom(const Fails& fails, std::optional<ShapeKey>* from) const;

  // [user][raw priority]: each job with its shape (a key of shapes_, which outlives the job), so
  // a walk can tell a job to skip without looking it up.
  struct Entry {
    const ShapeKey* shape;
    JobRecord* record;
  };
  using Jobs = std::map<Key, Entry>;
  std::vector<std::map<int, Jobs>> users_;
  std::map<ShapeKey, std::set<Key>> shapes_;
  // Per (shape class, raw priority): its jobs, and the sizes of its shapes by dimension, so that
  // AllFail may ask once for the whole group, at its least size in every dimension and its
  // oldest submit (every shape of it is at least that large and no older).
  struct Group {
    std::set<Key> jobs;
    std::multiset<int> units, replicas;
    std::multiset<int64_t> cpu_milli, memory_mib;
  };
  std::map<std::pair<int, int>, Group> groups_;
  size_t size_ = 0;
  uint64_t adds_ = 0;     // jobs added so far: a shape new since a check has not been checked
  uint64_t changes_ = 0;  // jobs added or removed so far: iterators kept since are not trusted
};

class CycleOrder {
 public:
  // Live state the order reads: per queue, its usage and weight, its users' usage, its
  // waiting jobs (nullptr: the queue sits this pass out), and its fair share of GPUs.
  struct QueueView {
    const ResourceVector* usage;
    double weight;
    const std::vector<ResourceVector>* users;
    const WaitingJobs* waiting;
    double fair_gpus = std::numeric_limits<double>::infinity();
  };
  // A job's whole priority from its raw priority and submit time.
  using PriorityOf = std::function<double(int priority, double submit)>;
  // Whether offering a job (id, its record, shape class, shape, raw priority, submit) now would
  // do nothing the caller cannot do at once. Asked when the job's turn comes (where Next would
  // return it); a job it says yes to counts as offered, and Next goes on past it.
  using Skip = std::function<bool(int id, JobRecord* record, int shape_class,
                                  const ShapeSize& shape, int priority, double submit)>;

  CycleOrder(std::vector<QueueView> queues, const ResourceVector& capacity, PriorityOf priority_of,
             Skip skip = nullptr);
  // The next job to try (its id), or -1 when every job was offered.
  int Next();
  // Queue usage changed (a job started or was told to stop): read the shares again.
  void UsageChanged() { stale_ = true; }
  // Every job still to come in `queue` is known to fail: offer only those of `still` not
  // offered yet, in the order given. Once per queue and cycle: later calls change nothing.
  void Exhaust(int queue, std::vector<WaitingJobs::Job> still);
  bool exhausted(int queue) const { return queues_[queue].exhausted; }
  // WaitingJobs::AllFail for `queue`, where what is known to fail only grows (as for Skip): a
  // shape found failing is not asked about again, so the calls of a pass cost about the shapes
  // waiting, not shapes times calls.
  bool AllFail(int queue, const WaitingJobs::Fails& fails);

 private:
  // (-whole priority, user share, submit, job, user, raw priority): smallest first.
  using Head = std::tuple<double, double, double, int, int, int>;
  static constexpr Head kLast{std::numeric_limits<double>::infinity(), 0, 0, 0, 0, 0};  // after all
  struct PerQueue {
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;  // one per user
    // (user, priority) -> the last job offered, and where the next one stands as of
    // waiting->changes_ == `changes` (it saves a cold search per head in a deep queue).
    struct Offered {
      WaitingJobs::Key last;
      WaitingJobs::Jobs::const_iterator next;
      uint64_t changes = UINT64_MAX;
    };
    std::vector<std::map<int, Offered>> offered;         // [user] by raw priority
    std::optional<WaitingJobs::ShapeKey> failing_below;  // AllFail: every shape before fails
    uint64_t checked_adds = 0;                           // waiting->adds_ when it was set
    bool exhausted = false;
    std::vector<WaitingJobs::Job> still;
    size_t next_still = 0;
  };
  // The user's next job not offered yet, over its priorities. With `until` (the best other
  // user's head), jobs to skip whose turn it is are offered on the way.
  std::optional<Head> HeadOf(int queue, int user, const Head* until = nullptr);
  bool Offered(int queue, const WaitingJobs::Job& job) const;
  bool HasMore(int queue) const;

  std::vector<QueueView> views_;
  ResourceVector capacity_;
  PriorityOf priority_of_;
  Skip skip_;
  // [queue] (at or above its fair share, weighted dominant share), when not stale
  std::vector<std::pair<bool, double>> queue_rank_;
  bool stale_ = true;
  std::vector<PerQueue> queues_;
};

}  // namespace berth
