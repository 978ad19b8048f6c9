#include "core/preemption.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "allocator_test_util.h"
#include "core/scheduler.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

int Take(Allocator& a, const AllocationRequest& request) {
  std::string why;
  const std::optional<int> id = a.Allocate(request, &why);
  EXPECT_TRUE(id.has_value()) << why;
  return id.value_or(-1);
}

// research is guaranteed two whole DGX nodes. Borrowers (work outside any VC) fill every node
// the VC has not bound, so a reclaim would have victims everywhere; whether it could help
// depends only on the VC's own free GPUs and the cells its guarantee has left to bind.
TEST(ReplicaBoundTest, AReclaimCanHelpOnlyAsFarAsTheGuaranteeHasCellsLeftToBind) {
  const Cluster cluster = ExampleCluster("multi-rack.yaml");
  Allocator a(&cluster, ExampleVcs());
  ASSERT_EQ(a.error(), "");
  const int research = VcIndex(a, "research");
  Take(a, ForVc(WholeGpus(5), research));  // binds one node cell: 3 GPUs left in it
  while (a.Allocate(WholeGpus(8))) {
  }
  // One cell still to bind: an 8-GPU job may fit once borrowers leave, two may not.
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, 8, 1, research));
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, 8, 2, research));
  // The bound cell's 3 free GPUs count as they are.
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, 3, 1, research));

  Take(a, ForVc(WholeGpus(5), research));  // binds the second cell: 3 + 3 free, none to bind
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, 4, 1, research));
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, 3, 2, research));
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, 3, 3, research));
  // The same through a job spec; a job asking for a GPU share is not bounded.
  JobSpec four;
  four.groups.push_back(TaskGroup{});
  four.groups[0].demand.gpus = 4;
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, four, research));
  JobSpec share = four;
  share.groups[0].demand.gpus = 0;
  share.groups[0].demand.gpu_milli = 500;
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, share, research));
}

// A running job as the engine hands it to the search, placed on `node` by the allocator.
JobRecord Running(Allocator& a, int id, int queue, int priority, int node, int gpus) {
  JobRecord j;
  j.id = id;
  j.queue = queue;
  j.spec.priority = priority;
  j.state = JobState::kRunning;
  j.start_time = 0;
  const int allocation = Take(a, OnNode(WholeGpus(gpus), node));
  j.allocations = {allocation};
  j.placements = a.Find(allocation)->replicas;
  j.replicas = 1;
  j.gpu_equivalents = gpus;
  return j;
}

