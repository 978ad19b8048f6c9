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
  // Docker Hub's host and "library/" namespace name the same image.
  h.group().image = "docker.io/library/busybox";
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {})), 100);
  t.node_images[2] = {"registry:5000/train"};
  h.group().image = "registry:5000/train:latest";
  EXPECT_EQ(s->Score(h.ctx(), Cand(2, {})), 100);
  // By digest: a node that pulled by it lists "name@digest" (RepoDigests); a tag written beside
  // the digest changes nothing, another digest is another image.
  t.node_images[1].push_back("nvcr.io/nvidia/pytorch@sha256:0a1b");
  h.group().image = "nvcr.io/nvidia/pytorch:24.01-py3@sha256:0a1b";
  EXPECT_EQ(s->Score(h.ctx(), Cand(1, {})), 100);
  h.group().image = "nvcr.io/nvidia/pytorch@sha256:0a1c";
  EXPECT_EQ(s->Score(h.ctx(), Cand(1, {})), 0);
  t.node_images[2].push_back("docker.io/library/busybox@sha256:ffee");
  h.group().image = "busybox:1.36@sha256:ffee";
  EXPECT_EQ(s->Score(h.ctx(), Cand(2, {})), 100);
  h.group().image = "";
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {})), 0);
}

TEST(ImageLocalityPluginTest, ScoresTheShareOfTheImagesBytesANodeHolds) {
  PluginHarness h(SyntheticDgxCluster(4, 4, 0));
  auto s = Score("image-locality");
  h.group().image = "train:v2";
  Telemetry& t = h.Observe();
  // v2 shares its 6 GB base and 3 GB framework with v1; only its 1 GB code layer is new.
  t.image_layers["train:v2"] = {{"sha256:base", 6'000'000'000},
                                {"sha256:torch", 3'000'000'000},
                                {"sha256:code2", 1'000'000'000}};
  t.node_layers.assign(4, {});
  t.node_images[0] = {"train:v2"};
  t.node_layers[1] = {"sha256:base", "sha256:torch", "sha256:code1"};  // holds v1
  t.node_layers[2] = {"sha256:base"};                                  // another image on the base
  EXPECT_EQ(s->Score(h.ctx(), Cand(0, {0})), 100);
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(1, {0})), 90);
  EXPECT_DOUBLE_EQ(s->Score(h.ctx(), Cand(2, {0})), 60);
  EXPECT_EQ(s->Score(h.ctx(), Cand(3, {0})), 0);
  // Without sizes, each layer counts one.
  for (ImageLayer& l : t.image_layers["train:v2"]) l.bytes = 0;
  EXPECT_NEAR(s->Score(h.ctx(), Cand(1, {0})), 200.0 / 3, 1e-9);
  // An image no node holds: nothing is known of its layers, every node is alike.
  h.group().image = "other:1";
  EXPECT_EQ(s->Score(h.ctx(), Cand(1, {0})), 0);
}

}  // namespace
}  // namespace berth
