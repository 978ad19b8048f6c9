// The engine cycle after cycle: each test here reproduces one way the engine went wrong over
// many cycles (issue 9's bugs 1, 2, 3, 6 and 8), driven the way an adapter drives it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "core/scheduler.h"
#include "core/synthetic_cluster.h"
#include "scheduler_driver.h"

namespace berth {
namespace {

using test::Driver;
using test::Elastic;
using test::Job;
using test::Queue;

// Bug 1: the free GPUs of a preemptor's plan were not held for it, so another job took them
// during the victim's grace period, and the preemptor preempted that one, forever.
TEST(SchedulerOverTimeTest, APreemptorsPlannedFreeGpusAreHeldForIt) {
  Driver d(1, 1, {Queue("a"), Queue("b", 1)});
  const int a1 = d.Submit(Job("a", 4));
  d.Cycle();
  ASSERT_EQ(d.J(a1).state, JobState::kRunning);
  const int b1 = d.Submit(Job("b", 8));
  d.Cycle();
  EXPECT_EQ(d.J(a1).state, JobState::kStopping);
  const int a2 = d.Submit(Job("a", 4));
  for (int i = 0; i < 200; ++i) d.Cycle(5);
  EXPECT_EQ(d.J(b1).state, JobState::kRunning);
  EXPECT_EQ(d.preempted_[a1], 1);
  EXPECT_EQ(d.preempted_[a2], 0);
  EXPECT_EQ(d.starts_[b1], 1);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 1);
}

// A job of `queue` with a priority and a grace period.
JobSpec Ranked(const std::string& queue, int gpus, int priority, double grace,
               bool preemptible = true) {
  JobSpec spec = Job(queue, gpus);
  spec.priority = priority;
  spec.grace_period_s = grace;
  spec.preemptible = preemptible;
  return spec;
}

// Why `job`'s plan was displaced, each time it was.
std::vector<std::string> Displaced(Driver& d, int job) {
  std::vector<std::string> told;
  for (const EngineEvent& e : d.s_.EventsSince(0))
    if (e.job == job && e.kind == "plan-displaced") told.push_back(e.reason);
  return told;
}

// A borrower's plan yields to other queues' guaranteed work (reservation.h). Such work that
// starts on its free GPUs ends the plan there and then, saying so: the preemptor kept the rest of
// its plan reserved until its victim stopped, then found it broken with nothing saying why (the
// dynamics test's seed 588).
TEST(SchedulerOverTimeTest, GuaranteedWorkOnABorrowersPlanDisplacesItAtOnce) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1), Queue("c", 1)});
  // b's guaranteed node holds a slow victim (half of it); the other node is free.
  const int low = d.Submit(Ranked("b", 4, 0, 1000));
  d.Cycle();
  ASSERT_EQ(d.J(low).state, JobState::kRunning);
  ASSERT_FALSE(d.J(low).borrowed);
  // A gang of three 4-GPU replicas, more than b's guarantee: borrowed, it may not use the idle
  // half of b's own node, so it plans over b's node (the slow victim and the free half) and
  // half the other node.
  JobSpec gang = Ranked("b", 4, 9, 30);
  gang.groups[0].replicas = 3;
  const int high = d.Submit(gang);
  d.Cycle(0);
  ASSERT_EQ(d.J(low).state, JobState::kStopping) << d.J(high).reason;
  ASSERT_NE(d.s_.reservations().Of(high), nullptr);
  ASSERT_TRUE(d.s_.reservations().Of(high)->yields);
  // c's guaranteed work: the other node, whole.
  const int guaranteed = d.Submit(Ranked("c", 8, 0, 30));
  d.Cycle(0);
  ASSERT_EQ(d.J(guaranteed).state, JobState::kRunning) << d.J(guaranteed).reason;
  ASSERT_FALSE(d.J(guaranteed).borrowed);
  EXPECT_EQ(d.s_.reservations().Of(high), nullptr);
  EXPECT_EQ(Displaced(d, high),
            std::vector<std::string>{"its reserved GPUs went to guaranteed job " +
                                     std::to_string(guaranteed)});
  // The gang no longer fits: nobody is preempted for it again.
  for (int i = 0; i < 3000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(low).state, JobState::kRunning);
  EXPECT_EQ(d.J(guaranteed).state, JobState::kRunning);
  EXPECT_EQ(d.J(high).state, JobState::kPending);
  EXPECT_EQ(d.preempted_[low], 1);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 1);
}

// Queue b (guaranteed one node) runs a slow victim on half its node, and queue a a job nobody
// may preempt on half the other; a borrowed gang of b of 3 x 4 GPUs at priority 9 then plans
// over the victim, the free half of b's node and the free half of the other.
void PlanOverAGuaranteedVictim(Driver& d, int* low, int* high) {
  *low = d.Submit(Ranked("b", 4, 0, 1000));
  d.Cycle();
  d.Submit(Ranked("a", 4, 0, 30, false));
  d.Cycle();
  JobSpec gang = Ranked("b", 4, 9, 30);
  gang.groups[0].replicas = 3;
  *high = d.Submit(gang);
  d.Cycle(0);
  ASSERT_EQ(d.J(*low).state, JobState::kStopping) << d.J(*high).reason;
  ASSERT_TRUE(d.s_.reservations().Of(*high) && d.s_.reservations().Of(*high)->yields);
}

// The same queue's guaranteed work of lower priority waits for the plan: else the plan's
// victims, once stopped, started again on its GPUs as guaranteed work, and were preempted for it
// again, forever.
TEST(SchedulerOverTimeTest, APlansOwnQueueDoesNotTakeItsGpusBack) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  int low = -1, high = -1;
  ASSERT_NO_FATAL_FAILURE(PlanOverAGuaranteedVictim(d, &low, &high));
  const int other = d.Submit(Ranked("b", 2, 0, 30));  // b's guaranteed work, lower priority
  for (int i = 0; i < 3000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(high).state, JobState::kRunning) << d.J(high).reason;
  EXPECT_EQ(d.starts_[high], 1);
  EXPECT_EQ(d.preempted_[low], 1);
  EXPECT_EQ(d.preempted_[other], 0);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 1);
}

// Its own queue's guaranteed work of higher priority does not wait for the plan (the plan's
// victims are all below its owner, so this one is none of them): it starts at once on the
// plan's GPUs, and the plan ends, saying so.
TEST(SchedulerOverTimeTest, APlansOwnQueueOfHigherPriorityPassesIt) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  int low = -1, high = -1;
  ASSERT_NO_FATAL_FAILURE(PlanOverAGuaranteedVictim(d, &low, &high));
  const int urgent = d.Submit(Ranked("b", 4, 20, 30));  // b's guaranteed work, above the plan
  d.Cycle(0);
  ASSERT_EQ(d.J(urgent).state, JobState::kRunning) << d.J(urgent).reason;
  ASSERT_FALSE(d.J(urgent).borrowed);
  EXPECT_EQ(d.s_.reservations().Of(high), nullptr);
  EXPECT_EQ(Displaced(d, high),
            std::vector<std::string>{"its reserved GPUs went to guaranteed job " +
                                     std::to_string(urgent)});
  // The gang no longer fits even with its victim gone: nobody is preempted for it again.
  for (int i = 0; i < 3000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(urgent).state, JobState::kRunning);
  EXPECT_EQ(d.J(high).state, JobState::kPending);
  EXPECT_EQ(d.starts_[urgent], 1);
  EXPECT_EQ(d.preempted_[low], 1);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 1);
}

// Two preemptors plan on one node: the first on the half its victim holds, the second on the
// other half (freed since) and a slow victim elsewhere. When the first one's victim stops, the
// whole node is free, and its best-fit cell may be the half reserved for the second: the first
// must still start, on its own half, not give up with every GPU of its plan free (its victim
// stopped for nothing).
TEST(SchedulerOverTimeTest, APreemptorStartsOnItsPlanBesideAnotherPreemptorsFreeGpus) {
  std::set<int> halves;  // the fast victim's first GPU, over both runs: both halves are tried
  for (bool fast_first : {true, false}) {
    SCOPED_TRACE(fast_first ? "the fast victim placed first" : "the fast victim placed second");
    Driver d(2, 2, {Queue("a")});
    auto job = [](int gpus, int priority, double grace, bool preemptible = true) {
      JobSpec spec = Job("a", gpus);
      spec.priority = priority;
      spec.grace_period_s = grace;
      spec.preemptible = preemptible;
      return spec;
    };
    auto on = [&](int id) { return d.J(id).placements.front().node; };
    auto cordon = [&](int node, bool cordoned) {
      d.Handle(d.s_.SetNodeCordoned(node, cordoned, d.now_));
    };
    // Node 0: a slow victim on one half, a job nobody may preempt on the other.
    cordon(1, true);
    const int slow = d.Submit(job(4, 0, 1000));
    d.Submit(job(4, 0, 30, false));
    d.Cycle();
    // Node 1: the fast victim on one half, a job nobody may preempt on the other.
    cordon(0, true);
    cordon(1, false);
    int fast = -1, blocker = -1;
    for (bool fast_now : {fast_first, !fast_first}) {
      (fast_now ? fast : blocker) = d.Submit(job(4, fast_now ? 6 : 0, fast_now ? 3 : 30, fast_now));
      d.Cycle();
    }
    ASSERT_EQ(on(slow), 0);
    ASSERT_EQ(on(fast), 1);
    halves.insert(d.J(fast).placements.front().gpus.front());
    // The first preemptor (node 0 still cordoned) plans the fast victim's half.
    const int first = d.Submit(job(4, 9, 30));
    d.Cycle(0);
    ASSERT_EQ(d.J(fast).state, JobState::kStopping) << d.J(first).reason;
    // The other half frees; the second, a gang, plans it and the slow victim's half of node 0.
    d.s_.Finish(blocker, d.now_);
    cordon(0, false);
    JobSpec gang = job(4, 5, 30);
    gang.groups[0].replicas = 2;
    const int second = d.Submit(gang);
    d.Cycle(0);
    ASSERT_EQ(d.J(slow).state, JobState::kStopping);
    ASSERT_EQ(d.J(first).state, JobState::kPending);
    for (int i = 0; i < 10; ++i) d.Cycle(1);
    EXPECT_EQ(d.J(first).state, JobState::kRunning) << d.J(first).reason;
    EXPECT_EQ(on(first), 1);
    EXPECT_EQ(d.J(second).state, JobState::kPending);  // its slow victim is still stopping
    EXPECT_EQ(d.J(slow).state, JobState::kStopping);
    EXPECT_EQ(d.preempted_[fast], 1);
  }
  EXPECT_EQ(halves, (std::set<int>{0, 4}));
}