// Node 0 holds queue 1's priority-5 job on `gpus` GPUs, node 1 `gpus` of its lower-priority
// jobs on one GPU each; every other GPU is held by non-candidates. A job of `gpus` GPUs fits on
// either node once that node's candidates are gone: one victim on node 0, `gpus` on node 1.
class LowestFirstTest : public ::testing::Test {
 protected:
  LowestFirstTest() : cluster_(SyntheticDgxCluster(2, 2, 0)) {}
  void Layout(int gpus, const std::vector<int>& low_priorities) {
    Allocator& a = alloc_.emplace(&cluster_, std::vector<VirtualClusterSpec>{});
    low_.clear();
    spec_ = JobSpec();
    high_ = Running(a, 1, 1, 5, 0, gpus);
    for (size_t i = 0; i < low_priorities.size(); ++i)
      low_.push_back(Running(a, 2 + static_cast<int>(i), 1, low_priorities[i], 1, 1));
    Take(a, OnNode(WholeGpus(8 - gpus), 0));
    Take(a, OnNode(WholeGpus(8 - static_cast<int>(low_priorities.size())), 1));
    spec_.groups.push_back(TaskGroup{});
    spec_.groups[0].demand.gpus = gpus;
    search_.alloc = &a;
    search_.spec = &spec_;
    search_.now = 10;
    search_.allowed = [](const std::vector<JobRecord*>&) { return true; };
    search_.fits = [this](Allocator& trial, const std::vector<JobRecord*>&, TrialPlacement* where) {
      std::string why;
      const std::optional<int> id = trial.Allocate(WholeGpus(spec_.groups[0].demand.gpus), &why);
      if (id) where->where = trial.Find(*id)->replicas;
      return id.has_value();
    };
  }
  std::vector<JobRecord*> Candidates() {
    std::vector<JobRecord*> all = {&high_};
    for (JobRecord& j : low_) all.push_back(&j);
    return all;
  }
  static std::vector<int> Ids(const std::optional<VictimPlan>& plan) {
    std::vector<int> ids;
    if (plan)
      for (const JobRecord* v : plan->victims) ids.push_back(v->id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  static double Raw(const JobRecord& j) { return j.spec.priority; }

  Cluster cluster_;
  std::optional<Allocator> alloc_;  // a fresh one per layout
  JobRecord high_;
  std::vector<JobRecord> low_;
  JobSpec spec_;
  VictimSearch search_;
};

TEST_F(LowestFirstTest, TheFewestVictimsAloneTakeTheHigherPriorityJob) {
  Layout(3, {0, 0, 0});
  EXPECT_EQ(Ids(FindVictims(search_, Candidates())), std::vector<int>({1}));
}

TEST_F(LowestFirstTest, AQueuesLowerPriorityJobsGoFirst) {
  Layout(3, {0, 0, 0});
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {})),
            std::vector<int>({2, 3, 4}));
  // By tiers: the priority-0 jobs cannot free 3 GPUs alone, with the priority-1 job they can.
  low_[2].spec.priority = 1;
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {})),
            std::vector<int>({2, 3, 4}));
}

TEST_F(LowestFirstTest, AHigherTierIsSearchedWhenTheLowerOnesCannotFit) {
  Layout(3, {0, 0, 0});
  low_.pop_back();  // two candidates free only 2 GPUs of node 1
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {})), std::vector<int>({1}));
}

TEST_F(LowestFirstTest, AJobThatCouldNotComeBackOverThemIsNotHeldBack) {
  Layout(3, {0, 0, 0});
  // Aged past the priority-5 job's whole priority, the low jobs are not below it.
  auto aged = [](const JobRecord& j) { return j.spec.priority == 0 ? 9.0 : 5.0; };
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), aged, {})), std::vector<int>({1}));
  // Nor are another queue's jobs.
  for (JobRecord& j : low_) j.queue = 0;
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {})), std::vector<int>({1}));
  // Nor movers: they restart elsewhere.
  for (JobRecord& j : low_) j.queue = 1;
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {&low_[0], &low_[1], &low_[2]})),
            std::vector<int>({1}));
  // And a mover comes back over nobody: it is searched with the lowest tier.
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {&high_})),
            std::vector<int>({1}));
}

TEST_F(LowestFirstTest, ManyPrioritiesStillGoLowestFirst) {
  // Four priorities below the high job's: only the fourth tier frees node 1.
  Layout(4, {0, 1, 2, 3});
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {})),
            std::vector<int>({2, 3, 4, 5}));
  // Aging leaves gaps: whole priorities 0, 50, 2, 60 and 100 put the low jobs in tiers 0, 1, 1
  // and 3, the high job in 4.
  auto aged = [](const JobRecord& j) {
    const std::map<int, double> whole = {{0, 0}, {1, 50}, {2, 2}, {3, 60}, {5, 100}};
    return whole.at(j.spec.priority);
  };
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), aged, {})),
            std::vector<int>({2, 3, 4, 5}));
  // Three low jobs free only 3 GPUs: no tier fits but the last, and the high job goes.
  Layout(4, {0, 1, 2});
  EXPECT_EQ(Ids(FindVictimsLowestFirst(search_, Candidates(), Raw, {})), std::vector<int>({1}));
}

}  // namespace
}  // namespace berth
