#include <gtest/gtest.h>

#include "core/plugins/gpu_choice.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

TEST(BestFitTest, LeastWeightedLeftoverWins) {
  const Cluster cluster =
      OpenbTestCluster({{.cpu_milli = 32000, .gpus = 1}, {.cpu_milli = 64000, .gpus = 4}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const auto bestfit = MakeScoreOrDie("bestfit");
  TaskGroup group;
  group.demand = WholeDemand(1, 4000);
  const PlacementContext ctx = ContextFor(alloc, group);
  // Node 0: .5 x 28000 / 128000 + .5 x 0 / 8000 = .109: 89.
  EXPECT_EQ(bestfit->Score(ctx, GpuCandidate(0, {0})), 89);
  // Node 1: .5 x 60000 / 128000 + .5 x 3000 / 8000 = .422: 57.
  EXPECT_EQ(bestfit->Score(ctx, GpuCandidate(1, {0})), 57);
}

TEST(BestFitTest, SharesGoToTheBestFitGpu) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 64000, .gpus = 4}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const int a = GpuOf(alloc, Place(&alloc, 0, ShareDemand(300)));  // 700 free
  const int b = GpuOf(alloc, Place(&alloc, 0, ShareDemand(800)));  // 200 free
  const auto bestfit = MakeScoreOrDie("bestfit");
  TaskGroup group;
  group.demand = ShareDemand(200, 2000);
  const PlacementContext ctx = ContextFor(alloc, group);
  // Free: 62000 - 2000 CPU milli, 2900 - 200 GPU milli:
  // .5 x 60000 / 128000 + .5 x 2700 / 8000 = .403: 59.
  const double best = bestfit->Score(ctx, GpuCandidate(0, {b}));
  EXPECT_EQ(best, 59);
  EXPECT_DOUBLE_EQ(bestfit->Score(ctx, GpuCandidate(0, {a})), best - kOtherGpuPenalty);
  int fresh = 0;
  while (fresh == a || fresh == b) ++fresh;
  EXPECT_DOUBLE_EQ(bestfit->Score(ctx, GpuCandidate(0, {fresh})), best - kOtherGpuPenalty);
}

}  // namespace
}  // namespace berth
