#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/fragmentation.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

// gpu_exponent 0: a lost pod counts one pod's worth whatever its GPUs.
std::unique_ptr<ScorePlugin> Scarcity(double scale, double from = 0, double gpu_exponent = 0) {
  PluginConfig config;
  config.name = "scarcity";
  config.params = {{"scale", scale}, {"from", from}, {"gpuExponent", gpu_exponent}};
  std::string error;
  auto plugin = MakeScore(config, &error);
  EXPECT_NE(plugin, nullptr) << error;
  return plugin;
}

TEST(ScarcityTest, NeutralWithoutAFragmentationTracker) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}});
  Allocator alloc(&cluster, {});
  TaskGroup group;
  group.demand = WholeDemand(1);
  const PlacementContext ctx = ContextFor(alloc, group);
  EXPECT_EQ(MakeScoreOrDie("scarcity")->Score(ctx, GpuCandidate(0, {0})), 100);
}

// Two nodes of `gpus` GPUs, one GPU of node 0 taken: `score`'s verdicts on a 1-GPU pod on node
// 0's next GPU and on node 1, the last empty node.
std::pair<double, double> BesideAUsedNode(int gpus, std::vector<TypicalPod> shapes,
                                          const ScorePlugin& score) {
  const Cluster cluster = OpenbTestCluster({{.gpus = gpus}, {.gpus = gpus}});
  Allocator alloc(&cluster, {});
  EXPECT_EQ(alloc.error(), "");
  Place(&alloc, 0, WholeDemand(1));
  const FragmentationModel model(&cluster, std::move(shapes));
  const FragmentationTracker tracker(&model, alloc);
  TaskGroup group;
  group.demand = WholeDemand(1);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.fragmentation = &tracker;
  score.PreScore(ctx);
  return {score.Score(ctx, GpuCandidate(0, {1})), score.Score(ctx, GpuCandidate(1, {0}))};
}

TEST(ScarcityTest, KeepsTheLastHostOfAScarceShape) {
  // Node 0 no longer hosts the 4-GPU shape; node 1 is the last node that does. A 1-GPU pod
  // costs nothing on node 0 and breaks the last 4-GPU host on node 1.
  const std::vector<TypicalPod> shapes = {Typical(1, 1000, .8), Typical(4, 1000, .2)};
  const auto [used, last] = BesideAUsedNode(4, shapes, *Scarcity(10));
  EXPECT_EQ(used, 100);
  // lost = .2 x 1000 / 1 host = 200 (one pod's worth, whatever its 4 GPUs): 100 x 10 / 210.
  EXPECT_NEAR(last, 1000.0 / 210, 1e-9);
  // By default a lost pod is worth its GPUs to the power .75: 200 x 4^.75 = 565.7.
  EXPECT_NEAR(BesideAUsedNode(4, shapes, *MakeScoreOrDie("scarcity")).second,
              1000 / (10 + 200 * std::pow(4, .75)), 1e-9);
}

TEST(ScarcityTest, KeepsTheHostsOfRareMultiGpuShapes) {
  // The 8-GPU shape is past the typical pods' coverage (rare): FGD leaves it out, scarcity
  // keeps its last host, the empty node 1.
  TypicalPod rare = Typical(8, 1000, .01);
  rare.rare = true;
  const auto [used, last] = BesideAUsedNode(8, {Typical(1, 1000, 1), rare}, *Scarcity(10));
  EXPECT_EQ(used, 100);
  // lost = .01 x 1000 / 1 host = 10: 100 x 10 / 20.
  EXPECT_NEAR(last, 50, 1e-9);
}

TEST(ScarcityTest, CountsFollowTheCluster) {
  // Two empty 2-GPU nodes host the 2-GPU shape: breaking either costs 1 x 1000 / 2 = 500,
  // breaking the last one twice that.
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}, {.gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const FragmentationModel model(&cluster, {Typical(2, 1000, 1)});
  FragmentationTracker tracker(&model, alloc);
  TaskGroup group;
  group.demand = ShareDemand(500);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.fragmentation = &tracker;
  const auto scarcity = Scarcity(1000);
  scarcity->PreScore(ctx);
  EXPECT_NEAR(scarcity->Score(ctx, GpuCandidate(0, {0})), 100 * 1000.0 / 1500, 1e-9);
  EXPECT_NEAR(scarcity->Score(ctx, GpuCandidate(1, {0})), 100 * 1000.0 / 1500, 1e-9);
  Place(&alloc, 0, ShareDemand(500));
  tracker.Refresh(alloc, 0);
  // Before the next decision node 0 is recounted, and node 1 is the last host.
  // lost = 1 x 1000 / 1 = 1000.
  scarcity->PreScore(ctx);
  EXPECT_EQ(scarcity->Score(ctx, GpuCandidate(0, {0})), 100);
  EXPECT_NEAR(scarcity->Score(ctx, GpuCandidate(1, {0})), 100 * 1000.0 / 2000, 1e-9);
}

// With `from`, it counts only once that share of the cluster's GPU milli is allocated.
TEST(ScarcityTest, CountsFromAnAllocatedShare) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}, {.gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const FragmentationModel model(&cluster, {Typical(2, 1000, 1)});
  FragmentationTracker tracker(&model, alloc);
  TaskGroup group;
  group.demand = WholeDemand(1);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.fragmentation = &tracker;
  const auto scarcity = Scarcity(1000, 0.5);
  scarcity->PreScore(ctx);
  EXPECT_EQ(scarcity->Score(ctx, GpuCandidate(1, {0})), 100);  // none of 4 GPUs allocated
  Place(&alloc, 0, WholeDemand(2));
  tracker.Refresh(alloc, 0);
  scarcity->PreScore(ctx);  // 2 of 4: half allocated; node 1 is the last host of 2 GPUs
  EXPECT_NEAR(scarcity->Score(ctx, GpuCandidate(1, {0})), 100 * 1000.0 / 2000, 1e-9);
}

TEST(ScarcityTest, RejectsABadScale) {
  std::string error;
  PluginConfig config;
  config.name = "scarcity";
  config.params = {{"scale", 0}};
  EXPECT_EQ(MakeScore(config, &error), nullptr);
  EXPECT_NE(error.find("scale"), std::string::npos);
  config.params = {{"from", 1.5}};
  EXPECT_EQ(MakeScore(config, &error), nullptr);
  EXPECT_NE(error.find("\"from\" must be from 0 to 1"), std::string::npos) << error;
  for (double bad : {-1.0, 2.5, std::nan("")}) {
    config.params = {{"gpuExponent", bad}};
    EXPECT_EQ(MakeScore(config, &error), nullptr) << bad;
    EXPECT_NE(error.find("\"gpuExponent\" must be from 0 to 2"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace berth