// The same inside one PCIe switch of four GPUs, where a replica of two is no cell of its own:
// a fresh placement's candidate in the switch is its first free GPUs, which were the other
// preemptor's plan (a break-it review's reproduction). The preemptor starts exactly on its plan.
TEST(SchedulerOverTimeTest, APreemptorStartsOnItsPlanInsideASwitchAnotherPlanShares) {
  const Cluster cluster = ParseClusterYaml(R"(name: pcie
gpuModels:
  - {name: A100-80GB, memoryMiB: 81920}
nodeShapes:
  s:
    gpuModel: A100-80GB
    sockets:
      - {cpus: "0-63", memoryMiB: 1048576, switches: [4]}
      - {cpus: "64-127", memoryMiB: 1048576, switches: [4]}
nodes:
  - {namePrefix: n-, count: 2, shape: s}
)",
                                           "pcie.yaml");
  Policy policy;
  ASSERT_TRUE(BuiltinPolicy("bestfit", &policy));
  Driver d(cluster, {Queue("a")}, policy);
  auto job = [](int gpus, int priority, double grace, bool preemptible) {
    JobSpec spec = Job("a", gpus);
    spec.priority = priority;
    spec.grace_period_s = grace;
    spec.preemptible = preemptible;
    return spec;
  };
  constexpr double kLong = 36000;
  d.Submit(job(4, 0, 30, false), kLong);                    // n-0: one switch
  const int blocker = d.Submit(job(2, 0, 30, false), 100);  // n-0: half the other
  d.Cycle();
  const int fast = d.Submit(job(2, 0, 300, true), kLong);  // n-0: its other half
  d.Cycle();
  d.Submit(job(4, 0, 30, false), kLong);  // n-1 the same, with a slow victim
  d.Submit(job(2, 0, 30, false), kLong);
  d.Cycle();
  const int slow = d.Submit(job(2, 6, 1000, true), kLong);
  d.Cycle();
  ASSERT_EQ(d.J(fast).placements.front().node, 0);
  ASSERT_EQ(d.J(slow).placements.front().node, 1);
  for (int i = 0; i < 50; ++i) d.Cycle();
  // The first preemptor plans the fast victim's GPUs; once the blocker ends, the gang plans
  // the blocker's (the switch's first) and the slow victim's.
  const int first = d.Submit(job(2, 5, 30, true), 3600);
  d.Cycle();
  ASSERT_EQ(d.J(fast).state, JobState::kStopping);
  for (int i = 0; i < 100; ++i) d.Cycle();
  ASSERT_EQ(d.J(blocker).state, JobState::kDone);
  JobSpec gang = job(2, 9, 30, true);
  gang.groups[0].replicas = 2;
  const int second = d.Submit(gang, 3600);
  d.Cycle();
  ASSERT_EQ(d.J(slow).state, JobState::kStopping);
  for (int i = 0; i < 250; ++i) d.Cycle();  // past the fast victim's grace period
  EXPECT_EQ(d.J(first).state, JobState::kRunning) << d.J(first).reason;
  EXPECT_EQ(d.J(second).state, JobState::kPending);  // its slow victim is still stopping
  EXPECT_EQ(d.preempted_[fast], 1);
}

// Bug 2: reclaim read running usage only, so every pending job of the queue below its share
// preempted at once, and the shares flipped every cycle.
TEST(SchedulerOverTimeTest, FairShareReclaimSettlesAtWaterFilling) {
  Driver d(4, 4, {Queue("a", 0, 1), Queue("b", 0, 3)});
  for (int i = 0; i < 32; ++i) d.Submit(Job("a", 1));
  d.Cycle();
  ASSERT_EQ(d.Running("a"), 32);
  for (int i = 0; i < 32; ++i) d.Submit(Job("b", 1));
  for (int i = 0; i < 200; ++i) d.Cycle(5);
  EXPECT_EQ(d.Running("a"), 8);
  EXPECT_EQ(d.Running("b"), 24);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 24);
  for (const auto& [job, times] : d.preempted_) EXPECT_LE(times, 1) << job;
}

TEST(SchedulerOverTimeTest, GuaranteeReclaimTakesNoMoreThanTheGuarantee) {
  Driver d(4, 4, {Queue("a"), Queue("b", 1)});
  for (int i = 0; i < 32; ++i) d.Submit(Job("a", 1));
  d.Cycle();
  for (int i = 0; i < 16; ++i) d.Submit(Job("b", 1));
  for (int i = 0; i < 200; ++i) d.Cycle(5);
  // b's guarantee is one node (8 GPUs); its weight equals a's, so its fair share is 16: the 8
  // beyond the guarantee come by fair-share reclaim, and then nothing moves.
  EXPECT_EQ(d.Running("b"), 16);
  EXPECT_EQ(d.Running("a"), 16);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 16);
}

// Bug 3: a big job waited forever behind a stream of small ones; aging reordered but nothing
// reserved capacity for it.
TEST(SchedulerOverTimeTest, ABigJobGetsAReservationAndStartsWithinTheBound) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 600;
  Driver d(1, 1, {Queue("a")}, policy);
  const double small = 300;  // each small job runs 5 minutes
  for (int i = 0; i < 8; ++i) d.Submit(Job("a", 1), small);
  d.Cycle();
  const int big = d.Submit(Job("a", 8), 1000);
  const double submitted = d.now_;
  double started = -1;
  for (int i = 0; i < 2000 && started < 0; ++i) {
    // A steady stream: a new small job every 10 seconds, more than the node can run.
    if (i % 10 == 0) d.Submit(Job("a", 1), small);
    d.Cycle(1);
    if (d.J(big).state == JobState::kRunning) started = d.J(big).start_time;
  }
  ASSERT_GE(started, 0) << d.J(big).reason;
  // The bound of the header: reserve_after_s plus the longest run on its reserved GPUs.
  EXPECT_LE(started - submitted, policy.reserve_after_s + small + 2);
}

// A deep queue: the cycle stops walking a queue once every shape waiting there failed, yet the
// longest-waiting job, behind thousands in the cycle's order, still gets its reservation, and a
// job that fits is still found.
TEST(SchedulerOverTimeTest, ADeepQueueStillReservesForItsLongestWaitingJob) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(1, 1, {Queue("a")}, policy);
  for (int i = 0; i < 7; ++i) d.Submit(Job("a", 1, "busy"), 300);
  d.Cycle();
  const int big = d.Submit(Job("a", 8, "busy"), 100);
  // Another user's jobs go first (its share is 0), and none fits: 2 GPUs each, 1 GPU free.
  for (int i = 0; i < 3000; ++i) d.Submit(Job("a", 2, "other"), 100);
  const int fits = d.Submit(Job("a", 1, "other"), 100);
  d.Cycle();
  EXPECT_EQ(d.J(fits).state, JobState::kRunning);
  for (int i = 0; i < 61; ++i) d.Cycle(1);
  ASSERT_NE(d.s_.reservations().Of(big), nullptr) << d.J(big).reason;
  for (int i = 0; i < 400 && d.J(big).state != JobState::kRunning; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(big).state, JobState::kRunning) << d.J(big).reason;
}

// A job whose queue is at its cap could not start on GPUs reserved for it: it reserves none, so
// another queue's job takes the free node (before, the reservation was dropped and made again
// every cycle, and the other queue waited forever).
TEST(SchedulerOverTimeTest, AQueueAtItsCapReservesNothing) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  QueueSpec capped = Queue("a");
  capped.cap_gpus = 8;
  Driver d(2, 2, {capped, Queue("b")}, policy);
  // Small jobs of a keep its cap full, ending and coming back (each end wakes the big job).
  for (int i = 0; i < 8; ++i) d.Submit(Job("a", 1), 20 + i);
  d.on_finish_ = [&](int) { d.Submit(Job("a", 1), 20); };
  d.Cycle();
  const int big = d.Submit(Job("a", 8));
  for (int i = 0; i < 100; ++i) d.Cycle(1);
  EXPECT_EQ(d.s_.reservations().Of(big), nullptr) << d.J(big).reason;
  const int other = d.Submit(Job("b", 8));
  for (int i = 0; i < 3; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(other).state, JobState::kRunning) << d.J(other).reason;
}

// Guaranteed work passes a borrower's reservation. Two big borrowed jobs reserved half of the
// cluster each; a queue's guaranteed stream then kept landing on their GPUs, so neither ever
// started, and no other borrower could use the GPUs they held meanwhile (in a replay, most of
// the cluster idle for two days). Borrowers' reservations leave room for the guarantees their
// queues' work asks for, and are planned around guaranteed work (made anew when it lands on
// them): the first big job starts, and the second reserves only once it has.
TEST(SchedulerOverTimeTest, BorrowersReservationsLeaveRoomForTheGuarantees) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(4, 4, {Queue("g", 2), Queue("dev")}, policy);
  for (int i = 0; i < 32; ++i) d.Submit(Job("dev", 1), 200 + 10 * i);
  d.Cycle();
  JobSpec big = Job("dev", 8);
  big.groups[0].replicas = 2;
  const int first = d.Submit(big, 1000);
  const int second = d.Submit(big, 1000);
  bool both_reserved = false;
  int small_starts_while_reserved = 0;
  for (int i = 0; i < 20000 && d.J(second).state == JobState::kPending; ++i) {
    if (i % 40 == 0) d.Submit(Job("g", 1), 600);    // about 15 guaranteed GPUs busy
    if (i % 20 == 0) d.Submit(Job("dev", 1), 300);  // small borrowers, more than fit
    const int starts_before = d.count_[Decision::Kind::kStart];
    d.Cycle(1);
    const bool first_reserved = d.s_.reservations().Of(first) != nullptr;
    both_reserved = both_reserved || (first_reserved && d.s_.reservations().Of(second));
    if (first_reserved)
      small_starts_while_reserved += d.count_[Decision::Kind::kStart] - starts_before;
  }
  EXPECT_FALSE(both_reserved);
  ASSERT_NE(d.J(first).state, JobState::kPending) << d.J(first).reason;
  EXPECT_NE(d.J(second).state, JobState::kPending) << d.J(second).reason;
  EXPECT_LT(d.J(first).start_time, d.J(second).start_time);
  // Before, it had not started after 20000 s; now within its occupants' runs (up to 510 s).
  EXPECT_LE(d.J(first).start_time, 1000);
  EXPECT_GT(small_starts_while_reserved, 0);  // the GPUs outside its reservation stay in use
}

