#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(NodeHealthPluginTest, RefusesBadGpusAndCordonedNodes) {
  PluginHarness h(SyntheticDgxCluster(3, 3, 0));
  auto f = Filter("node-health");
  h.alloc().SetGpuBad(0, 3, true);
  h.alloc().SetNodeCordoned(1, true);
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0, 1})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {2, 3})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(1, {0})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(2, {0, 1, 2, 3, 4, 5, 6, 7})));
  // CPU-only replicas: a cordoned node is refused, a node with one bad GPU is not.
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(1, {})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {})));
  // Every GPU bad but the node not cordoned: CPU-only replicas still go there.
  for (int g = 0; g < 8; ++g) h.alloc().SetGpuBad(2, g, true);
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(2, {0})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(2, {})));
  // Healing brings them back.
  h.alloc().SetGpuBad(0, 3, false);
  h.alloc().SetNodeCordoned(1, false);
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {2, 3})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {0})));
}

}  // namespace
}  // namespace berth
