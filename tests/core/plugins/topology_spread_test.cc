#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

// Six nodes in three racks of two.
class TopologySpreadPluginTest : public ::testing::Test {
 protected:
  TopologySpreadPluginTest() : h(SyntheticDgxCluster(6, 2, 0)) {
    h.demand().gpus = 1;
    h.job.spread.push_back({"rack", 1, true});
  }
  PluginHarness h;
  std::unique_ptr<FilterPlugin> filter = Filter("topology-spread");
  std::unique_ptr<ScorePlugin> score = Score("topology-spread");
};

TEST_F(TopologySpreadPluginTest, MaxSkewOneAcrossThreeRacks) {
  // Nothing placed: every rack is fine.
  for (int n = 0; n < 6; ++n) EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(n, {0}))) << n;
  h.Placed(0);  // rack-0: 1, rack-1: 0, rack-2: 0
  EXPECT_FALSE(filter->Feasible(h.ctx(), Cand(0, {1})));
  EXPECT_FALSE(filter->Feasible(h.ctx(), Cand(1, {0})));
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(2, {0})));
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(5, {0})));
  h.Placed(3);  // rack-1: 1
  EXPECT_FALSE(filter->Feasible(h.ctx(), Cand(2, {0})));
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(4, {0})));
  h.Placed(4);  // 1, 1, 1: any rack again
  for (int n = 0; n < 6; ++n) EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(n, {0}))) << n;
}

TEST_F(TopologySpreadPluginTest, TheFilterIsSkippedWithoutAHardConstraint) {
  EXPECT_FALSE(filter->Skip(h.ctx()));
  h.job.spread = {{"rack", 1, false}};
  EXPECT_TRUE(filter->Skip(h.ctx()));
  h.job.spread.clear();
  EXPECT_TRUE(filter->Skip(h.ctx()));
}

TEST_F(TopologySpreadPluginTest, TheJobsEarlierGroupsCount) {
  std::vector<ReplicaPlacement> earlier(2);  // rack-0 and rack-1
  earlier[0].node = 0;
  earlier[1].node = 2;
  PlacementContext ctx = h.ctx();
  ctx.job_placed = &earlier;
  EXPECT_FALSE(filter->Feasible(ctx, Cand(1, {0})));
  EXPECT_FALSE(filter->Feasible(ctx, Cand(3, {0})));
  EXPECT_TRUE(filter->Feasible(ctx, Cand(4, {0})));
  h.job.spread[0].hard = false;
  EXPECT_DOUBLE_EQ(score->Score(ctx, Cand(4, {0})), 100);
  EXPECT_DOUBLE_EQ(score->Score(ctx, Cand(1, {0})), 50);  // skew 2
}

TEST_F(TopologySpreadPluginTest, LargerSkewAndNodeKey) {
  h.job.spread = {{"rack", 2, true}};
  h.Placed(0);
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(1, {0})));  // 1 + 1 - 0 = 2
  h.Placed(1);
  EXPECT_FALSE(filter->Feasible(h.ctx(), Cand(0, {2})));  // 2 + 1 - 0 = 3
  h.job.spread = {{"node", 1, true}};
  EXPECT_FALSE(filter->Feasible(h.ctx(), Cand(0, {2})));
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(2, {0})));
}

TEST_F(TopologySpreadPluginTest, NodesWithoutTheKeyAreNoDomainAndAreRefused) {
  // zone label on nodes 0..3 only: zones a (0, 1) and b (2, 3).
  Cluster c = SyntheticDgxCluster(6, 2, 0);
  for (int n = 0; n < 4; ++n) c.nodes[n].labels["zone"] = n < 2 ? "a" : "b";
  PluginHarness z(std::move(c));
  z.demand().gpus = 1;
  z.job.spread = {{"zone", 1, true}};
  z.Placed(0);
  z.Placed(2);
  EXPECT_TRUE(filter->Feasible(z.ctx(), Cand(1, {0})));   // 1 + 1 - 1
  EXPECT_FALSE(filter->Feasible(z.ctx(), Cand(4, {0})));  // no zone
}

TEST_F(TopologySpreadPluginTest, RacksThatCannotHostTheReplicaAreNoDomain) {
  Cluster c = SyntheticDgxCluster(6, 2, 0);
  for (int n = 4; n < 6; ++n) {  // rack-2 is CPU-only
    c.nodes[n].gpus.clear();
    c.nodes[n].switches.clear();
  }
  PluginHarness cpu(std::move(c));
  cpu.job.spread = {{"rack", 1, true}};
  cpu.demand().gpus = 1;
  cpu.Placed(0);
  cpu.Placed(2);
  EXPECT_TRUE(filter->Feasible(cpu.ctx(), Cand(1, {0})));  // min over rack-0 and rack-1 only
  cpu.demand().gpus = 0;  // a CPU-only replica could use rack-2: it counts
  EXPECT_FALSE(filter->Feasible(cpu.ctx(), Cand(1, {})));
  EXPECT_TRUE(filter->Feasible(cpu.ctx(), Cand(4, {})));
}

TEST_F(TopologySpreadPluginTest, NodeSelectorLimitsTheDomains) {
  h.group().node_selector = {{"rack", "rack-0"}};
  h.Placed(0);
  // Only rack-0 is eligible: skew 1 + 1 - 1 = 1.
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(1, {0})));
}

TEST_F(TopologySpreadPluginTest, SoftConstraintsScoreInsteadOfFiltering) {
  EXPECT_EQ(score->Score(h.ctx(), Cand(0, {0})), 100);  // only hard constraints: neutral
  h.job.spread = {{"rack", 1, false}};
  h.Placed(0);
  h.Placed(1);
  h.Placed(2);
  // rack-0: 2, rack-1: 1, rack-2: 0.
  EXPECT_TRUE(filter->Feasible(h.ctx(), Cand(0, {1})));  // soft: never refused
  const double r0 = score->Score(h.ctx(), Cand(0, {1}));
  const double r1 = score->Score(h.ctx(), Cand(2, {1}));
  const double r2 = score->Score(h.ctx(), Cand(4, {0}));
  EXPECT_EQ(r2, 100);
  EXPECT_LT(r1, r2);
  EXPECT_LT(r0, r1);
  EXPECT_GE(r0, 0);
  // A larger max_skew is gentler.
  h.job.spread = {{"rack", 3, false}};
  EXPECT_GT(score->Score(h.ctx(), Cand(0, {1})), r0);
}

}  // namespace
}  // namespace berth