// Only work that could run inside a guarantee counts against borrowers' reservations: a
// guaranteed queue's one job that no node can hold (a review's reproduction) kept every
// borrower's big job from reserving, and a stream of small jobs starved it.
TEST(SchedulerOverTimeTest, WorkThatCannotUseAGuaranteeLeavesRoomForBorrowersReservations) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(4, 4, {Queue("g", 2), Queue("dev")}, policy);
  JobSpec nowhere = Job("g", 8);
  nowhere.groups[0].replicas = 2;
  nowhere.groups[0].node_selector = {{"zone", "nowhere"}};
  const int stuck = d.Submit(nowhere);
  for (int i = 0; i < 32; ++i) d.Submit(Job("dev", 1), 200 + 10 * i);
  d.Cycle();
  ASSERT_FALSE(d.J(stuck).never_fits.empty());
  JobSpec big = Job("dev", 8);
  big.groups[0].replicas = 3;
  const int id = d.Submit(big, 1000);
  for (int i = 0; i < 3000 && d.J(id).state == JobState::kPending; ++i) {
    if (i % 20 == 0) d.Submit(Job("dev", 1), 300);  // small borrowers, more than fit
    d.Cycle(1);
  }
  ASSERT_NE(d.J(id).state, JobState::kPending) << d.J(id).reason;
  // reserve_after_s, then the longest run on its reserved GPUs (up to 510 s).
  EXPECT_LE(d.J(id).start_time, 1 + policy.reserve_after_s + 510 + 1);
}

TEST(SchedulerOverTimeTest, AReservationDoesNotBlockHigherPriorityWork) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 0;
  Driver d(1, 1, {Queue("a"), Queue("b")}, policy);
  const int small = d.Submit(Job("a", 4), 100);
  d.Cycle();
  const int big = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_NE(d.s_.reservations().Of(big), nullptr);
  // Priorities order one queue's jobs: another queue's, however high, do not pass.
  JobSpec other = Job("b", 4);
  other.priority = 500;
  const int o = d.Submit(other);
  d.Cycle();
  EXPECT_EQ(d.J(o).state, JobState::kPending);
  JobSpec urgent = Job("a", 4);
  urgent.priority = 50;
  const int u = d.Submit(urgent);
  d.Cycle();
  EXPECT_EQ(d.J(u).state, JobState::kRunning);
  EXPECT_EQ(d.J(small).state, JobState::kRunning);
}

// Two nodes of queue a's work, fragmented: `small` (3 GPUs) on node 0, `other` (5) on node 1,
// 5 and 3 GPUs free. An 8-GPU job's reservation can only be made whole by moving `small`.
struct FragmentedForAMove {
  int small, other;
};
FragmentedForAMove LayOutForAMove(Driver& d) {
  const int ends = d.Submit(Job("a", 5), 10);
  d.Cycle();
  const int small = d.Submit(Job("a", 3));  // packed beside it, on node 0
  d.Cycle();
  const int other = d.Submit(Job("a", 5));  // node 1: 3 GPUs left there
  d.Cycle(20);
  EXPECT_EQ(d.J(ends).state, JobState::kDone);
  EXPECT_EQ(d.J(small).placements.at(0).node, 0);
  EXPECT_EQ(d.J(other).placements.at(0).node, 1);
  return {small, other};
}

// Under steady demand nothing ends: a reservation waiting for its occupants waits for ever
// while the GPUs they could use sit free on another node. After reserve_after_s more, the
// occupants are moved there (each once in its life), and the big job starts.
TEST(SchedulerOverTimeTest, AReservationsOccupantsMoveWhereTheyFitAndTheBigJobStarts) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(2, 2, {Queue("a")}, policy);
  const auto [small, other] = LayOutForAMove(d);
  ASSERT_FALSE(HasFailure());
  const int big = d.Submit(Job("a", 8));
  for (int i = 0; i < 70; ++i) d.Cycle(1);
  ASSERT_NE(d.s_.reservations().Of(big), nullptr) << d.J(big).reason;
  EXPECT_EQ(d.J(small).state, JobState::kRunning);  // no move before it has waited again
  for (int i = 0; i < 100 && d.J(big).state != JobState::kRunning; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(big).state, JobState::kRunning) << d.J(big).reason;
  EXPECT_EQ(d.J(big).placements.at(0).node, 0);
  for (int i = 0; i < 5; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(small).state, JobState::kRunning) << d.J(small).reason;
  EXPECT_EQ(d.J(small).placements.at(0).node, 1);
  EXPECT_EQ(d.J(small).preemptions, 1);
  EXPECT_EQ(d.J(other).preemptions, 0);
  bool said = false;
  for (const EngineEvent& e : d.s_.EventsSince(0))
    said = said || (e.job == small && e.reason.find("moved") != std::string::npos);
  EXPECT_TRUE(said);
  // Another big job finds no room; nobody is moved again for it, however long it waits.
  const int next = d.Submit(Job("a", 8));
  for (int i = 0; i < 1000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(next).state, JobState::kPending);
  EXPECT_EQ(d.J(small).preemptions, 1);
  EXPECT_EQ(d.J(other).preemptions, 0);
  EXPECT_EQ(d.J(big).preemptions, 0);
}

// A moved job stays counted in its queue where it goes only while that destination is held for
// it: cordoned while the job stops, the destination is let go, and so is the count (it stayed,
// shrinking what the queue could start or reclaim, for as long as nobody tried the job).
TEST(SchedulerOverTimeTest, AMovedJobWhoseDestinationIsLetGoIsNoLongerCounted) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(2, 2, {Queue("a")}, policy);
  const int small = LayOutForAMove(d).small;
  ASSERT_FALSE(HasFailure());
  const int big = d.Submit(Job("a", 8));
  for (int i = 0; i < 400 && d.J(small).state != JobState::kStopping; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(small).state, JobState::kStopping) << d.J(big).reason;
  ASSERT_EQ(d.J(small).destination.at(0).node, 1);
  ASSERT_GT(d.J(small).committed_gpus, 0);
  d.Handle(d.s_.SetNodeCordoned(1, true, d.now_));
  EXPECT_EQ(d.s_.reservations().Of(small), nullptr);
  for (int i = 0; i < 100 && d.J(small).state == JobState::kStopping; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(small).state, JobState::kPending) << d.J(small).reason;
  EXPECT_TRUE(d.J(small).destination.empty());
  EXPECT_EQ(d.J(small).committed_gpus, 0);
  double waiting = 0;
  for (const QueueStatus& q : d.s_.Queues()) waiting += q.committed_gpus - q.usage_gpus;
  EXPECT_NEAR(waiting, 0, 1e-9);  // nothing waits: big runs, nobody is counted twice
}

// A move needs every occupant to fit elsewhere now: with no room, the reservation waits.
TEST(SchedulerOverTimeTest, NoOccupantIsMovedWhenNotAllFitElsewhere) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(2, 2, {Queue("a")}, policy);
  const int a = d.Submit(Job("a", 6));
  const int b = d.Submit(Job("a", 6));
  d.Cycle();
  const int big = d.Submit(Job("a", 8));
  for (int i = 0; i < 500; ++i) d.Cycle(1);
  EXPECT_NE(d.s_.reservations().Of(big), nullptr);
  EXPECT_EQ(d.J(big).state, JobState::kPending);
  EXPECT_EQ(d.J(a).preemptions + d.J(b).preemptions, 0);
}

// Under steady demand a reservation on work that cannot move (another queue's, not preemptible)
// waits for ever: it is planned anew on GPUs whose occupants can all move, and the job starts
// there.
TEST(SchedulerOverTimeTest, AReservationOnWorkThatCannotMoveGoesWhereOccupantsCan) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(3, 3, {Queue("a"), Queue("b")}, policy);
  JobSpec fixed = Job("a", 8);
  fixed.preemptible = false;
  const int stays_put = d.Adopt(fixed, 0, {0, 1, 2, 3, 4, 5, 6, 7}, true);
  // One occupant on node 0; two on each of the others, which are the ones that can move.
  const int one = d.Adopt(Job("b", 1), 1, {0}, true);
  const int two = d.Adopt(Job("b", 1), 1, {1}, true);
  const int three = d.Adopt(Job("b", 3), 2, {0, 1, 2}, true);
  const int four = d.Adopt(Job("b", 2), 2, {3, 4}, true);
  const int big = d.Submit(Job("b", 8));
  for (int i = 0; i < 90; ++i) d.Cycle(1);
  const Reservations::Reservation* r = d.s_.reservations().Of(big);
  ASSERT_NE(r, nullptr) << d.J(big).reason;
  ASSERT_EQ(r->gpus.front().first, 0);  // the fewest occupants: the one that cannot move
  for (int i = 0; i < 200 && d.J(big).state != JobState::kRunning; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(big).state, JobState::kRunning) << d.J(big).reason;
  EXPECT_EQ(d.NodeOf(big), 1);
  for (int i = 0; i < 5; ++i) d.Cycle(1);
  for (int moved : {one, two}) {
    EXPECT_EQ(d.J(moved).state, JobState::kRunning) << d.J(moved).reason;
    EXPECT_EQ(d.NodeOf(moved), 2);
    EXPECT_EQ(d.J(moved).preemptions, 1);
  }
  for (int stays : {stays_put, three, four}) EXPECT_EQ(d.J(stays).preemptions, 0);
  // Steady from then on: nobody is stopped again.
  for (int i = 0; i < 1000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(one).preemptions + d.J(two).preemptions, 2);
  EXPECT_EQ(d.J(big).preemptions + d.J(stays_put).preemptions, 0);
}

