#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(GpuMemoryThresholdPluginTest, RefusesGpusOverTheLimit) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));  // A100-80GB: 81920 MiB
  auto f = Filter("gpu-memory-threshold");
  EXPECT_TRUE(f->retryable());
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));  // no telemetry: allowed
  Telemetry& t = h.Observe();
  t.gpus[0][0].fb_used_mib = 77303;  // 0.94 of the GPU
  t.gpus[0][1].fb_used_mib = 1000;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {0})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {0, 1})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {1})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {2})));  // unknown: allowed
  // The demand's memory counts: 60000 + 20000 > 0.9 x 81920 = 73728.
  t.gpus[0][1].fb_used_mib = 60000;
  h.demand().gpu_milli = 250;
  h.demand().gpu_memory_mib = 20000;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {1})));
  h.demand().gpu_memory_mib = 10000;
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {1})));
  // A looser ratio.
  auto loose = Filter("gpu-memory-threshold", {{"ratio", 1.0}});
  h.demand().gpu_memory_mib = 20000;
  EXPECT_TRUE(loose->Feasible(h.ctx(), Cand(0, {1})));
  h.demand().gpu_memory_mib = 4000;  // 77303 + 4000 <= 81920
  EXPECT_TRUE(loose->Feasible(h.ctx(), Cand(0, {0})));
}

TEST(GpuMemoryThresholdPluginTest, UnknownModelMemoryIsAllowed) {
  Cluster c = SyntheticDgxCluster(1, 1, 0);
  c.models[0].memory_mib = 0;
  PluginHarness h(std::move(c));
  auto f = Filter("gpu-memory-threshold");
  h.Observe().gpus[0][0].fb_used_mib = 1e9;
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));
}

}  // namespace
}  // namespace berth
