#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(SpreadPluginTest, PrefersTheEmptierNodeAndMirrorsBinpack) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.Take(0, 4);
  h.demand().gpus = 2;
  auto binpack = Score("binpack");
  auto spread = Score("spread");
  // Default weights gpu 3, cpu 1, memory 1; no CPU or memory requested anywhere.
  EXPECT_NEAR(spread->Score(h.ctx(), Cand(0, {4, 5})), 100 * (1 - (3 * 6.0 / 8) / 5), 1e-9);
  EXPECT_NEAR(spread->Score(h.ctx(), Cand(1, {0, 1})), 100 * (1 - (3 * 2.0 / 8) / 5), 1e-9);
  EXPECT_LT(spread->Score(h.ctx(), Cand(0, {4, 5})), spread->Score(h.ctx(), Cand(1, {0, 1})));
  for (int n = 0; n < 2; ++n) {
    const Candidate c = Cand(n, {4, 5});
    EXPECT_NEAR(binpack->Score(h.ctx(), c) + spread->Score(h.ctx(), c), 100, 1e-9);
  }
}

TEST(SpreadPluginTest, Weights) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.Take(1, 0, 0, 64000, 1024 * 1024);  // node 1: half its CPU and memory, no GPU
  h.Take(0, 4);                         // node 0: half its GPUs
  h.demand().gpus = 1;
  auto gpu_only = Score("spread", {{"cpu", 0}, {"memory", 0}});
  EXPECT_GT(gpu_only->Score(h.ctx(), Cand(1, {0})), gpu_only->Score(h.ctx(), Cand(0, {4})));
  auto host_only = Score("spread", {{"gpu", 0}});
  EXPECT_GT(host_only->Score(h.ctx(), Cand(0, {4})), host_only->Score(h.ctx(), Cand(1, {0})));
  EXPECT_NEAR(host_only->Score(h.ctx(), Cand(0, {4})), 100, 1e-9);
}

}  // namespace
}  // namespace berth