// Only a chain of moves frees a node: the one job on node 1 fits nowhere else until another
// small job moves out of the node where it would fit. Both move, once; the big job starts.
TEST(SchedulerOverTimeTest, AReservationMovesAChainWhenOneMoveMakesRoomForAnother) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(3, 3, {Queue("a"), Queue("b")}, policy);
  auto fixed = [](JobSpec spec) {
    spec.preemptible = false;
    return spec;
  };
  // Node 0: everything fixed but GPU 7. Node 2: everything fixed but GPU 0, and `small` on 1.
  std::vector<int> stays = {d.Adopt(fixed(Job("a", 4)), 0, {0, 1, 2, 3}, true),
                            d.Adopt(fixed(Job("a", 2)), 0, {4, 5}, true),
                            d.Adopt(fixed(Job("a", 1)), 0, {6}, true),
                            d.Adopt(fixed(Job("b", 2)), 2, {2, 3}, true),
                            d.Adopt(fixed(Job("b", 4)), 2, {4, 5, 6, 7}, true)};
  const int pair = d.Adopt(Job("b", 2), 1, {0, 1}, true);  // two GPUs: only node 2 could take it
  const int small = d.Adopt(Job("b", 1), 2, {1}, true);
  const int big = d.Submit(Job("b", 8));
  for (int i = 0; i < 400 && d.J(big).state != JobState::kRunning; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(big).state, JobState::kRunning) << d.J(big).reason;
  EXPECT_EQ(d.NodeOf(big), 1);
  for (int i = 0; i < 5; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(pair).state, JobState::kRunning) << d.J(pair).reason;
  EXPECT_EQ(d.NodeOf(pair), 2);
  EXPECT_EQ(d.J(small).state, JobState::kRunning) << d.J(small).reason;
  EXPECT_EQ(d.NodeOf(small), 0);
  // Steady from then on: nobody is stopped again.
  for (int i = 0; i < 1000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(pair).preemptions, 1);
  EXPECT_EQ(d.J(small).preemptions, 1);
  EXPECT_EQ(d.J(big).preemptions, 0);
  for (int id : stays) EXPECT_EQ(d.J(id).state, JobState::kRunning);
}

// The GPUs a fair-share reclaim can give are scattered beside the queue's own small jobs: a
// job that has waited reserve_after_s twice reclaims one node's borrowers and moves its own
// queue's small job from there into a free GPU elsewhere.
TEST(SchedulerOverTimeTest, AStarvingJobReclaimsWhereItsQueuesOwnJobCanMoveAside) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(2, 2, {Queue("a"), Queue("b", 0, 2)}, policy);
  const int six = d.Adopt(Job("a", 6), 0, {0, 1, 2, 3, 4, 5}, true);
  const int own = d.Adopt(Job("b", 1), 0, {6}, true);
  const int seven = d.Adopt(Job("a", 7), 1, {0, 1, 2, 3, 4, 5, 6}, true);
  const int aside = d.Adopt(Job("b", 1), 1, {7}, true);
  // b's share is 10 (weight 2, demand 10) and a's 6: a holds 13.
  const int big = d.Submit(Job("b", 8));
  for (int i = 0; i < 300 && d.J(big).state != JobState::kRunning; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(big).state, JobState::kRunning) << d.J(big).reason;
  EXPECT_EQ(d.NodeOf(big), 1);
  for (int i = 0; i < 5; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(aside).state, JobState::kRunning) << d.J(aside).reason;
  EXPECT_EQ(d.NodeOf(aside), 0);
  EXPECT_EQ(d.J(seven).state, JobState::kPending);  // reclaimed: a is at its share
  // Steady from then on: a holds its share, b its own, and nobody is stopped again.
  for (int i = 0; i < 1000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(six).preemptions + d.J(own).preemptions + d.J(big).preemptions, 0);
  EXPECT_EQ(d.J(seven).preemptions, 1);
  EXPECT_EQ(d.J(aside).preemptions, 1);
  EXPECT_EQ(d.J(seven).state, JobState::kPending);
}

// Two starving jobs of one queue, equal in priority and age (submitted in the same second),
// each reserve a node whose occupant could move only onto the other's: the later id gives way,
// so one starts (review: neither did, each waiting for the other for ever).
TEST(SchedulerOverTimeTest, TwoEqualStarvingJobsDoNotBlockEachOther) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 60;
  Driver d(3, 3, {Queue("a"), Queue("b")}, policy);
  JobSpec fixed = Job("a", 8);
  fixed.preemptible = false;
  d.Adopt(fixed, 0, {0, 1, 2, 3, 4, 5, 6, 7}, true);
  const int one = d.Adopt(Job("b", 2), 1, {0, 1}, true);
  const int two = d.Adopt(Job("b", 2), 2, {0, 1}, true);
  const int first = d.Submit(Job("b", 8));
  const int second = d.Submit(Job("b", 8));
  for (int i = 0; i < 1000; ++i) d.Cycle(1);
  EXPECT_EQ((d.J(first).state == JobState::kRunning) + (d.J(second).state == JobState::kRunning), 1)
      << d.J(first).reason << " / " << d.J(second).reason;
  EXPECT_EQ(d.J(one).preemptions + d.J(two).preemptions, 1);  // one moved, once
}

// Each node holds another queue's borrower and a job of the queue's own of lower priority:
// neither a reclaim nor a priority preemption alone frees a node, the two together do, at once
// (no reservation needed).
TEST(SchedulerOverTimeTest, AReclaimAlsoTakesTheQueuesOwnLowerPriorityWork) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 1e6;
  Driver d(2, 2, {Queue("a"), Queue("b", 0, 2)}, policy);
  JobSpec fixed = Job("a", 6);
  fixed.preemptible = false;  // node 1 is the one to free
  const int six = d.Adopt(fixed, 0, {0, 1, 2, 3, 4, 5}, true);
  const int own = d.Adopt(Job("b", 1), 0, {6}, true);
  const int seven = d.Adopt(Job("a", 7), 1, {0, 1, 2, 3, 4, 5, 6}, true);
  const int low = d.Adopt(Job("b", 1), 1, {7}, true);
  // b's share is 10 (weight 2, demand 10) and a's 6: a holds 13.
  JobSpec urgent = Job("b", 8);
  urgent.priority = 5;
  const int big = d.Submit(urgent);
  for (int i = 0; i < 60 && d.J(big).state != JobState::kRunning; ++i) d.Cycle(1);
  ASSERT_EQ(d.J(big).state, JobState::kRunning) << d.J(big).reason;
  EXPECT_EQ(d.NodeOf(big), 1);
  for (int i = 0; i < 5; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(low).state, JobState::kRunning) << d.J(low).reason;  // into the free GPU
  EXPECT_EQ(d.NodeOf(low), 0);
  // Steady from then on: a holds its share, and nobody is stopped again.
  for (int i = 0; i < 1000; ++i) d.Cycle(1);
  EXPECT_EQ(d.J(seven).state, JobState::kPending);
  EXPECT_EQ(d.J(seven).preemptions, 1);
  EXPECT_EQ(d.J(low).preemptions, 1);
  EXPECT_EQ(d.J(six).preemptions + d.J(own).preemptions + d.J(big).preemptions, 0);
}

// A reclaim took a queue's one high-priority job (one victim frees its node) rather than its
// three low-priority ones on another node; the job came straight back by preempting those
// three, and could be the first victim of the next reclaim again (seed 7610 of the
// steady-demand test stopped one five times).
TEST(SchedulerOverTimeTest, AReclaimTakesTheVictimQueuesLowestPriorityFirst) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 1e6;  // nothing starves here: no reservation moves anyone
  Driver d(2, 2, {Queue("a"), Queue("b")}, policy);
  JobSpec fixed = Job("b", 5);
  fixed.preemptible = false;
  d.Adopt(fixed, 0, {3, 4, 5, 6, 7}, true);
  d.Adopt(fixed, 1, {3, 4, 5, 6, 7}, true);
  JobSpec high = Job("b", 3);
  high.priority = 5;
  const int urgent = d.Adopt(high, 0, {0, 1, 2}, true);
  std::vector<int> low;
  for (int g = 0; g < 3; ++g) low.push_back(d.Adopt(Job("b", 1), 1, {g}, true));
  // a's share is 3 (its demand), b's 13: b holds 16.
  const int reclaimer = d.Submit(Job("a", 3));
  for (int i = 0; i < 200; ++i) d.Cycle(5);
  ASSERT_EQ(d.J(reclaimer).state, JobState::kRunning) << d.J(reclaimer).reason;
  EXPECT_EQ(d.NodeOf(reclaimer), 1);
  EXPECT_EQ(d.J(urgent).state, JobState::kRunning);
  EXPECT_EQ(d.J(urgent).preemptions, 0);
  for (int id : low) EXPECT_EQ(d.J(id).preemptions, 1) << id;
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 3);
}

// A job that started earlier in the same cycle is no victim yet, and a reclaim took its queue's
// higher-priority job instead, which came straight back by preempting it: both stopped, where
// the job started last would have done (seed 9578 of the steady-demand test shrank one job
// three times so). Now the reclaim waits a cycle and takes the job that just started.
TEST(SchedulerOverTimeTest, AReclaimWaitsForAJobStartedInTheSameCycleBelowItsVictim) {
  Policy policy = Driver::Berth();
  policy.reserve_after_s = 1e6;  // nothing starves here: no reservation moves anyone
  // Shares: a 14 (its demand), b 2 (weights 7:1; b asks for 3).
  Driver d(2, 2, {Queue("a", 0, 7), Queue("b")}, policy);
  JobSpec fixed = Job("a", 8);
  fixed.preemptible = false;
  d.Adopt(fixed, 1, {0, 1, 2, 3, 4, 5, 6, 7}, true);
  fixed.groups[0].demand.gpus = 2;
  d.Adopt(fixed, 0, {6, 7}, true);
  JobSpec high = Job("b", 1);
  high.priority = 5;
  const int urgent = d.Adopt(high, 0, {0}, true);
  d.Cycle(10);  // what runs started before the cycle below
  // Both queues are below their shares, b by the smaller dominant share, so b's next job goes
  // first in the cycle and takes 2 of the 5 free GPUs, past b's share; a's job then needs a
  // reclaim from b.
  const int last = d.Submit(Job("b", 2));
  const int reclaimer = d.Submit(Job("a", 4));
  d.Cycle(1);
  ASSERT_EQ(d.J(last).state, JobState::kRunning) << d.J(last).reason;
  ASSERT_EQ(d.J(reclaimer).state, JobState::kPending);
  for (int i = 0; i < 100; ++i) d.Cycle(5);
  ASSERT_EQ(d.J(reclaimer).state, JobState::kRunning) << d.J(reclaimer).reason;
  EXPECT_EQ(d.J(urgent).state, JobState::kRunning);
  EXPECT_EQ(d.preempted_[urgent], 0);
  EXPECT_EQ(d.preempted_[last], 1);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 1);
}

