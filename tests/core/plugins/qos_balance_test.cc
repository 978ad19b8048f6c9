#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(QosBalancePluginTest, PacksGuaranteedAndSpreadsTheRest) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.Take(0, 4);
  h.demand().gpus = 2;
  auto s = Score("qos-balance");
  const Candidate full = Cand(0, {4, 5}), empty = Cand(1, {0, 1});
  h.job.qos = QosClass::kGuaranteed;
  // Weights 1, 1, 1: load = (6/8 + 0 + 0) / 3 on node 0.
  EXPECT_NEAR(s->Score(h.ctx(), full), 100 * 0.75 / 3, 1e-9);
  EXPECT_GT(s->Score(h.ctx(), full), s->Score(h.ctx(), empty));
  h.job.qos = QosClass::kBurstable;
  EXPECT_NEAR(s->Score(h.ctx(), full), 100 * (1 - 0.75 / 3), 1e-9);
  EXPECT_LT(s->Score(h.ctx(), full), s->Score(h.ctx(), empty));
  h.job.qos = QosClass::kBestEffort;
  EXPECT_LT(s->Score(h.ctx(), full), s->Score(h.ctx(), empty));
}

TEST(QosBalancePluginTest, PerClassWeightsFromThePolicy) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  h.Take(0, 0, 0, 96000, 0);  // node 0: CPU busy, GPUs idle
  h.Take(1, 6);               // node 1: GPUs busy, CPU idle
  h.demand().gpus = 1;
  h.job.qos = QosClass::kBestEffort;
  auto s = Score("qos-balance");
  // Best-effort jobs here care about CPU only: node 1 is the emptier one.
  h.policy.qos_weights[QosClass::kBestEffort] = {/*cpu=*/1, /*memory=*/0, /*gpu=*/0};
  EXPECT_NEAR(s->Score(h.ctx(), Cand(1, {6})), 100, 1e-9);
  EXPECT_NEAR(s->Score(h.ctx(), Cand(0, {0})), 25, 1e-9);
  // GPU only: node 0 is.
  h.policy.qos_weights[QosClass::kBestEffort] = {0, 0, 1};
  EXPECT_GT(s->Score(h.ctx(), Cand(0, {0})), s->Score(h.ctx(), Cand(1, {6})));
}

}  // namespace
}  // namespace berth
