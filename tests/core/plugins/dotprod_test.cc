#include <gtest/gtest.h>

#include <cmath>

#include "core/plugins/gpu_choice.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

TEST(DotProdTest, SmallerDotProductScoresHigher) {
  const Cluster cluster =
      OpenbTestCluster({{.cpu_milli = 64000, .gpus = 4}, {.cpu_milli = 16000, .gpus = 1}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const auto dotprod = MakeScoreOrDie("dotprod");
  TaskGroup group;
  group.demand = WholeDemand(1, 8000);
  const PlacementContext ctx = ContextFor(alloc, group);
  // (64000 / 128000)(8000 / 128000) + (4000 / 8000)(1000 / 8000) = .09375: 100 (1 - .046875).
  EXPECT_EQ(dotprod->Score(ctx, GpuCandidate(0, {0})), 95);
  // (16000 / 128000)(8000 / 128000) + (1000 / 8000)(1000 / 8000) = .0234: 100 (1 - .0117).
  EXPECT_EQ(dotprod->Score(ctx, GpuCandidate(1, {0})), 98);
}

TEST(DotProdTest, SharesGoToTheBestFitGpu) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 64000, .gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const int used = GpuOf(alloc, Place(&alloc, 0, ShareDemand(500)));
  const auto dotprod = MakeScoreOrDie("dotprod");
  TaskGroup group;
  group.demand = ShareDemand(500, 1000);
  const PlacementContext ctx = ContextFor(alloc, group);
  const double on_used = dotprod->Score(ctx, GpuCandidate(0, {used}));
  EXPECT_EQ(on_used, std::floor(on_used));
  EXPECT_DOUBLE_EQ(dotprod->Score(ctx, GpuCandidate(0, {1 - used})), on_used - kOtherGpuPenalty);
}

}  // namespace
}  // namespace berth