// The rule above held the job back for as long as its queue started a job below its victims in
// every cycle: a stream of 1-GPU jobs, one a cycle in the guarantee, kept an 8-GPU job from
// preempting the 4-GPU jobs below it for 4000 s (review). It holds a job back one cycle a wait.
TEST(SchedulerOverTimeTest, AJobStartedEveryCycleHoldsNoPreemptorBackForLong) {
  Policy policy = Driver::Berth();
  QueueSpec a = Queue("a");
  a.guarantees.push_back({"dgx-a100/switch", 1});
  Driver d(2, 2, {a}, policy);
  JobSpec fixed = Job("a", 6);
  fixed.priority = 200;
  fixed.preemptible = false;
  d.Submit(fixed);
  JobSpec middle = Job("a", 4);
  middle.priority = 50;
  for (int i = 0; i < 40; ++i) d.Submit(middle, i == 0 ? 100 : 200);  // they end staggered
  JobSpec small = Job("a", 1);
  small.priority = 1;
  JobSpec big = Job("a", 8);
  big.priority = 100;
  int waiting = -1;
  while (d.now_ < 400 && (waiting < 0 || d.J(waiting).state != JobState::kRunning)) {
    if (d.now_ == 100) waiting = d.Submit(big);
    d.Submit(small, 10);
    d.Cycle(10);
  }
  ASSERT_GE(waiting, 0);
  EXPECT_EQ(d.J(waiting).state, JobState::kRunning) << d.J(waiting).reason;
}

// A guaranteed preemptor whose plan binds a new guarantee cell holds the whole cell, and its
// queue's other guaranteed work waits for it (CellBeingReclaimed). A plan for a GPU share
// inside a cell the queue binds already binds nothing, but its reserved GPU (more than the
// half it commits) read as a cell being bound: the queue's next job waited out the victim's
// grace period before it could reclaim.
TEST(SchedulerOverTimeTest, AShareReclaimingInsideABoundCellHoldsUpNoOtherReclaim) {
  Driver d(2, 2, {Queue("g", 1), Queue("b")});
  d.Adopt(Job("g", 1), 0, {0}, false);  // g binds node 0
  for (int g = 1; g < 8; ++g) d.Adopt(Job("b", 1), 0, {g}, true);
  for (int g = 0; g < 8; ++g) d.Adopt(Job("b", 1), 1, {g}, true);
  d.Cycle(10);
  JobSpec half = Job("g", 0);
  half.groups[0].demand.gpu_milli = 500;
  const int share = d.Submit(half);
  const int whole = d.Submit(Job("g", 1));
  d.Cycle(1);
  EXPECT_TRUE(d.J(share).preempting) << d.J(share).reason;
  EXPECT_TRUE(d.J(whole).preempting) << d.J(whole).reason;
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 2);
  for (int i = 0; i < 20; ++i) d.Cycle(5);
  EXPECT_EQ(d.J(share).state, JobState::kRunning) << d.J(share).reason;
  EXPECT_EQ(d.J(whole).state, JobState::kRunning) << d.J(whole).reason;
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 2);
}

// Review of the change above: where a guarantee cell is one GPU, a share's plan that binds a new
// cell reserves just that GPU, so reserved GPUs against the placement's could not tell. Two
// quarter-GPU jobs of g then each bound a cell and preempted a borrower, where the second could
// wait for the first's cell and share its GPU. The cells a plan binds anew are what tells.
TEST(SchedulerOverTimeTest, SharesBindingAOneGpuCellReclaimOneGpu) {
  QueueSpec g = Queue("g");
  g.guarantees.push_back({"A100-80GB", 2});
  Driver d(1, 1, {g, Queue("b")});
  std::vector<int> borrowers;
  for (int i = 0; i < 8; ++i) borrowers.push_back(d.Adopt(Job("b", 1), 0, {i}, true));
  d.Cycle(10);
  JobSpec quarter = Job("g", 0);
  quarter.groups[0].demand.gpu_milli = 250;
  const int first = d.Submit(quarter);
  const int second = d.Submit(quarter);
  for (int i = 0; i < 20; ++i) d.Cycle(5);
  EXPECT_EQ(d.J(first).state, JobState::kRunning) << d.J(first).reason;
  EXPECT_EQ(d.J(second).state, JobState::kRunning) << d.J(second).reason;
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 1);
}

// The cycle ordered queues by weighted dominant share only. a, below its fair share of GPUs
// but holding most of the node's CPUs (dominant share 0.86), came after b, at its share
// (0.625): b took the last free GPU, went past its share by the hysteresis band, and a's
// reclaim stopped that job in the next cycle (seeds 11368, 14271 and 15649 of the steady-demand
// test stopped one job four or five times so).
TEST(SchedulerOverTimeTest, AQueueBelowItsFairShareTakesTheLastFreeGpuFirst) {
  Driver d(1, 1, {Queue("a"), Queue("b")});
  JobSpec cpu_heavy = Job("a", 1);
  cpu_heavy.groups[0].demand.cpu_milli = 55000;  // of a socket's 64000
  d.Adopt(cpu_heavy, 0, {0}, true);
  d.Adopt(cpu_heavy, 0, {4}, true);
  for (int g : {1, 2, 3, 5, 6}) d.Adopt(Job("b", 1), 0, {g}, true);
  // Shares: a 3 (its demand), b 5; a holds 2 GPUs, b 5, and GPU 7 is free.
  const int a_next = d.Submit(Job("a", 1));
  const int b_next = d.Submit(Job("b", 1));
  for (int i = 0; i < 50; ++i) d.Cycle(5);
  EXPECT_EQ(d.J(a_next).state, JobState::kRunning) << d.J(a_next).reason;
  EXPECT_EQ(d.J(b_next).state, JobState::kPending);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 0);
}

// Review of the order above: c asks for no GPUs, so its GPU share is 0 and it was never below
// it; g, below its share until it held every GPU, went first every cycle and took every CPU, so
// c waited for the whole of g's queue. And c's jobs, asking no GPUs, took g's "for the
// guarantee" of c, which has none. Now c ranks by dominant share: its jobs start at once and
// as g's end, and nothing is preempted.
TEST(SchedulerOverTimeTest, AQueueAskingNoGpusIsServedByDominantShare) {
  Driver d(1, 1, {Queue("g"), Queue("c")});
  JobSpec gpu_job = Job("g", 1);
  gpu_job.groups[0].demand.cpu_milli = 16000;  // 8 of them take every CPU
  JobSpec cpu_job = Job("c", 0);
  cpu_job.groups[0].demand.cpu_milli = 16000;
  for (int i = 0; i < 40; ++i) d.Submit(gpu_job, 1000);
  std::vector<int> cpu_jobs;
  for (int i = 0; i < 8; ++i) cpu_jobs.push_back(d.Submit(cpu_job, 1000));
  d.Cycle(10);
  int running = 0;
  for (int id : cpu_jobs) running += d.J(id).state == JobState::kRunning;
  EXPECT_GT(running, 0) << "g took the whole node first";
  for (int i = 0; i < 50; ++i) d.Cycle(100);
  for (int id : cpu_jobs) EXPECT_EQ(d.J(id).state, JobState::kDone) << id;
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 0);
}

// Review of the test above's fix, which first read "asks for no GPUs" from the queue's whole
// demand: c, with a 1-GPU job running and CPU-only jobs waiting, ranked at its share behind g,
// below its share for good (its jobs run out of CPUs first), and waited for all of g's queue.
TEST(SchedulerOverTimeTest, CpuOnlyJobsWaitingInAQueueAtItsShareAreServedByDominantShare) {
  Driver d(1, 1, {Queue("g"), Queue("c")});
  d.Adopt(Job("c", 1), 0, {7}, true);
  JobSpec gpu_job = Job("g", 1);
  gpu_job.groups[0].demand.cpu_milli = 30000;  // two a socket: g holds 4 GPUs of its share of 7
  for (int i = 0; i < 40; ++i) d.Submit(gpu_job, 1000);
  d.Cycle(10);
  JobSpec cpu_job = Job("c", 0);
  cpu_job.groups[0].demand.cpu_milli = 6000;  // more than a socket has left
  std::vector<int> cpu_jobs;
  for (int i = 0; i < 6; ++i) cpu_jobs.push_back(d.Submit(cpu_job, 1000));
  for (int i = 0; i < 30; ++i) d.Cycle(100);
  for (int id : cpu_jobs) EXPECT_EQ(d.J(id).state, JobState::kDone) << id;
}

// Review of the fix above: an elastic job whose guarantee size came down to its launcher, which
// asks for no GPU, made no reclaim at all, though its fair share had room for all of it.
TEST(SchedulerOverTimeTest, AnElasticJobWithAGpulessLauncherReclaimsItsFairShare) {
  Driver d(1, 1, {Queue("a"), Queue("b")});
  JobSpec borrower = Job("b", 1);
  borrower.groups[0].demand.cpu_milli = 16000;  // b holds every GPU and every CPU
  for (int g = 0; g < 8; ++g) d.Adopt(borrower, 0, {g}, true);
  JobSpec elastic = Job("a", 0);
  elastic.groups[0].name = "launcher";
  elastic.groups[0].demand.cpu_milli = 1000;
  TaskGroup workers;
  workers.name = "workers";
  workers.replicas = 4;
  workers.demand.gpus = 1;
  elastic.groups.push_back(workers);
  elastic.min_replicas = 1;
  const int id = d.Submit(elastic);
  for (int i = 0; i < 30; ++i) d.Cycle(10);
  ASSERT_EQ(d.J(id).state, JobState::kRunning) << d.J(id).reason;
  EXPECT_EQ(d.J(id).replicas, 5);  // a's share is 4 GPUs, b's 4
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 4);
}

// Bug 6: health changes did not wake pending jobs, and jobs on bad hardware got no decision.
TEST(SchedulerOverTimeTest, UncordonWakesAPendingJob) {
  Driver d(1, 1, {Queue("a")});
  d.Handle(d.s_.SetNodeCordoned(0, true, d.now_));
  const int j = d.Submit(Job("a", 8));
  d.Cycle();
  EXPECT_EQ(d.J(j).state, JobState::kPending);
  d.Handle(d.s_.SetNodeCordoned(0, false, d.now_));
  d.Cycle();
  EXPECT_EQ(d.J(j).state, JobState::kRunning);
}

