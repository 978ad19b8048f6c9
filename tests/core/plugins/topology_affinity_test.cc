#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

// DGX nodes: GPU g hangs off PCIe switch g / 2 and socket g / 4.
std::vector<int> SwitchGpus(int sw) { return {2 * sw, 2 * sw + 1}; }

TEST(TopologyAffinityPluginTest, TighterScoresHigher) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.demand().gpus = 2;
  auto s = Score("topology-affinity");
  const double sw = s->Score(h.ctx(), Cand(0, {0, 1}, Level::kSwitch));
  const double sock = s->Score(h.ctx(), Cand(0, {1, 2}, Level::kSocket));
  const double node = s->Score(h.ctx(), Cand(0, {3, 4}, Level::kNode));
  EXPECT_GT(sw, sock);
  EXPECT_GT(sock, node);
  // Every candidate here breaks an empty node, so all lose the same fraction.
  EXPECT_NEAR(sw / 100, sock / 70, 1e-9);
  EXPECT_NEAR(sw / 100, node / 40, 1e-9);
  // Parameters override the tightness scores.
  auto flat = Score("topology-affinity", {{"socket", 100}, {"node", 100}});
  EXPECT_DOUBLE_EQ(flat->Score(h.ctx(), Cand(0, {3, 4}, Level::kNode)), sw);
  // A single GPU is as tight as it gets.
  EXPECT_GT(s->Score(h.ctx(), Cand(0, {5}, Level::kGpu)), sock);
}

TEST(TopologyAffinityPluginTest, PrefersPartlyUsedDomains) {
  // The Kueue complaint: with 2 GPUs of a socket in use, the next 2-GPU job should take the
  // other 2 of that socket, not break the free socket (leaving 2 + 2 instead of 4).
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  const std::vector<int> taken = h.Take(0, 2);
  ASSERT_EQ(taken.size(), 2u);
  ASSERT_EQ(taken[0] / 2, taken[1] / 2) << "a 2-GPU job takes one switch";
  const int sw = taken[0] / 2;
  const int sibling = sw ^ 1;                   // same socket
  const int other_socket = ((sw / 2) ^ 1) * 2;  // a switch of the other socket
  h.demand().gpus = 2;
  auto s = Score("topology-affinity");
  const double same_socket = s->Score(h.ctx(), Cand(0, SwitchGpus(sibling), Level::kSwitch));
  const double fresh_socket = s->Score(h.ctx(), Cand(0, SwitchGpus(other_socket), Level::kSwitch));
  const double fresh_node = s->Score(h.ctx(), Cand(1, SwitchGpus(0), Level::kSwitch));
  EXPECT_DOUBLE_EQ(same_socket, 100);
  EXPECT_GT(same_socket, fresh_socket);
  EXPECT_GT(fresh_socket, fresh_node);
  // Tightness still wins over keeping domains whole: a fresh node's switch beats a node-wide
  // candidate that breaks nothing.
  const std::vector<int> spanning = {SwitchGpus(sibling)[0], SwitchGpus(other_socket)[0]};
  EXPECT_GT(fresh_node, s->Score(h.ctx(), Cand(0, spanning, Level::kNode)));
  // Without the fragmentation term the three switch candidates are equal.
  auto plain = Score("topology-affinity", {{"fragmentation", 0}});
  EXPECT_DOUBLE_EQ(plain->Score(h.ctx(), Cand(0, SwitchGpus(other_socket), Level::kSwitch)), 100);
  EXPECT_DOUBLE_EQ(plain->Score(h.ctx(), Cand(1, SwitchGpus(0), Level::kSwitch)), 100);
}

TEST(TopologyAffinityPluginTest, SingleGpusFillPartlyUsedSwitches) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));
  const std::vector<int> taken = h.Take(0, 1);
  ASSERT_EQ(taken.size(), 1u);
  h.demand().gpus = 1;
  auto s = Score("topology-affinity");
  const int buddy = taken[0] ^ 1;            // same switch
  const int far = ((taken[0] / 4) ^ 1) * 4;  // other socket
  EXPECT_GT(s->Score(h.ctx(), Cand(0, {buddy}, Level::kGpu)),
            s->Score(h.ctx(), Cand(0, {far}, Level::kGpu)));
}

TEST(TopologyAffinityPluginTest, GangsPackIntoFewNodesAndRacks) {
  PluginHarness h(SyntheticDgxCluster(4, 2, 0));  // racks {0, 1}, {2, 3}
  h.demand().gpus = 2;
  h.Take(0, 2);  // the job's first replica (and node 0's socket partly used)
  h.Placed(0);
  auto s = Score("topology-affinity", {{"fragmentation", 0}});
  const double same_node = s->Score(h.ctx(), Cand(0, {4, 5}, Level::kSwitch));
  const double same_rack = s->Score(h.ctx(), Cand(1, {4, 5}, Level::kSwitch));
  const double other_rack = s->Score(h.ctx(), Cand(2, {4, 5}, Level::kSwitch));
  EXPECT_DOUBLE_EQ(same_node, 100);
  EXPECT_DOUBLE_EQ(same_rack, 90);
  EXPECT_DOUBLE_EQ(other_rack, 50);
  // A loose candidate in another rack bottoms out at 0.
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(2, {0, 7}, Level::kNode)), 0);
}

TEST(TopologyAffinityPluginTest, TheJobsEarlierGroupsCountAsTheGang) {
  PluginHarness h(SyntheticDgxCluster(4, 2, 0));  // racks {0, 1}, {2, 3}
  h.demand().gpus = 2;
  h.Take(0, 2);
  std::vector<ReplicaPlacement> earlier(1);  // an earlier group's replica, on node 0
  earlier[0].node = 0;
  PlacementContext ctx = h.ctx();
  ctx.job_placed = &earlier;
  auto s = Score("topology-affinity", {{"fragmentation", 0}});
  EXPECT_DOUBLE_EQ(s->Score(ctx, Cand(0, {4, 5}, Level::kSwitch)), 100);
  EXPECT_DOUBLE_EQ(s->Score(ctx, Cand(1, {4, 5}, Level::kSwitch)), 90);
  EXPECT_DOUBLE_EQ(s->Score(ctx, Cand(2, {4, 5}, Level::kSwitch)), 50);
  // And with the group's own replicas: node 2's rack is the job's too.
  h.Placed(2);
  ctx = h.ctx();
  ctx.job_placed = &earlier;
  EXPECT_DOUBLE_EQ(s->Score(ctx, Cand(3, {4, 5}, Level::kSwitch)), 90);
  EXPECT_DOUBLE_EQ(s->Score(ctx, Cand(0, {4, 5}, Level::kSwitch)), 100);
}

}  // namespace
}  // namespace berth
