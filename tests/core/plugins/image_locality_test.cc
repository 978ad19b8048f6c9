#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(ImageLocalityPluginTest, ScoresNodesHoldingTheImage) {
  PluginHarness h(SyntheticDgxCluster(3, 3, 0));
  auto s = Score("image-locality");
  h.group().image = "nvcr.io/nvidia/pytorch:24.01-py3";
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {0})), 0);  // no telemetry: neutral
  Telemetry& t = h.Observe();
  t.node_images[0] = {"busybox:latest", "nvcr.io/nvidia/pytorch:24.01-py3"};
  t.node_images[1] = {"nvcr.io/nvidia/pytorch:23.10-py3"};
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {0})), 100);
  EXPECT_EQ(s->Score(h.ctx(), Cand(1, {0})), 0);
  EXPECT_EQ(s->Score(h.ctx(), Cand(2, {0})), 0);
  // An untagged name means ":latest", also behind a registry port.
  h.group().image = "busybox";
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {})), 100);
  t.node_images[2] = {"registry:5000/train"};
  h.group().image = "registry:5000/train:latest";
  EXPECT_EQ(s->Score(h.ctx(), Cand(2, {})), 100);
  h.group().image = "";
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {})), 0);
}

}  // namespace
}  // namespace berth
