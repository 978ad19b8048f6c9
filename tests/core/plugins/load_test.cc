#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(LoadPluginTest, PrefersIdleGpus) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));
  auto s = Score("load");
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {0})), 50);  // no telemetry
  Telemetry& t = h.Observe();
  t.gpus[0][0].util_percent = 80;
  t.gpus[0][1].util_percent = 20;
  t.gpus[0][2].util_percent = 0;
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {0})), 20);
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {1})), 80);
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {0, 1})), 50);
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {2})), 100);
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {3})), 50);     // unknown
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {2, 3})), 75);  // idle + unknown
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(0, {})), 50);      // CPU-only
}

}  // namespace
}  // namespace berth
