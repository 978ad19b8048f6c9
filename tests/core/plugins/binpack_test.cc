#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(BinpackPluginTest, WeightsAndCpuMemory) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.Take(1, 0, 0, 64000, 1024 * 1024);  // node 1: half its CPU and memory, no GPU
  h.Take(0, 4);                         // node 0: half its GPUs
  h.demand().gpus = 1;
  auto gpu_only = Score("binpack", {{"cpu", 0}, {"memory", 0}});
  EXPECT_NEAR(gpu_only->Score(h.ctx(), Cand(0, {4})), 100 * 5.0 / 8, 1e-9);
  EXPECT_NEAR(gpu_only->Score(h.ctx(), Cand(1, {0})), 100 * 1.0 / 8, 1e-9);
  auto host_only = Score("binpack", {{"gpu", 0}});
  EXPECT_NEAR(host_only->Score(h.ctx(), Cand(1, {0})), 50, 1e-9);
  EXPECT_NEAR(host_only->Score(h.ctx(), Cand(0, {4})), 0, 1e-9);
  h.demand().cpu_milli = 32000;
  EXPECT_NEAR(host_only->Score(h.ctx(), Cand(1, {0})), 100 * (0.75 + 0.5) / 2, 1e-9);
}

TEST(BinpackPluginTest, SharesAndBadGpus) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));
  const std::vector<int> shared = h.Take(0, 0, 500);
  ASSERT_EQ(shared.size(), 1u);
  h.alloc().SetGpuBad(0, shared[0] == 7 ? 6 : 7, true);  // capacity: 7 usable GPUs
  h.demand().gpu_milli = 250;
  auto gpu_only = Score("binpack", {{"cpu", 0}, {"memory", 0}});
  EXPECT_NEAR(gpu_only->Score(h.ctx(), Cand(0, shared)), 100 * 0.75 / 7, 1e-9);
}

TEST(BinpackPluginTest, PrefersTheFullerNode) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.Take(0, 4);
  h.demand().gpus = 2;
  auto binpack = Score("binpack");
  auto spread = Score("spread");
  // Default weights gpu 3, cpu 1, memory 1; no CPU or memory requested anywhere.
  EXPECT_NEAR(binpack->Score(h.ctx(), Cand(0, {4, 5})), 100 * (3 * 6.0 / 8) / 5, 1e-9);
  EXPECT_NEAR(binpack->Score(h.ctx(), Cand(1, {0, 1})), 100 * (3 * 2.0 / 8) / 5, 1e-9);
  for (int n = 0; n < 2; ++n) {
    const Candidate c = Cand(n, {4, 5});
    EXPECT_NEAR(binpack->Score(h.ctx(), c) + spread->Score(h.ctx(), c), 100, 1e-9);
  }
  EXPECT_GT(binpack->Score(h.ctx(), Cand(0, {4, 5})), binpack->Score(h.ctx(), Cand(1, {0, 1})));
  EXPECT_LT(spread->Score(h.ctx(), Cand(0, {4, 5})), spread->Score(h.ctx(), Cand(1, {0, 1})));
}

}  // namespace
}  // namespace berth
