#include <gtest/gtest.h>

#include "plugin_test_util.h"

namespace berth {
namespace {

TEST(ResourcesFitPluginTest, CpuAndMemoryMustBeFree) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 0));
  auto f = Filter("resources-fit");
  h.Take(0, 0, 0, /*cpu_milli=*/100000, /*memory_mib=*/1024 * 1024);  // CPU-only
  h.demand().gpus = 1;
  h.demand().cpu_milli = 30000;
  // Node 0 has 28 cores left; node 1 all 128.
  std::vector<int> free_gpu;
  for (int g = 0; g < 8; ++g)
    if (h.alloc().gpu_free(0, g)) free_gpu = {g};
  ASSERT_FALSE(free_gpu.empty());
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, free_gpu)));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {0})));
  h.demand().cpu_milli = 1000;
  h.demand().gpus = 0;
  h.demand().memory_mib = 1536 * 1024;  // node 0 has 1 TiB left
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {})));
}

TEST(ResourcesFitPluginTest, CpuMustFitOnTheSocketsOfTheGpus) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));
  auto f = Filter("resources-fit");
  h.demand().gpus = 1;
  h.demand().cpu_milli = 70000;  // one socket has 64 cores
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {0})));
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0, 4})));  // one GPU per socket
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {})));      // CPU-only: all sockets
}

TEST(ResourcesFitPluginTest, WholeGpusMustBeFree) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));
  auto f = Filter("resources-fit");
  const std::vector<int> taken = h.Take(0, 2);
  ASSERT_EQ(taken.size(), 2u);
  h.demand().gpus = 1;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {taken[0]})));
  int other = 0;
  while (other == taken[0] || other == taken[1]) ++other;
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {other})));
  h.alloc().SetGpuBad(0, other, true);
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {other})));
}

TEST(ResourcesFitPluginTest, SharesNeedFreeMilli) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));
  auto f = Filter("resources-fit");
  const std::vector<int> shared = h.Take(0, 0, 700);
  ASSERT_EQ(shared.size(), 1u);
  ASSERT_EQ(h.alloc().gpu_used_milli(0, shared[0]), 700);
  h.demand().gpu_milli = 300;
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, shared)));
  h.demand().gpu_milli = 400;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, shared)));
  // A whole GPU cannot go where a share is.
  h.demand().gpu_milli = 0;
  h.demand().gpus = 1;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, shared)));
}

TEST(ResourcesFitPluginTest, SharesNeedGpuMemoryWhenTheModelIsKnown) {
  PluginHarness h(SyntheticDgxCluster(1, 1, 0));  // A100-80GB: 81920 MiB
  auto f = Filter("resources-fit");
  AllocationRequest r;
  r.demand.gpu_milli = 200;
  r.demand.gpu_memory_mib = 61440;
  r.only_node = 0;
  std::string why;
  auto id = h.alloc().Allocate(r, &why);
  ASSERT_TRUE(id.has_value()) << why;
  const int gpu = h.alloc().Find(*id)->replicas[0].gpus[0];
  ASSERT_EQ(h.alloc().gpu_shared_memory_mib(0, gpu), 61440);
  h.demand().gpu_milli = 100;  // milli is plentiful (800 left); memory decides
  h.demand().gpu_memory_mib = 20480;
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {gpu})));  // exactly full
  h.demand().gpu_memory_mib = 20481;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {gpu})));
  // A model of unknown memory (0) does not limit shares by memory.
  h.cluster().models[0].memory_mib = 0;
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {gpu})));
}

TEST(ResourcesFitPluginTest, MigNeedsAMigGpuWithRoom) {
  PluginHarness h(SyntheticDgxCluster(2, 2, 2));  // node 1 has MIG enabled
  auto f = Filter("resources-fit");
  h.demand().mig_profile = "3g.40gb";
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(1, {0})));
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(0, {0})));
  h.demand().mig_profile = "";
  h.demand().gpus = 1;
  EXPECT_FALSE(f->Feasible(h.ctx(), Cand(1, {0})));  // whole GPUs never on MIG GPUs
  EXPECT_TRUE(f->Feasible(h.ctx(), Cand(0, {0})));
}

}  // namespace
}  // namespace berth
