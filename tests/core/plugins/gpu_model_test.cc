#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

Cluster TwoModels() {
  Cluster c = SyntheticDgxCluster(2, 2, 0);
  c.models.push_back({"H100-80GB", 81920, {}});
  for (Gpu& g : c.nodes[1].gpus) g.model = "H100-80GB";
  c.nodes[1].shape = "dgx-h100";
  return c;
}

TEST(GpuModelPluginTest, OnlyAllowedModels) {
  PluginHarness h(TwoModels());
  auto f = Filter("gpu-model");
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));  // no models named: any
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {0})));
  h.demand().models = {"H100-80GB"};
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {0, 1})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {0, 1})));
  h.demand().models = {"A100-80GB", "H100-80GB"};
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {0})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {})));  // a CPU-only replica uses no GPU
}

}  // namespace
}  // namespace berth
