#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fragmentation.h"
#include "core/plugins/gpu_choice.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

TypicalPod Typical(int gpus, int milli, double frequency) {
  TypicalPod t;
  t.cpu_milli = 1000;
  t.gpus = gpus;
  t.gpu_milli = milli;
  t.frequency = frequency;
  return t;
}

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
}

}  // namespace
}  // namespace berth
