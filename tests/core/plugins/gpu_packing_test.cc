#include <gtest/gtest.h>

#include "core/plugins/gpu_choice.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

// Node 0 has a partly used GPU, node 1 a whole GPU in use, node 2 nothing in use.
class GpuPackingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(alloc_.error(), "");
    shared_ = GpuOf(alloc_, Place(&alloc_, 0, ShareDemand(300)));
    Place(&alloc_, 1, WholeDemand(1));
  }

  const Cluster cluster_ = OpenbTestCluster({{.gpus = 4}, {.gpus = 4}, {.gpus = 4}});
  Allocator alloc_{&cluster_, {}};
  int shared_ = -1;
  std::unique_ptr<ScorePlugin> packing_ = MakeScoreOrDie("gpu-packing");
};

TEST_F(GpuPackingTest, PartlyUsedGpusThenUsedNodesThenEmptyNodes) {
  TaskGroup group;
  group.demand = ShareDemand(200);
  const PlacementContext ctx = ContextFor(alloc_, group);
  const int fresh_on_0 = shared_ == 0 ? 1 : 0;
  // The shared GPU: 100 - (700 * 100 / 1000) / 10 = 93.
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(0, {shared_})), 93);
  // A fresh GPU of node 0 is not the best fit GPU there.
  EXPECT_DOUBLE_EQ(packing_->Score(ctx, GpuCandidate(0, {fresh_on_0})), 93 - kOtherGpuPenalty);
  // A free GPU on a used node: 50 - 1.
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(1, {3})), 49);
  // An empty node: max(33 - 4, 4).
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(2, {0})), 29);
}

TEST_F(GpuPackingTest, WholeGpuPods) {
  TaskGroup group;
  group.demand = WholeDemand(2);
  const PlacementContext ctx = ContextFor(alloc_, group);
  // Node 0 is in use (a share): two fully free GPUs taken, 50 - 2.
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(0, {2, 3})), 48);
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(1, {2, 3})), 48);
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(2, {0, 1})), 29);
  group.demand = CpuDemand(1000);
  EXPECT_EQ(packing_->Score(ctx, GpuCandidate(2, {})), 0);
}

}  // namespace
}  // namespace berth
