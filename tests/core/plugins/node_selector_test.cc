#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(NodeSelectorPluginTest, EveryKeyMustMatch) {
  Cluster c = SyntheticDgxCluster(4, 2, 0);
  c.nodes[0].labels["zone"] = "a";
  c.nodes[1].labels["zone"] = "b";
  c.nodes[2].labels["zone"] = "a";
  c.nodes[0].labels["nvme"] = "true";
  PluginHarness h(std::move(c));
  auto f = Filter("node-selector");
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(3, {0})));  // no selector: any node
  h.group().node_selector = {{"zone", "a"}};
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(1, {0})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(2, {0})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(3, {0})));  // no zone label
  h.group().node_selector = {{"zone", "a"}, {"rack", "rack-0"}};
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(2, {0})));  // rack-1
  h.group().node_selector = {{"nvme", "true"}, {"node", "dgx-0"}};
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {})));
  h.group().node_selector = {{"node", "dgx-1"}};
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {})));
}

}  // namespace
}  // namespace berth
