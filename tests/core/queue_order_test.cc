#include "core/queue_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace berth {
namespace {

// Queues with their live usage, as the scheduler keeps them.
struct Fixture {
  ResourceVector capacity{100, 0, 0};
  std::vector<ResourceVector> usage;
  std::vector<double> weight;
  std::vector<std::vector<ResourceVector>> users;
  std::vector<WaitingJobs> waiting;
  std::vector<double> fair_gpus;  // per queue; none given: every queue is below its share
  static constexpr double kNoShare = std::numeric_limits<double>::infinity();
  double aging_per_s = 0;  // whole points per second of waiting, at the cycle's time `now`
  double now = 0;

  explicit Fixture(int queues, int users_per_queue = 1)
      : usage(queues),
        weight(queues, 1),
        users(queues, std::vector<ResourceVector>(users_per_queue)),
        waiting(queues) {}

  WaitingJobs::Job Add(int queue, int id, double submit, int user = 0, int priority = 0,
                       int shape_class = 0, ShapeSize shape = {1, 1, 0, 0}) {
    WaitingJobs::Job job{id, user, priority, submit, shape_class, shape};
    waiting[queue].Add(job);
    return job;
  }
  CycleOrder Order(std::vector<bool> sits_out = {}, CycleOrder::Skip skip = nullptr) {
    std::vector<CycleOrder::QueueView> views;
    for (size_t q = 0; q < usage.size(); ++q)
      views.push_back({&usage[q], weight[q], &users[q],
                       q < sits_out.size() && sits_out[q] ? nullptr : &waiting[q],
                       q < fair_gpus.size() ? fair_gpus[q] : kNoShare});
    return CycleOrder(
        std::move(views), capacity,
        [this](int priority, double submit) {
          return std::floor(priority + aging_per_s * (now - submit));
        },
        std::move(skip));
  }
  static std::vector<int> Drain(CycleOrder& order) {
    std::vector<int> ids;
    for (int id = order.Next(); id >= 0; id = order.Next()) ids.push_back(id);
    return ids;
  }
};

TEST(CycleOrderTest, QueueWithTheSmallestWeightedShareGoesFirstAndMovesBackWhenItGrows) {
  Fixture f(2);
  f.usage[0] = {30, 0, 0};
  f.usage[1] = {10, 0, 0};
  f.Add(0, 1, 0);
  f.Add(0, 2, 1);
  f.Add(1, 3, 0);
  f.Add(1, 4, 1);
  CycleOrder order = f.Order();
  EXPECT_EQ(order.Next(), 3);
  f.usage[1] = {40, 0, 0};  // job 3 started
  order.UsageChanged();
  EXPECT_EQ(order.Next(), 1);
  EXPECT_EQ(order.Next(), 2);
  EXPECT_EQ(order.Next(), 4);
  EXPECT_EQ(order.Next(), -1);
}

TEST(CycleOrderTest, QueuesBelowTheirFairShareGoFirstWhateverTheirDominantShare) {
  Fixture f(3);
  f.capacity = {100, 1000, 0};
  f.usage[0] = {10, 900, 0};  // dominant share 0.9 (CPU), below its fair share of 20 GPUs
  f.usage[1] = {30, 0, 0};    // 0.3, at its share of 30
  f.usage[2] = {50, 0, 0};    // 0.5, below its share of 60
  f.fair_gpus = {20, 30, 60};
  f.Add(0, 1, 0);
  f.Add(1, 2, 0);
  f.Add(2, 3, 0);
  f.Add(2, 4, 1);
  CycleOrder order = f.Order();
  EXPECT_EQ(order.Next(), 3);  // both below: the smaller dominant share first
  f.usage[2] = {60, 0, 0};     // job 3 started: queue 2 reaches its share
  order.UsageChanged();
  EXPECT_EQ(order.Next(), 1);
  EXPECT_EQ(order.Next(), 2);  // at their shares: the smaller dominant share first
  EXPECT_EQ(order.Next(), 4);
  EXPECT_EQ(order.Next(), -1);
}

TEST(CycleOrderTest, WeightsDivideTheShare) {
  Fixture f(2);
  f.usage[0] = {30, 0, 0};
  f.usage[1] = {20, 0, 0};
  f.weight[0] = 3;  // 0.1 against 0.2
  f.Add(0, 1, 5);
  f.Add(1, 2, 0);
  CycleOrder order = f.Order();
  EXPECT_EQ(order.Next(), 1);
}

TEST(CycleOrderTest, InsideAQueueHigherWholePriorityThenEarlierSubmit) {
  Fixture f(1);
  f.Add(0, 1, 10, 0, 0);
  f.Add(0, 2, 20, 0, 5);
  f.Add(0, 3, 5, 0, 0);
  CycleOrder order = f.Order();
  EXPECT_EQ(Fixture::Drain(order), (std::vector<int>{2, 3, 1}));
}

TEST(CycleOrderTest, AgingLetsAnOldLowPriorityJobPassANewHigherOne) {
  Fixture f(1);
  f.aging_per_s = 1;
  f.now = 100;
  f.Add(0, 1, 90, 0, 5);  // 5 + 10 = 15
  f.Add(0, 2, 0, 0, 0);   // 0 + 100 = 100
  f.Add(0, 3, 95, 0, 0);  // 0 + 5 = 5
  CycleOrder order = f.Order();
  EXPECT_EQ(Fixture::Drain(order), (std::vector<int>{2, 1, 3}));
}

TEST(CycleOrderTest, UsersShareByDrfInsideTheCycle) {
  Fixture f(1, 2);
  for (int i = 0; i < 3; ++i) f.Add(0, 10 + i, i, 0);  // user 0 submitted first
  for (int i = 0; i < 3; ++i) f.Add(0, 20 + i, 10 + i, 1);
  CycleOrder order = f.Order();
  std::vector<int> ids;
  for (int id = order.Next(); id >= 0; id = order.Next()) {
    ids.push_back(id);
    f.users[0][id / 20].gpu += 10;  // each starts and raises its user's share
  }
  EXPECT_EQ(ids, (std::vector<int>{10, 20, 11, 21, 12, 22}));
}

TEST(CycleOrderTest, AJobLeavingDuringTheCycleIsNotOfferedAndNoneTwice) {
  Fixture f(1);
  f.Add(0, 1, 0);
  const WaitingJobs::Job two = f.Add(0, 2, 1);
  f.Add(0, 3, 2);
  CycleOrder order = f.Order();
  EXPECT_EQ(order.Next(), 1);
  f.waiting[0].Remove(two);
  EXPECT_EQ(order.Next(), 3);
  EXPECT_EQ(order.Next(), -1);
  EXPECT_EQ(order.Next(), -1);
}

TEST(CycleOrderTest, AQueueSittingOutIsNotWalked) {
  Fixture f(2);
  f.Add(0, 1, 0);
  f.Add(1, 2, 0);
  CycleOrder order = f.Order({true, false});
  EXPECT_EQ(Fixture::Drain(order), (std::vector<int>{2}));
}

TEST(CycleOrderTest, AnExhaustedQueueOffersOnlyTheNamedJobsNotOfferedYet) {
  Fixture f(1);
  const WaitingJobs::Job a = f.Add(0, 1, 0);
  f.Add(0, 2, 1);
  const WaitingJobs::Job c = f.Add(0, 3, 2);
  f.Add(0, 4, 3);
  const WaitingJobs::Job e = f.Add(0, 5, 4);
  CycleOrder order = f.Order();
  EXPECT_EQ(order.Next(), 1);
  order.Exhaust(0, {e, a, c});
  order.Exhaust(0, {a});  // once per cycle: the first list stands
  EXPECT_EQ(Fixture::Drain(order), (std::vector<int>{5, 3}));
}

TEST(CycleOrderTest, TheIndexIsKeptBetweenCycles) {
  Fixture f(1);
  const WaitingJobs::Job a = f.Add(0, 1, 0);
  f.Add(0, 2, 1);
  {
    CycleOrder order = f.Order();
    EXPECT_EQ(Fixture::Drain(order), (std::vector<int>{1, 2}));
  }
  f.waiting[0].Remove(a);
  f.Add(0, 3, 0.5);
  CycleOrder next = f.Order();
  EXPECT_EQ(Fixture::Drain(next), (std::vector<int>{3, 2}));
  EXPECT_EQ(f.waiting[0].size(), 2u);
}

// Jobs to skip are never offered, the others come in the order they would without them, and
// each job is asked about at its turn (a job not to skip may be asked twice in a row): users
// interleaving by share and submit time, and a user's higher priority level before its lower one.
TEST(CycleOrderTest, JobsToSkipAreAskedAboutAtTheirTurnAndNeverOffered) {
  Fixture f(1, 3);
  for (int id = 1; id <= 30; ++id)
    f.Add(0, id, id, id % 3, id % 10 == 0 ? 1 : 0, 0, {1 + id % 4, 1, 0, 0});
  f.users[0][2] = {5, 0, 0};  // user 2 goes last
  CycleOrder plain = f.Order();
  const std::vector<int> all = Fixture::Drain(plain);
  std::vector<int> expected;
  for (int job : all)
    if (job % 4 == 0) expected.push_back(job);  // units 1
  std::vector<int> asked;
  CycleOrder order = f.Order({}, [&](int id, JobRecord*, int, const ShapeSize& size, int, double) {
    asked.push_back(id);
    return size.units > 1;
  });
  EXPECT_EQ(Fixture::Drain(order), expected);
  asked.erase(std::unique(asked.begin(), asked.end()), asked.end());  // asked again at once: same
  EXPECT_EQ(asked, all);
}

// What Skip says of a job counts at the job's turn, not before: a job that is to be skipped
// while the jobs ahead of it are offered, but not once its turn comes, is offered.
TEST(CycleOrderTest, SkipIsAskedWhenTheJobWouldBeOffered) {
  Fixture f(1, 2);
  for (int id = 1; id <= 6; ++id) f.Add(0, id, id, id % 2);
  bool skip_four = true;
  CycleOrder order = f.Order({}, [&](int id, JobRecord*, int, const ShapeSize&, int, double) {
    return id == 4 && skip_four;
  });
  EXPECT_EQ(order.Next(), 1);
  EXPECT_EQ(order.Next(), 2);
  EXPECT_EQ(order.Next(), 3);
  skip_four = false;
  EXPECT_EQ(Fixture::Drain(order), (std::vector<int>{4, 5, 6}));
}

// AllFail over a pass asks about a shape found failing once, and looks again from the start
// when a job of a new shape arrives. Failures dominate (job_shape.h): a shape at least as large
// as a failing one fails too.
TEST(CycleOrderTest, AllFailInAPassAsksEachFailingShapeOnce) {
  Fixture f(1);
  f.Add(0, 1, 0, 0, 0, 0, {1, 1, 5, 0});
  f.Add(0, 2, 1, 0, 0, 0, {2, 1, 1, 0});
  f.Add(0, 3, 2, 0, 0, 0, {3, 1, 3, 0});
  CycleOrder order = f.Order();
  std::vector<int64_t> asked;  // the cpu of each shape asked about
  int64_t failing_from = 3;    // shapes of at least this cpu fail
  auto fails = [&](int, const ShapeSize& size, int, double) {
    asked.push_back(size.cpu_milli);
    return size.cpu_milli >= failing_from;
  };
  // The group at its least (cpu 1), then each shape up to the first that does not fail.
  EXPECT_FALSE(order.AllFail(0, fails));
  EXPECT_EQ(asked, (std::vector<int64_t>{1, 5, 1}));
  failing_from = 1;
  asked.clear();
  EXPECT_TRUE(order.AllFail(0, fails));  // the whole group at once, from where it stopped
  EXPECT_EQ(asked, (std::vector<int64_t>{1}));
  f.Add(0, 4, 3, 0, 0, 0, {1, 1, 0, 5});  // a new shape, sorting before the others' end
  asked.clear();
  failing_from = 3;
  EXPECT_FALSE(order.AllFail(0, fails));
  EXPECT_EQ(asked, (std::vector<int64_t>{0, 0}));
}

TEST(WaitingJobsTest, AllFailAsksOnceForAGroupThatFailsAtItsLeastWithItsOldestSubmit) {
  WaitingJobs waiting;
  waiting.Add({1, 0, 0, 30, 7, {1, 1, 1000, 10}});
  const WaitingJobs::Job oldest{2, 1, 0, 10, 7, {1, 1, 1000, 10}};
  waiting.Add(oldest);
  waiting.Add({3, 0, 0, 20, 7, {2, 1, 500, 10}});
  int asked = 0;
  EXPECT_TRUE(waiting.AllFail([&](int cls, const ShapeSize& size, int, double submit) {
    ++asked;
    EXPECT_EQ(cls, 7);
    EXPECT_EQ(submit, 10);
    EXPECT_EQ(size.units, 1);
    EXPECT_EQ(size.cpu_milli, 500);  // the least of every dimension, over the group's shapes
    return true;
  }));
  EXPECT_EQ(asked, 1);
  // One shape that may still fit keeps the queue going.
  auto two_units = [](int, const ShapeSize& size, int, double) { return size.units >= 2; };
  EXPECT_FALSE(waiting.AllFail(two_units));
  waiting.Remove({1, 0, 0, 30, 7, {1, 1, 1000, 10}});
  waiting.Remove(oldest);
  EXPECT_TRUE(waiting.AllFail(two_units));
  waiting.Remove(oldest);  // gone already: nothing changes
  EXPECT_EQ(waiting.size(), 1u);
}

// A group whose least size may fit is asked shape by shape: each may still fail.
TEST(WaitingJobsTest, AGroupWhoseLeastMayFitIsAskedShapeByShape) {
  WaitingJobs waiting;
  waiting.Add({1, 0, 0, 0, 7, {1, 1, 4000, 10}});
  waiting.Add({2, 0, 0, 1, 7, {2, 1, 2000, 10}});
  std::vector<std::pair<int, int64_t>> asked;
  EXPECT_TRUE(waiting.AllFail([&](int, const ShapeSize& size, int, double) {
    asked.push_back({size.units, size.cpu_milli});
    return size.units >= 2 || size.cpu_milli >= 4000;
  }));
  EXPECT_EQ(asked, (std::vector<std::pair<int, int64_t>>{{1, 2000}, {1, 4000}, {2, 2000}}));
}

}  // namespace
}  // namespace berth