TEST(SchedulerOverTimeTest, AJobOnABadGpuIsEvictedAndRestartsElsewhere) {
  Driver d(2, 2, {Queue("a")});
  const int j = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(j).state, JobState::kRunning);
  const int node = d.J(j).placements[0].node;
  const std::vector<Decision> out = d.s_.SetGpuBad(node, 3, true, d.now_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Decision::Kind::kEvict);
  EXPECT_EQ(out[0].job, j);
  EXPECT_NE(out[0].reason.find("went bad"), std::string::npos) << out[0].reason;
  d.Handle(out);
  d.Cycle();
  d.Cycle();
  EXPECT_EQ(d.J(j).state, JobState::kRunning);
  EXPECT_NE(d.J(j).placements[0].node, node);
  EXPECT_EQ(d.J(j).preemptions, 1);
}

TEST(SchedulerOverTimeTest, DrainEvictsEverythingOnTheNode) {
  Driver d(2, 2, {Queue("a")});
  for (int i = 0; i < 4; ++i) d.Submit(Job("a", 4));
  d.Cycle();
  const std::vector<Decision> out = d.s_.Drain(0, d.now_);
  EXPECT_EQ(out.size(), 2u);
  for (const Decision& e : out) EXPECT_EQ(e.kind, Decision::Kind::kEvict);
  d.Handle(out);
  for (int i = 0; i < 5; ++i) d.Cycle();
  for (const auto& [id, j] : d.s_.jobs())
    if (j.state == JobState::kRunning) {
      EXPECT_EQ(j.placements[0].node, 1);
    }
}

// Bug 8: users inside a queue were ordered by their share at the start of the cycle only.
TEST(SchedulerOverTimeTest, UsersShareAQueueInsideOneCycle) {
  Driver d(1, 1, {Queue("a")});
  for (int i = 0; i < 10; ++i) d.Submit(Job("a", 1, "u1"));
  for (int i = 0; i < 10; ++i) d.Submit(Job("a", 1, "u2"));
  d.Cycle();
  std::map<std::string, int> by_user;
  for (const auto& [id, j] : d.s_.jobs()) by_user[j.spec.user] += j.state == JobState::kRunning;
  EXPECT_EQ(by_user["u1"], 4);
  EXPECT_EQ(by_user["u2"], 4);
}

TEST(SchedulerOverTimeTest, AVictimPastItsGraceDeadlineIsKilledOnce) {
  Driver d(1, 1, {Queue("a"), Queue("b", 1)});
  const int a1 = d.Submit(Job("a", 8));
  d.Cycle();
  d.Submit(Job("b", 8));
  std::vector<Decision> out = d.s_.Schedule(d.now_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Decision::Kind::kPreempt);
  // The adapter never reports the stop: at the deadline the engine says kill, once.
  EXPECT_TRUE(d.s_.Schedule(d.now_ + 29).empty());
  out = d.s_.Schedule(d.now_ + 30);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Decision::Kind::kKill);
  EXPECT_EQ(out[0].job, a1);
  EXPECT_TRUE(d.s_.Schedule(d.now_ + 31).empty());
}

// A job started in a call is no victim in that call; a higher-priority job that would have
// taken it is tried again in the next cycle, not parked until something else frees.
TEST(SchedulerOverTimeTest, AHigherPriorityJobPreemptsAJobThatJustStartedNextCycle) {
  Driver d(1, 1, {Queue("a")});
  JobSpec low = Job("a", 8);
  low.priority = 10;
  const int l = d.Submit(low);
  d.Cycle();
  JobSpec mid = Job("a", 8);
  mid.priority = 100;
  const int m = d.Submit(mid);
  d.Cycle();  // m preempts l (30 s grace)
  JobSpec high = Job("a", 8);
  high.priority = 1000;
  const int h = d.Submit(high);
  for (int i = 0; i < 100 && d.J(h).state != JobState::kRunning; ++i) d.Cycle(5);
  EXPECT_EQ(d.J(h).state, JobState::kRunning) << d.J(h).reason;
  EXPECT_EQ(d.preempted_[l], 1);
  EXPECT_LE(d.preempted_[m], 1);
}

// A waiting preemptor that is cancelled opens its plan to others at once.
TEST(SchedulerOverTimeTest, ACancelledPreemptorWakesPendingJobs) {
  Driver d(1, 1, {Queue("a"), Queue("b", 1)});
  const int a1 = d.Submit(Job("a", 4));
  d.Cycle();
  const int b1 = d.Submit(Job("b", 8));
  d.Cycle();
  ASSERT_EQ(d.J(a1).state, JobState::kStopping);
  const int a2 = d.Submit(Job("a", 4));
  d.Cycle();
  EXPECT_EQ(d.J(a2).state, JobState::kPending);  // b1's plan holds the free GPUs
  d.s_.Finish(b1, d.now_, JobEnd::kCancelled);
  d.Cycle();
  EXPECT_EQ(d.J(a2).state, JobState::kRunning) << d.J(a2).reason;
}

// --- Smaller ones (bug 9) and what adapters need ----------------------------------------------

TEST(SchedulerOverTimeTest, AWholeGpuShareIsOneGpu) {
  Driver d(1, 1, {Queue("a")});
  JobSpec spec = Job("a", 0);
  spec.groups[0].demand.gpu_milli = 1000;
  const int j = d.Submit(spec);
  d.Cycle();
  ASSERT_EQ(d.J(j).state, JobState::kRunning);
  EXPECT_EQ(d.J(j).placements[0].gpus.size(), 1u);
  EXPECT_EQ(d.J(j).placements[0].gpu_milli, 0);
  spec.groups[0].demand.gpu_milli = 1001;
  std::string why;
  EXPECT_EQ(d.s_.Submit(spec, 0, &why), -1);
  EXPECT_NE(why.find("gpuMilli"), std::string::npos) << why;
}

TEST(SchedulerOverTimeTest, ACapRefusalSaysSo) {
  QueueSpec capped = Queue("a");
  capped.cap_gpus = 8;
  Driver d(2, 2, {capped});
  d.Submit(Job("a", 8));
  const int second = d.Submit(Job("a", 8));
  d.Cycle();
  EXPECT_EQ(d.J(second).state, JobState::kPending);
  EXPECT_NE(d.J(second).reason.find("queue a is at its cap"), std::string::npos)
      << d.J(second).reason;
}

TEST(SchedulerOverTimeTest, EndedJobsAreForgottenAfterTheLastFew) {
  Driver d(1, 1, {Queue("a")});
  const int first = d.Submit(Job("a", 1), 1);
  d.Cycle(2);
  d.s_.SetExternalId(first, "container-1");
  for (size_t i = 0; i < Scheduler::kKeptFinished + 10; ++i) {
    const int id = d.Submit(Job("a", 1));
    d.s_.Finish(id, d.now_, JobEnd::kCancelled);
  }
  EXPECT_EQ(d.s_.job(first), nullptr);
  EXPECT_EQ(d.s_.FindExternal("container-1"), nullptr);
  EXPECT_LE(d.s_.jobs().size(), Scheduler::kKeptFinished);
  d.Check();
}

TEST(SchedulerOverTimeTest, EventsAreOrderedAndResumable) {
  Driver d(1, 1, {Queue("a")});
  const int j = d.Submit(Job("a", 8), 10);
  d.Cycle(20);
  const std::vector<EngineEvent> all = d.s_.EventsSince(0);
  ASSERT_GE(all.size(), 3u);
  std::vector<std::string> kinds;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    if (all[i].job == j) kinds.push_back(all[i].kind);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"submitted", "start", "succeeded"}));
  EXPECT_EQ(d.s_.EventsSince(all[1].seq).size(), all.size() - 2);
  EXPECT_EQ(d.s_.last_event(), all.back().seq);
}

TEST(SchedulerOverTimeTest, FailedStartsBackOffAndRetry) {
  Driver d(1, 1, {Queue("a")});
  const int j = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(j).state, JobState::kRunning);
  d.s_.StartFailed(j, d.now_, "image pull failed");
  EXPECT_EQ(d.J(j).state, JobState::kPending);
  EXPECT_NE(d.J(j).reason.find("image pull failed"), std::string::npos);
  d.Cycle();  // still backing off
  EXPECT_EQ(d.J(j).state, JobState::kPending);
  for (int i = 0; i < 20; ++i) d.Cycle();
  EXPECT_EQ(d.J(j).state, JobState::kRunning);
}

// Crash recovery: a new engine adopts the running jobs at their exact GPUs and ends in the same
// state as the old one.
TEST(SchedulerOverTimeTest, ANewEngineAdoptsRunningJobsExactly) {
  Driver d(4, 2, {Queue("a"), Queue("b", 1)});
  for (int i = 0; i < 6; ++i) d.Submit(Job("a", 2));
  d.Submit(Job("b", 8));
  JobSpec share = Job("a", 0);
  share.groups[0].demand.gpu_milli = 300;
  d.Submit(share);
  d.Cycle();
  Scheduler fresh(&d.cluster_, {Queue("a"), Queue("b", 1)}, Driver::Berth());
  const std::vector<const JobRecord*> running = test::RunningGuaranteedFirst(d.s_);
  for (const JobRecord* j : running) {
    std::string why;
    const int id =
        fresh.Adopt(j->spec, j->placements, j->borrowed, j->submit_time, j->start_time, &why);
    ASSERT_GE(id, 0) << why;
    EXPECT_EQ(fresh.job(id)->placements.size(), j->placements.size());
    for (size_t r = 0; r < j->placements.size(); ++r) {
      EXPECT_EQ(fresh.job(id)->placements[r].node, j->placements[r].node);
      EXPECT_EQ(fresh.job(id)->placements[r].gpus, j->placements[r].gpus);
    }
  }
  for (size_t n = 0; n < d.cluster_.nodes.size(); ++n)
    for (size_t g = 0; g < 8; ++g)
      EXPECT_EQ(fresh.allocator().gpu_used_milli(n, g), d.s_.allocator().gpu_used_milli(n, g));
  EXPECT_EQ(fresh.CheckConsistency(), "");
  EXPECT_EQ(fresh.allocator().CheckConsistency(), "");
  // Adopting onto GPUs that are taken is refused and leaves nothing behind.
  std::string why;
  EXPECT_EQ(fresh.Adopt(running[0]->spec, running[0]->placements, running[0]->borrowed, 0, 0, &why),
            -1);
  EXPECT_NE(why.find("placements"), std::string::npos) << why;
  EXPECT_EQ(fresh.CheckConsistency(), "");
}

