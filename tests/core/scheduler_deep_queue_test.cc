// Findings against the kept pending index and queue exhaustion (queue_order.h, scheduler.cc
// Schedule / TryJob, scheduler_pending.cc StillWorthTrying): each test is a behaviour the
// contract in scheduler.h asks for that the cycle over the kept index gets wrong.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "scheduler_driver.h"

namespace berth {
namespace {

using test::Driver;
using test::Job;
using test::Queue;

// Whether any job of `queue` runs or waits for victims it preempted.
bool Reclaiming(Driver& d, const std::string& queue) {
  for (const auto& [id, j] : d.s_.jobs())
    if (j.spec.queue == queue && (j.state == JobState::kRunning ||
                                  (j.state == JobState::kPending && !j.waiting_for.empty())))
      return true;
  return false;
}

// Shares settle: queue a's fair share grows when queue c's demand goes away (a pending job
// cancelled: nothing frees capacity, so the engine's version stays). X, which failed when a's
// share was too small, is skipped as unchanged (as before the change); a job submitted after,
// of X's very shape, must still be tried and reclaim a's share from b. The new cycle turns
// X's skip into a failure of the shape, so the fresh job is skipped too and a never gets its
// share while b keeps all 16 GPUs.
TEST(SchedulerDeepQueueTest, AFreshJobReclaimsAGrownFairShareThoughAnOlderJobOfItsShapeFailed) {
  Driver d(2, 2, {Queue("a"), Queue("b"), Queue("c")});
  for (int i = 0; i < 16; ++i) d.Submit(Job("b", 1, "bee"));
  d.Cycle();
  ASSERT_EQ(d.Running("b"), 16);
  JobSpec gang = Job("c", 8, "sea");  // 16 GPUs, more than c's share: c cannot reclaim
  gang.groups[0].replicas = 2;
  const int c = d.Submit(gang);
  const int x = d.Submit(Job("a", 8, "ay"));
  d.Cycle();  // shares 16/3 each: neither x nor c may reclaim
  ASSERT_TRUE(d.J(x).waiting_for.empty());
  ASSERT_FALSE(Reclaiming(d, "a"));
  d.s_.Finish(c, d.now_, JobEnd::kCancelled);  // a's share is 8 now
  const int y = d.Submit(Job("a", 8, "ay"));
  for (int i = 0; i < 5; ++i) d.Cycle();
  EXPECT_TRUE(Reclaiming(d, "a")) << "x: " << d.J(x).reason << "; y: " << d.J(y).reason;
}

// Nothing starves: a job that fits the empty cluster and has waited reserve_after_s gets a
// reservation (oldest first, up to max_reservations). Once every shape waiting in its queue
// failed, the cycle offers only the first 64 long-waiting jobs of the pending list; when those
// are jobs no reservation can be planned for (here: they select a cordoned node), the job
// behind them is never offered, never reserves, and starves behind a stream of small jobs.
TEST(SchedulerDeepQueueTest, AStarvingJobBehind64UnreservableOlderJobsStillGetsAReservation) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(3, 2, {Queue("a")}, policy);
  d.Handle(d.s_.SetNodeCordoned(2, true, d.now_));
  // zed holds most of the CPU (a high dominant share): its jobs come after the stream users'.
  JobSpec cpu = Job("a", 0, "zed");
  cpu.groups[0].replicas = 2;
  cpu.groups[0].demand.cpu_milli = 120000;
  d.Submit(cpu);
  // Two users keep the 16 schedulable GPUs busy with short jobs, a few always waiting (each
  // waits well under reserve_after_s, so none of them is due a reservation).
  int next = 0;
  auto stream = [&](const std::string& user) { d.Submit(Job("a", 1, user), 15 + (next++ % 10)); };
  for (int i = 0; i < 12; ++i) {
    stream("s1");
    stream("s2");
  }
  d.on_finish_ = [&](int id) {
    const std::string user = d.J(id).spec.user;
    if (user == "s1" || user == "s2") stream(user);
  };
  d.Cycle();
  ASSERT_EQ(d.Running("a"), 17);
  // 64 jobs older than the big one that no reservation can be planned for: only the cordoned
  // node has their label.
  for (int i = 0; i < 64; ++i) {
    JobSpec blocked = Job("a", 1, "blk");
    blocked.groups[0].node_selector["rack"] = "rack-1";
    d.Submit(blocked);
  }
  const int big = d.Submit(Job("a", 8, "zed"), 10);
  for (int i = 0; i < 300 && d.J(big).state == JobState::kPending; ++i) d.Cycle(1);
  EXPECT_NE(d.J(big).state, JobState::kPending) << d.J(big).reason;
}

// A failed shape passes over only the jobs it covers. Two GPUs are free: the jobs of 3 GPUs
// and more fail (the smallest of them first or not, depending on where it stands) and the
// hundreds behind them are skipped; a 2-GPU job that asks far more memory than any of them
// (so larger on one dimension, smaller on another) still starts in the same cycle, whichever
// user it belongs to and however deep it stands.
TEST(SchedulerDeepQueueTest, AJobSmallerThanEveryFailureOnOneDimensionStillStarts) {
  Driver d(1, 1, {Queue("a")});
  d.Submit(Job("a", 6, "hog"));
  d.Cycle();
  ASSERT_EQ(d.Running("a"), 1);
  for (int i = 0; i < 300; ++i) {
    JobSpec spec = Job("a", 3 + i % 6, "u" + std::to_string(i % 7));
    spec.groups[0].demand.memory_mib = 16 * 1024;
    d.Submit(spec);
  }
  JobSpec wide = Job("a", 2, "u3");
  wide.groups[0].demand.memory_mib = 256 * 1024;
  const int fits = d.Submit(wide);
  d.Cycle();
  EXPECT_EQ(d.J(fits).state, JobState::kRunning) << d.J(fits).reason;
  EXPECT_EQ(d.Running("a"), 2);
}

// Work conservation under a deep queue of many shapes (1-8 GPUs, several CPU and memory sizes,
// a few users, over `queues`), for `cycles` cycles with arrivals between them: after every
// cycle, no pending job fits anywhere (a dry run on each node finds none), so no job that a try
// would have placed was skipped as known to fail. Returns how many jobs started guaranteed.
int RunConservingWork(Driver& d, const std::vector<std::string>& queues, unsigned seed, int waiting,
                      int cycles) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto submit = [&] {
    const std::string& queue = queues[pick(0, static_cast<int>(queues.size()) - 1)];
    JobSpec spec = Job(queue, pick(1, 8), "u" + std::to_string(pick(0, 5)));
    spec.groups[0].demand.cpu_milli = 8000 * pick(1, 8);
    spec.groups[0].demand.memory_mib = 128 * 1024 * pick(1, 8);
    d.Submit(spec, pick(1, 4));
  };
  std::vector<int> nodes;
  for (int n = 0; n < static_cast<int>(d.cluster_.nodes.size()); ++n) nodes.push_back(n);
  for (int i = 0; i < waiting; ++i) submit();
  int guaranteed_starts = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const std::vector<Decision> decisions = d.s_.Schedule(d.now_);
    for (const Decision& decision : decisions)
      if (decision.kind == Decision::Kind::kStart && !d.J(decision.job).borrowed)
        ++guaranteed_starts;
    d.Handle(decisions);
    d.Check();
    for (size_t q = 0; q < queues.size(); ++q)
      for (int id : d.s_.pending(static_cast<int>(q))) {
        // A waiting preemptor holds its plan: it reclaimed its guarantee instead of borrowing
        // another VC's lent GPUs, and starts as its victims stop.
        if (d.J(id).committed_gpus > 0) continue;
        for (const NodeVerdict& v : d.s_.Evaluate(d.J(id).spec, nodes))
          EXPECT_FALSE(v.feasible)
              << "cycle " << cycle << ": job " << id << " of queue " << queues[q] << " ("
              << d.J(id).spec.groups[0].demand.gpus << " GPUs) fits node " << v.node
              << " but waits: " << d.J(id).reason;
      }
    for (int i = 0; i < waiting / 25; ++i) submit();
    d.Cycle(1);  // nothing starts at this cycle's time: its jobs run on, some end meanwhile
  }
  return guaranteed_starts;
}

// One queue, one priority, no reservations: nothing else holds a job back.
TEST(SchedulerDeepQueueTest, AfterEveryCycleNoPendingJobFitsAnywhere) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 1e9;
  Driver d(4, 4, {Queue("a")}, policy);
  RunConservingWork(d, {"a"}, 5, 150, 12);
}

// The same with guarantees: queues a and b have guarantee room now and then (their guaranteed
// jobs end), most of their waiting shapes are too large for it, and c only borrows. The
// guarantee pass may end a queue's walk at shapes too large for its guarantee room or with no
// guaranteed cells to fit; the jobs it passes over that fit anywhere must still start, in the
// same cycle, in the pass that borrows.
TEST(SchedulerDeepQueueTest, WithGuaranteesAfterEveryCycleNoPendingJobFitsAnywhere) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 1e9;
  Driver d(6, 2, {Queue("a", 2), Queue("b", 1), Queue("c")}, policy);
  // The guarantees were used, not only the borrowing pass.
  EXPECT_GT(RunConservingWork(d, {"a", "b", "c"}, 9, 300, 30), 30);
}

}  // namespace
}  // namespace berth
