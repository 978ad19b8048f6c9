#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fragmentation.h"
#include "core/plugins/gpu_choice.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

class FgdTest : public ::testing::Test {
 protected:
  const std::vector<TypicalPod> pods_ = {Typical(1, 500, .5), Typical(1, 1000, .5)};
  std::unique_ptr<ScorePlugin> fgd_ = MakeScoreOrDie("fgd");
};

// int(sigmoid(delta / 1000) * 100)
int Expected(double delta) { return static_cast<int>(100 / (1 + std::exp(-delta / 1000))); }

TEST_F(FgdTest, PrefersTheGpuThatGrowsFragmentationLeast) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const int used = GpuOf(alloc, Place(&alloc, 0, ShareDemand(400)));
  const int fresh = 1 - used;
  TaskGroup group;
  group.demand = ShareDemand(100);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.typical_pods = &pods_;

  // Before: {600, 1000}: the 500 pod fits with nothing below it, the 1000 pod leaves 600: 300.
  // On the used GPU: {500, 1000}: 250, a gain of 50. On the fresh one: {600, 900}: the 1000
  // pod no longer fits anywhere, .5 x 1500 = 750, a loss of 450.
  const double on_used = fgd_->Score(ctx, GpuCandidate(0, {used}));
  const double on_fresh = fgd_->Score(ctx, GpuCandidate(0, {fresh}));
  EXPECT_EQ(on_used, Expected(50));
  EXPECT_EQ(on_used, 51);
  // Not the GPU the reference takes on this node: its own score, a little less.
  EXPECT_DOUBLE_EQ(on_fresh, Expected(-450) - kOtherGpuPenalty);
  EXPECT_GT(on_used, on_fresh);
}

TEST_F(FgdTest, TiedGpusLeaveOneChoicePerNode) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 3}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const int a = GpuOf(alloc, Place(&alloc, 0, ShareDemand(600)));
  const int b = GpuOf(alloc, Place(&alloc, 0, ShareDemand(600)));
  ASSERT_NE(a, b);
  TaskGroup group;
  group.demand = ShareDemand(100);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.typical_pods = &pods_;
  // Both shared GPUs have 400 free: the same score; the reference takes the lower index.
  const double first = fgd_->Score(ctx, GpuCandidate(0, {std::min(a, b)}));
  const double second = fgd_->Score(ctx, GpuCandidate(0, {std::max(a, b)}));
  EXPECT_EQ(first, std::floor(first));
  EXPECT_DOUBLE_EQ(second, first - kOtherGpuPenalty);
}

TEST_F(FgdTest, WholeGpusAndCpuOnly) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 4000, .gpus = 2}, {.gpus = 4}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  TaskGroup group;
  group.demand = WholeDemand(1, 2000);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.typical_pods = &pods_;
  // Taking a whole GPU of an empty node leaves whole GPUs: no fragment before or after.
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(1, {0})), 50);
  // On node 0, 2000 of 4000 CPU milli is left: both typical pods still fit.
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(0, {0})), 50);

  // A CPU-only pod that leaves node 0 less CPU than the typical pods need makes all its free
  // GPU milli fragment: 2000 more.
  group.demand = CpuDemand(3500);
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(0, {})), Expected(-2000));
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(1, {})), 50);
}

TEST_F(FgdTest, NoTypicalPodsIsNeutral) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}});
  Allocator alloc(&cluster, {});
  TaskGroup group;
  group.demand = ShareDemand(100);
  const PlacementContext ctx = ContextFor(alloc, group);
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(0, {0})), 0);
}

TEST_F(FgdTest, FollowsChangesOfTheTypicalPods) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}});
  Allocator alloc(&cluster, {});
  const int used = GpuOf(alloc, Place(&alloc, 0, ShareDemand(400)));
  TaskGroup group;
  group.demand = ShareDemand(100);
  std::vector<TypicalPod> pods = pods_;
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.typical_pods = &pods;
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(0, {used})), 51);
  // Only 1000 pods: {600, 1000} has 600 fragment; {500, 1000} 500: a gain of 100.
  pods = {Typical(1, 1000, 1)};
  EXPECT_EQ(fgd_->Score(ctx, GpuCandidate(0, {used})), Expected(100));
  // Changed in place, at the same size, as its version says: 550 pods fit {600, 1000} whole,
  // and {500, 1000} leaves 500 fragment, a loss of 500 (the fresh GPU, {600, 900}, loses
  // nothing: the reference takes it).
  pods[0] = Typical(1, 550, 1);
  ctx.typical_pods_version = 1;
  EXPECT_DOUBLE_EQ(fgd_->Score(ctx, GpuCandidate(0, {used})), Expected(-500) - kOtherGpuPenalty);
}

// Scores every candidate twice, from a FragmentationTracker and from the plugin's own view of
// the allocator, and takes the first best by the tracker's scores.
class ComparingChooser : public PlacementChooser {
 public:
  ComparingChooser(const ScorePlugin* fgd, const PlacementContext& with_tracker)
      : fgd_(fgd), with_(with_tracker), without_(with_tracker) {
    without_.fragmentation = nullptr;
  }

  int Choose(const AllocationRequest& /*request*/, const CandidateList& candidates,
             const std::vector<ReplicaPlacement>& /*placed*/, size_t /*first*/) override {
    int best = -1;
    double best_score = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const double score = fgd_->Score(with_, candidates[i]);
      EXPECT_EQ(score, fgd_->Score(without_, candidates[i])) << "node " << candidates[i].node;
      ++compared;
      if (best < 0 || score > best_score) best = static_cast<int>(i), best_score = score;
    }
    return best;
  }

  int compared = 0;

 private:
  const ScorePlugin* fgd_;
  PlacementContext with_, without_;
};

TEST_F(FgdTest, TrackerScoresEqualTheAllocatorsOverPlacements) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 8000, .gpus = 2},
                                            {.gpus = 4, .model = "B"},
                                            {.gpus = 8},
                                            {.cpu_milli = 16000, .gpus = 4, .model = "B"}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  std::vector<TypicalPod> pods = {Typical(1, 500, .3), Typical(1, 1000, .3), Typical(2, 1000, .2),
                                  Typical(1, 250, .1), Typical(0, 0, .1)};
  pods[3].models = {"B"};
  const FragmentationModel model(&cluster, pods);
  FragmentationTracker tracker(&model, alloc);
  TaskGroup group;
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.typical_pods = &pods;
  ctx.fragmentation = &tracker;
  const std::vector<Demand> demands = {ShareDemand(300), WholeDemand(1),   ShareDemand(500),
                                       CpuDemand(3000),  WholeDemand(2),   ShareDemand(700),
                                       ShareDemand(250), WholeDemand(4),   ShareDemand(100, 4000),
                                       CpuDemand(500),   ShareDemand(900), WholeDemand(1, 6000)};
  ComparingChooser chooser(fgd_.get(), ctx);
  int placed = 0;
  for (int round = 0; round < 3; ++round)
    for (const Demand& d : demands) {
      group.demand = d;
      AllocationRequest req;
      req.demand = d;
      if (const auto id = alloc.Allocate(req, nullptr, &chooser)) {
        tracker.Refresh(alloc, alloc.Find(*id)->replicas[0].node);
        ++placed;
      }
    }
  EXPECT_GT(placed, 20);
  EXPECT_GT(chooser.compared, 50);
}

}  // namespace
}  // namespace berth