// Queues change at run time, validated like a policy: refused whole when a running job would
// lose its footing.
TEST(SchedulerOverTimeTest, QueuesChangeAtRunTimeOrNotAtAll) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  const int b1 = d.Submit(Job("b", 8));
  const int a1 = d.Submit(Job("a", 4));
  d.Cycle();
  ASSERT_FALSE(d.J(b1).borrowed);
  ASSERT_TRUE(d.J(a1).borrowed);
  // b's guarantee cannot go while b1 runs inside it; a queue with jobs cannot go either.
  std::string why = d.s_.SetQueues({Queue("a"), Queue("b", 0)});
  EXPECT_NE(why.find("queues.b: job"), std::string::npos) << why;
  why = d.s_.SetQueues({Queue("b", 1)});
  EXPECT_NE(why.find("queues.a: still has jobs"), std::string::npos) << why;
  EXPECT_EQ(d.s_.Queues()[1].guarantee_gpus, 8);
  d.Check();
  // A new queue and a new weight: accepted, the jobs keep their GPUs.
  QueueSpec heavy = Queue("a", 0, 3);
  ASSERT_EQ(d.s_.SetQueues({Queue("c", 0), Queue("b", 1), heavy}), "");
  d.Check();
  const std::vector<QueueStatus> q = d.s_.Queues();
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[2].name, "a");
  EXPECT_EQ(q[2].weight, 3);
  EXPECT_EQ(q[2].usage_gpus, 4);
  EXPECT_EQ(q[1].usage_gpus, 8);
  EXPECT_EQ(d.J(a1).state, JobState::kRunning);
  const int c1 = d.Submit(Job("c", 4));
  d.Cycle();
  EXPECT_EQ(d.J(c1).state, JobState::kRunning);
  d.s_.Finish(b1, d.now_);
  d.s_.Finish(a1, d.now_);
  d.Check();
}

// Nodes come, go and change labels at run time: jobs on a node that is gone are lost back to
// pending, the rest keep their GPUs, and health follows each node by name.
TEST(SchedulerOverTimeTest, NodesComeAndGoAtRunTime) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  const int b1 = d.Submit(Job("b", 8));
  const int a1 = d.Submit(Job("a", 8));
  const int a2 = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(b1).state, JobState::kRunning);
  ASSERT_EQ(d.J(a1).state, JobState::kRunning);
  ASSERT_EQ(d.J(a2).state, JobState::kPending);
  const int b_node = d.J(b1).placements[0].node;
  const std::string b_name = d.cluster_.nodes[b_node].name;
  const std::string a_name = d.cluster_.nodes[d.J(a1).placements[0].node].name;
  d.Handle(d.s_.SetNodeCordoned(b_node, true, d.now_));
  // Queues can still change while a cordoned node holds a job.
  ASSERT_EQ(d.s_.SetQueues({Queue("a"), Queue("b", 1)}), "");
  d.Check();
  // Too small for b's guarantee: refused whole.
  Cluster tiny = d.cluster_;
  tiny.nodes.clear();
  EXPECT_NE(d.s_.SetCluster(&tiny, d.now_), "");
  EXPECT_EQ(&d.s_.cluster(), &d.cluster_);
  d.Check();
  // a1's node goes; two nodes come, one labelled; b's node moves to another index.
  Cluster next = d.cluster_;
  Node added = next.nodes[0];
  next.nodes.clear();
  added.name = "new-0";
  next.nodes.push_back(added);
  next.nodes.push_back(d.cluster_.nodes[b_node]);
  added.name = "new-1";
  added.labels["pool"] = "fast";
  next.nodes.push_back(added);
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  EXPECT_EQ(d.J(b1).state, JobState::kRunning);
  EXPECT_EQ(d.J(b1).placements[0].node, 1);
  EXPECT_TRUE(d.s_.allocator().node_cordoned(1));
  EXPECT_EQ(d.J(a1).state, JobState::kPending);
  bool lost_event = false, lost_why = false;
  for (const EngineEvent& e : d.s_.EventsSince(0)) {
    lost_event |= e.kind == "lost" && e.job == a1;
    lost_why |= e.kind == "pending" && e.job == a1 &&
                e.reason.find("lost: node " + a_name) != std::string::npos;
  }
  EXPECT_TRUE(lost_event);
  EXPECT_TRUE(lost_why);
  // The new label is seen: a selector job fits the labelled node only.
  JobSpec fast = Job("a", 8);
  fast.groups[0].node_selector["pool"] = "fast";
  const std::vector<NodeVerdict> v = d.s_.Evaluate(fast, {0, 1, 2});
  EXPECT_FALSE(v[0].feasible);
  EXPECT_FALSE(v[1].feasible);  // cordoned
  EXPECT_TRUE(v[2].feasible);
  d.Cycle();
  EXPECT_EQ(d.J(a1).state, JobState::kRunning);
  EXPECT_EQ(d.J(a2).state, JobState::kRunning);
  d.Handle(d.s_.SetNodeCordoned(1, false, d.now_));
  d.s_.Finish(b1, d.now_);
  const int a3 = d.Submit(Job("a", 8));
  d.Cycle();
  EXPECT_EQ(d.J(a3).state, JobState::kRunning);
  EXPECT_EQ(d.s_.cluster().nodes[d.J(a3).placements[0].node].name, b_name);
  d.Check();
}

// Elastic jobs grow toward their full size when capacity frees.
TEST(SchedulerOverTimeTest, AnElasticJobGrowsWhenCapacityFrees) {
  Driver d(1, 1, {Queue("a")});
  const int whole = d.Submit(Job("a", 4));
  d.Cycle();
  const int e = d.Submit(Elastic("a", 8, 2));
  d.Cycle();
  ASSERT_EQ(d.J(e).state, JobState::kRunning);
  EXPECT_EQ(d.J(e).replicas, 4);
  d.Cycle();
  EXPECT_EQ(d.J(e).replicas, 4);  // nothing freed: nothing grows
  EXPECT_EQ(d.count_[Decision::Kind::kGrow], 0);
  d.s_.Finish(whole, d.now_);
  std::vector<Decision> out = d.s_.Schedule(d.now_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Decision::Kind::kGrow);
  EXPECT_EQ(out[0].placements.size(), 4u);  // the added replicas only
  EXPECT_EQ(out[0].gpu_ids.size(), 4u);
  EXPECT_EQ(d.J(e).replicas, 8);
  EXPECT_EQ(d.J(e).placements.size(), 8u);
  EXPECT_EQ(d.s_.Queues()[0].usage_gpus, 8);
  d.Check();
  // A cap leaves room for part of an elastic job: it starts at that size, then stays there.
  Driver capped(1, 1, {{"a", 1, 3, {}}});
  const int c = capped.Submit(Elastic("a", 8, 2));
  for (int i = 0; i < 3; ++i) capped.Cycle();
  ASSERT_EQ(capped.J(c).state, JobState::kRunning);
  EXPECT_EQ(capped.J(c).replicas, 3);
  EXPECT_EQ(capped.count_[Decision::Kind::kGrow], 0);
}

// Elastic jobs shrink (down to their minimum) before whole jobs are preempted, and the job they
// shrank for starts at once; over many cycles nothing flips back and forth.
TEST(SchedulerOverTimeTest, ElasticJobsShrinkBeforeWholeJobsArePreempted) {
  Driver d(2, 2, {Queue("a"), Queue("b")});
  const int whole = d.Submit(Job("a", 8));
  const int e = d.Submit(Elastic("a", 8, 2));
  d.Cycle();
  ASSERT_EQ(d.J(whole).state, JobState::kRunning);
  ASSERT_EQ(d.J(e).replicas, 8);
  // b's fair share: a gives back what b1 needs, from the elastic job, and b1 starts at once.
  const int b1 = d.Submit(Job("b", 4));
  d.Cycle();
  EXPECT_EQ(d.J(b1).state, JobState::kRunning);
  EXPECT_EQ(d.J(e).replicas, 4);
  const int b2 = d.Submit(Job("b", 2));
  for (int i = 0; i < 50; ++i) d.Cycle(10);
  EXPECT_EQ(d.J(b2).state, JobState::kRunning);
  EXPECT_EQ(d.J(e).replicas, 2);
  EXPECT_EQ(d.J(whole).state, JobState::kRunning);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 0);
  EXPECT_EQ(d.count_[Decision::Kind::kShrink], 2);
  EXPECT_EQ(d.count_[Decision::Kind::kGrow], 0);
  // b's work ends: e grows back.
  for (int id : {b1, b2}) d.s_.Finish(id, d.now_);
  d.Cycle();
  EXPECT_EQ(d.J(e).replicas, 8);
  EXPECT_EQ(d.count_[Decision::Kind::kGrow], 1);
  d.Check();
}

// Cycles of 10 s until `job` runs (a failed start waits out its back-off).
void UntilRunning(Driver& d, int job) {
  for (int i = 0; i < 100 && d.J(job).state != JobState::kRunning; ++i) d.Cycle(10);
  ASSERT_EQ(d.J(job).state, JobState::kRunning) << d.J(job).reason;
}

// While another queue's work waits out a back-off (here a start that failed), a borrowing
// elastic job grows only within the band over its fair share that reclaim leaves alone: past
// it, every grow into the GPUs that work left free for a moment was cut again by the next
// fair-share reclaim (the dynamics test's seeds 588 and 944).
TEST(SchedulerOverTimeTest, AnElasticJobDoesNotGrowPastItsFairShare) {
  Driver d(2, 2, {Queue("a"), Queue("b")});
  const int e = d.Submit(Elastic("a", 16, 2));
  d.Cycle();
  ASSERT_EQ(d.J(e).replicas, 16);
  const int b1 = d.Submit(Job("b", 8));
  d.Cycle();
  ASSERT_EQ(d.J(b1).state, JobState::kRunning);
  ASSERT_EQ(d.J(e).replicas, 8);
  for (int attempt = 0; attempt < 5; ++attempt) {
    d.s_.StartFailed(b1, d.now_, "image pull failed");
    for (int i = 0; i < 3; ++i) d.Cycle();
    ASSERT_EQ(d.J(b1).state, JobState::kPending);
    EXPECT_EQ(d.J(e).replicas, 8);  // b's share is 8 while b1 waits: its GPUs stay free
    ASSERT_NO_FATAL_FAILURE(UntilRunning(d, b1));
  }
  EXPECT_EQ(d.count_[Decision::Kind::kGrow], 0);
  EXPECT_EQ(d.count_[Decision::Kind::kShrink], 1);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 0);
  // b's work ends: its share goes back to a, and e grows to its full size.
  d.s_.Finish(b1, d.now_);
  d.Cycle();
  EXPECT_EQ(d.J(e).replicas, 16);
  d.Check();
}

