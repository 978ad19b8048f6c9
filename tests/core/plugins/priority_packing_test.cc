#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(PriorityPackingPluginTest, JoinsItsOwnPriorityThenIdleNodesThenMixes) {
  PluginHarness h(SyntheticDgxCluster(4, 4, 0));
  auto s = Score("priority-packing");
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {0})), 50);  // no counts from the engine: neutral
  // Node 0 holds only this job's priority, node 1 only another, node 2 both, node 3 nothing.
  std::vector<std::map<int, double>> by_priority(4);
  by_priority[0] = {{100, 4}};
  by_priority[1] = {{-1, 2}};
  by_priority[2] = {{100, 1}, {1000, 3}};
  h.job.priority = 100;
  PlacementContext ctx = h.ctx();
  ctx.gpus_by_priority = &by_priority;
  EXPECT_EQ(s->Score(ctx, Cand(0, {4})), 100);
  EXPECT_EQ(s->Score(ctx, Cand(1, {0})), 0);
  EXPECT_EQ(s->Score(ctx, Cand(2, {4})), 25);  // 50 + 50 x (1 - 3) / 4
  EXPECT_EQ(s->Score(ctx, Cand(3, {0})), 50);
}

}  // namespace
}  // namespace berth
