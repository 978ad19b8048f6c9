#include <gtest/gtest.h>

#include "core/plugins/gpu_choice.h"
#include "openb_test_cluster.h"

namespace berth {
namespace {

// Node 0 runs a share, node 1 a 1-GPU pod, node 2 nothing, node 3 both kinds.
class GpuClusteringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(alloc_.error(), "");
    Place(&alloc_, 0, ShareDemand(500));
    Place(&alloc_, 1, WholeDemand(1));
    Place(&alloc_, 3, ShareDemand(500));
    Place(&alloc_, 3, WholeDemand(1));
    Place(&alloc_, 2, CpuDemand(4000));  // CPU-only pods have no GPU affinity
  }

  const Cluster cluster_ = OpenbTestCluster({{.gpus = 4}, {.gpus = 4}, {.gpus = 4}, {.gpus = 4}});
  Allocator alloc_{&cluster_, {}};
  std::unique_ptr<ScorePlugin> clustering_ = MakeScoreOrDie("gpu-clustering");
};

TEST_F(GpuClusteringTest, SameGpuRequestFirst) {
  TaskGroup group;
  group.demand = ShareDemand(100);
  const PlacementContext ctx = ContextFor(alloc_, group);
  const int free_gpu = 3;  // a GPU nobody holds on every node (allocations take low ones first)
  // base = 25 * (8000 - free milli) / 8000.
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {free_gpu})), 12 + 25);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(1, {free_gpu})), 15 + 0);
  // The share's own GPU is the best fit one on nodes 0 and 3.
  for (int g = 0; g < 4; ++g) {
    if (alloc_.gpu_used_milli(0, g) == 500) {
      EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(0, {g})), 14 + 75);
    }
    if (alloc_.gpu_used_milli(3, g) == 500) {
      EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(3, {g})), 17 + 50);
    }
  }

  group.demand = WholeDemand(1);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(1, {free_gpu})), 15 + 75);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(0, {free_gpu})), 14 + 0);
  group.demand = WholeDemand(2);  // a "2-gpu" affinity nobody has yet
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(1, {2, 3})), 15 + 0);
  group.demand = CpuDemand(1000);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {})), 0);
}

TEST_F(GpuClusteringTest, FollowsAllocationsAndReleases) {
  TaskGroup group;
  group.demand = WholeDemand(1);
  const PlacementContext ctx = ContextFor(alloc_, group);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {3})), 12 + 25);
  const int id = Place(&alloc_, 2, WholeDemand(1));
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {3})), 15 + 75);
  alloc_.Release(id);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {3})), 12 + 25);
  // Another allocator (a what-if copy) is followed too.
  Allocator copy = alloc_;
  Place(&copy, 2, ShareDemand(300));
  const PlacementContext copy_ctx = ContextFor(copy, group);
  EXPECT_DOUBLE_EQ(clustering_->Score(copy_ctx, GpuCandidate(2, {3})), 13 + 0);
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {3})), 12 + 25);
}

// Scores every candidate with the plugin (as the pipeline does, in the middle of the
// allocation) and takes the one on `node`.
class ScoringChooser : public PlacementChooser {
 public:
  ScoringChooser(const ScorePlugin* plugin, PlacementContext ctx, int node)
      : plugin_(plugin), ctx_(ctx), node_(node) {}
  int Choose(const AllocationRequest&, const CandidateList& candidates,
             const std::vector<ReplicaPlacement>&, size_t) override {
    int pick = -1;
    for (size_t i = 0; i < candidates.size(); ++i) {
      plugin_->Score(ctx_, candidates[i]);
      if (candidates[i].node == node_ && pick < 0) pick = static_cast<int>(i);
    }
    return pick;
  }

 private:
  const ScorePlugin* plugin_;
  PlacementContext ctx_;
  int node_;
};

TEST_F(GpuClusteringTest, CountsAnAllocationItScoredWhileItWasBeingPlaced) {
  // The allocator lists an allocation before its replicas are placed; scoring its candidates
  // then must not mark it as counted with no replicas.
  TaskGroup group;
  group.demand = WholeDemand(1);
  const PlacementContext ctx = ContextFor(alloc_, group);
  ScoringChooser chooser(clustering_.get(), ctx, 2);
  AllocationRequest req;
  req.demand = WholeDemand(1);
  std::string why;
  ASSERT_TRUE(alloc_.Allocate(req, &why, &chooser, 0).has_value()) << why;
  EXPECT_DOUBLE_EQ(clustering_->Score(ctx, GpuCandidate(2, {3})), 15 + 75);
}

}  // namespace
}  // namespace berth