// Nor does one start past that band: it starts at the size its share leaves room for, and
// grows once the other queue's work is gone (the dynamics test's seed 701: started whole into
// GPUs a failed start left free, it was cut twice, then preempted).
TEST(SchedulerOverTimeTest, AnElasticJobStartsWithinItsFairShare) {
  Driver d(2, 2, {Queue("a"), Queue("b")});
  const int a1 = d.Submit(Job("a", 8));
  const int b1 = d.Submit(Job("b", 6));
  d.Cycle();
  ASSERT_EQ(d.J(a1).state, JobState::kRunning);
  ASSERT_EQ(d.J(b1).state, JobState::kRunning);
  d.s_.StartFailed(b1, d.now_, "image pull failed");
  const int e = d.Submit(Elastic("a", 8, 1));
  d.Cycle();
  ASSERT_EQ(d.J(e).state, JobState::kRunning);
  EXPECT_EQ(d.J(e).replicas, 2);  // a's share: 10 of 16 (b waits for 6)
  ASSERT_NO_FATAL_FAILURE(UntilRunning(d, b1));
  EXPECT_EQ(d.count_[Decision::Kind::kShrink], 0);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 0);
  d.s_.Finish(b1, d.now_);
  d.Cycle();
  EXPECT_EQ(d.J(e).replicas, 8);
  d.Check();
}

// The band holds only while another queue's work waits out a back-off: work that cannot use the
// free GPUs (too big for any node here, or bound elsewhere) keeps nobody from them (review: an
// elastic job stayed at half its size for 20 h beside 8 idle GPUs).
TEST(SchedulerOverTimeTest, AnElasticJobGrowsIntoWhatOtherQueuesCannotUse) {
  Driver d(2, 2, {Queue("a"), Queue("b")});
  const int b1 = d.Submit(Job("b", 16));  // no node has 16 GPUs
  const int e = d.Submit(Elastic("a", 16, 1));
  d.Cycle();
  EXPECT_EQ(d.J(b1).state, JobState::kPending);
  EXPECT_EQ(d.J(e).replicas, 16);
  d.Check();
}

// A lending limit keeps part of a guarantee free for its queue: borrowers never take it, so the
// queue's work starts there at once, with no reclaim.
TEST(SchedulerOverTimeTest, ALendingLimitKeepsPartOfTheGuaranteeFree) {
  for (const int limit : {-1, 0}) {
    QueueSpec b = Queue("b", 1);
    b.guarantees[0].lending_limit = limit;
    Driver d(2, 2, {Queue("a"), b});
    const int a1 = d.Submit(Job("a", 8));
    const int a2 = d.Submit(Job("a", 8));
    d.Cycle();
    EXPECT_EQ(d.J(a1).state, JobState::kRunning);
    if (limit == 0) {
      EXPECT_EQ(d.J(a2).state, JobState::kPending);
      EXPECT_NE(d.J(a2).reason.find("lending limit"), std::string::npos) << d.J(a2).reason;
    } else {
      EXPECT_EQ(d.J(a2).state, JobState::kRunning);
    }
    const int b1 = d.Submit(Job("b", 8));
    d.Cycle();
    EXPECT_EQ(d.J(b1).state, limit == 0 ? JobState::kRunning : JobState::kPending);
    EXPECT_EQ(d.count_[Decision::Kind::kPreempt], limit == 0 ? 0 : 1);
    for (int i = 0; i < 100; ++i) d.Cycle(10);
    EXPECT_EQ(d.J(b1).state, JobState::kRunning);
    d.Check();
  }
}

// A guarantee in MIG instances of one size: 14 x 1g.10gb are two MIG GPUs, which the queue
// reclaims from a borrower and then holds as its own.
TEST(SchedulerOverTimeTest, AGuaranteeOfMigInstancesIsKept) {
  Driver d(2, 2, {Queue("a"), Queue("b")});
  d.cluster_ = SyntheticDgxCluster(2, 2, 2);  // dgx-1: eight MIG GPUs
  ASSERT_EQ(d.s_.SetCluster(&d.cluster_, d.now_), "");
  QueueSpec a = Queue("a");
  a.guarantees.push_back({"A100-80GB/1g.10gb", 14});
  ASSERT_EQ(d.s_.SetQueues({a, Queue("b")}), "");
  auto slice = [](const std::string& queue, const std::string& profile) {
    JobSpec spec = Job(queue, 0);
    spec.groups[0].demand.mig_profile = profile;
    return spec;
  };
  std::vector<int> whole, small;
  for (int i = 0; i < 8; ++i) whole.push_back(d.Submit(slice("b", "7g.80gb")));
  d.Cycle();
  for (int id : whole) ASSERT_EQ(d.J(id).state, JobState::kRunning) << d.J(id).reason;
  for (int i = 0; i < 14; ++i) small.push_back(d.Submit(slice("a", "1g.10gb")));
  for (int i = 0; i < 20; ++i) d.Cycle(10);
  std::set<int> gpus;
  for (int id : small) {
    ASSERT_EQ(d.J(id).state, JobState::kRunning) << d.J(id).reason;
    EXPECT_FALSE(d.J(id).borrowed);
    gpus.insert(d.J(id).placements[0].gpus[0]);
  }
  EXPECT_EQ(gpus.size(), 2u);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 2);
  // A fifteenth instance is past the guarantee: it borrows, and nothing more is reclaimed.
  const int extra = d.Submit(slice("a", "1g.10gb"));
  for (int i = 0; i < 20; ++i) d.Cycle(10);
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 2);
  EXPECT_TRUE(d.J(extra).state == JobState::kPending || d.J(extra).borrowed);
  d.Check();
}

// A cap per GPU model: the queue's jobs go to other models once one is at its cap.
TEST(SchedulerOverTimeTest, AModelCapSendsJobsToOtherModels) {
  Driver d(3, 3, {Queue("a")});
  d.cluster_.models.push_back(d.cluster_.models[0]);
  d.cluster_.models.back().name = "H100";
  for (Gpu& g : d.cluster_.nodes[2].gpus) g.model = "H100";
  QueueSpec a = Queue("a");
  a.model_caps["A100-80GB"] = 8;
  ASSERT_EQ(d.s_.SetCluster(&d.cluster_, d.now_), "");
  ASSERT_EQ(d.s_.SetQueues({a}), "");
  const int j1 = d.Submit(Job("a", 8));
  const int j2 = d.Submit(Job("a", 8));
  const int j3 = d.Submit(Job("a", 8));
  d.Cycle();
  EXPECT_EQ(d.J(j1).state, JobState::kRunning);
  EXPECT_EQ(d.J(j2).state, JobState::kRunning);
  EXPECT_EQ(d.J(j3).state, JobState::kPending);
  std::map<std::string, int> on;
  for (int j : {j1, j2}) ++on[d.cluster_.nodes[d.J(j).placements[0].node].gpus[0].model];
  EXPECT_EQ(on["A100-80GB"], 1);
  EXPECT_EQ(on["H100"], 1);
  EXPECT_NE(d.J(j3).reason.find("modelCaps"), std::string::npos) << d.J(j3).reason;
  d.Check();
}

// A job no node could ever hold says so at once, and waits for a cluster that can.
TEST(SchedulerOverTimeTest, AJobNoNodeCanEverHoldSaysSo) {
  Driver d(2, 2, {Queue("a")});
  const int nine = d.Submit(Job("a", 9));
  JobSpec slice = Job("a", 0);
  slice.groups[0].demand.mig_profile = "1g.10gb";
  const int mig = d.Submit(slice);
  for (int i = 0; i < 100; ++i) d.Cycle(60);
  for (int id : {nine, mig}) {
    EXPECT_EQ(d.J(id).state, JobState::kPending);
    EXPECT_NE(d.J(id).reason.find("no node of the cluster can ever hold"), std::string::npos)
        << d.J(id).reason;
  }
  EXPECT_NE(d.J(nine).reason.find("9 GPUs on one node"), std::string::npos) << d.J(nine).reason;
  EXPECT_NE(d.J(mig).reason.find("MIG 1g.10gb"), std::string::npos) << d.J(mig).reason;
  EXPECT_EQ(d.s_.reservations().size(), 0u);
  // MIG-enabled nodes join: the slice job starts; the 9-GPU job still cannot.
  Cluster with_mig = SyntheticDgxCluster(2, 2, 1);
  ASSERT_EQ(d.s_.SetCluster(&with_mig, d.now_), "");
  d.Cycle();
  EXPECT_EQ(d.J(mig).state, JobState::kRunning);
  EXPECT_EQ(d.J(nine).state, JobState::kPending);
  d.Check();
}

// The extender's dry run scores nodes without committing; the bind then commits exactly.
TEST(SchedulerOverTimeTest, DryRunThenCommit) {
  Driver d(2, 2, {Queue("a")});
  d.Submit(Job("a", 4));
  d.Cycle();
  const int j = d.Submit(Job("a", 8));
  d.Handle(d.s_.SetNodeCordoned(1, true, d.now_));
  d.Cycle();  // pending: node 0 is half full and node 1 cordoned
  ASSERT_EQ(d.J(j).state, JobState::kPending);
  d.Handle(d.s_.SetNodeCordoned(1, false, d.now_));
  const std::vector<NodeVerdict> v = d.s_.Evaluate(d.J(j).spec, {0, 1});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].feasible);
  EXPECT_TRUE(v[1].feasible);
  EXPECT_EQ(v[1].placements.size(), 1u);
  d.Check();
  EXPECT_EQ(d.J(j).state, JobState::kPending);
  std::string why;
  ASSERT_TRUE(d.s_.StartAt(j, v[1].placements, d.now_, &why)) << why;
  EXPECT_EQ(d.J(j).state, JobState::kRunning);
  EXPECT_EQ(d.J(j).placements[0].node, 1);
  d.Check();
}

}  // namespace
}  // namespace berth
