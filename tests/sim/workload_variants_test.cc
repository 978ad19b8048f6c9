#include "sim/workload_variants.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "config/flat_node.h"

namespace berth {
namespace {

TracePod Pod(const std::string& name, int gpus, int gpu_milli, int64_t cpu_milli) {
  TracePod p;
  p.name = name;
  p.gpus = gpus;
  p.gpu_milli = gpu_milli;
  p.cpu_milli = cpu_milli;
  p.memory_mib = 1024;
  return p;
}

// 100 whole-GPU pods, 60 half-GPU pods, 5 pods of 4 GPUs, 20 CPU-only pods.
std::vector<TracePod> Base() {
  std::vector<TracePod> pods;
  for (int i = 0; i < 100; ++i) pods.push_back(Pod("w" + std::to_string(i), 1, 1000, 8000));
  for (int i = 0; i < 60; ++i) pods.push_back(Pod("s" + std::to_string(i), 1, 500, 4000));
  for (int i = 0; i < 5; ++i) pods.push_back(Pod("m" + std::to_string(i), 4, 1000, 32000));
  for (int i = 0; i < 20; ++i) pods.push_back(Pod("c" + std::to_string(i), 0, 0, 16000));
  return pods;
}

// T4 nodes of 2 GPUs and V100 nodes of 8: only V100 holds a 4-GPU pod.
Cluster TwoModels() {
  Cluster c;
  c.models = {{"T4", 15360, {}}, {"V100", 32768, {}}};
  for (int i = 0; i < 4; ++i)
    c.nodes.push_back(MakeFlatNode("t" + std::to_string(i), 64000, 262144, 2, "T4"));
  c.nodes.push_back(MakeFlatNode("v", 96000, 524288, 8, "V100"));
  return c;
}

WorkloadVariant Parse(const std::string& name) {
  WorkloadVariant v;
  std::string error;
  EXPECT_TRUE(ParseWorkloadVariant(name, &v, &error)) << error;
  return v;
}

TEST(WorkloadVariantsTest, NamesRoundTripAndBadOnesSayWhy) {
  for (const WorkloadVariant& v : StandardVariants()) {
    const WorkloadVariant back = Parse(v.Name());
    EXPECT_EQ(back.Name(), v.Name());
    EXPECT_EQ(v.held_out(), v.draw > 1);
  }
  EXPECT_EQ(Parse("gpushare100-d3").percent, 100);
  WorkloadVariant v;
  std::string error;
  for (const char* bad : {"multigpu30", "multigpu0-d1", "gpushare101-d1", "gpuspec20-d0",
                          "cpuonly50-dx", "tetris10-d1", "multigpu-d1", "multigpu30-d1x"}) {
    EXPECT_FALSE(ParseWorkloadVariant(bad, &v, &error)) << bad;
    EXPECT_NE(error.find(bad), std::string::npos) << error;
    EXPECT_NE(error.find("like multigpu30-d2"), std::string::npos) << error;
  }
}

TEST(WorkloadVariantsTest, EachFamilyReachesItsShareAndKeepsTheRest) {
  const std::vector<TracePod> base = Base();
  const Cluster cluster = TwoModels();
  const WorkloadMix before = MeasureWorkloadMix(base);

  const auto multi = MakeWorkloadVariant(base, cluster, Parse("multigpu40-d1"));
  const WorkloadMix m = MeasureWorkloadMix(multi);
  EXPECT_GE(m.multi_gpu, 40);
  EXPECT_LT(m.multi_gpu, 42);  // stops at the first copy that reaches the share
  EXPECT_GT(multi.size(), base.size());
  EXPECT_TRUE(std::equal(base.begin(), base.end(), multi.begin(),
                         [](const TracePod& a, const TracePod& b) { return a.name == b.name; }));

  const auto share = MakeWorkloadVariant(base, cluster, Parse("gpushare60-d1"));
  EXPECT_GE(MeasureWorkloadMix(share).gpu_share, 60);
  EXPECT_LT(MeasureWorkloadMix(share).gpu_share, 62);
  EXPECT_EQ(share.size(), base.size());
  const auto all_shared = MakeWorkloadVariant(base, cluster, Parse("gpushare100-d1"));
  EXPECT_DOUBLE_EQ(MeasureWorkloadMix(all_shared).gpu_share, 100);

  const auto spec = MakeWorkloadVariant(base, cluster, Parse("gpuspec20-d1"));
  EXPECT_NEAR(MeasureWorkloadMix(spec).gpu_spec, 20, 0.5);
  EXPECT_EQ(MeasureWorkloadMix(spec).gpus, before.gpus);
  for (const TracePod& p : spec) {
    if (p.gpus == 4 && !p.models.empty()) {
      EXPECT_EQ(p.models, std::vector<std::string>{"V100"});
    }
  }

  const auto heavy = MakeWorkloadVariant(base, cluster, Parse("cpuonly100-d1"));
  EXPECT_GE(MeasureWorkloadMix(heavy).cpu_only_cpu, 100);
  EXPECT_LT(MeasureWorkloadMix(heavy).cpu_only_cpu, 102);
  EXPECT_EQ(MeasureWorkloadMix(heavy).gpus, before.gpus);
  const auto light = MakeWorkloadVariant(base, cluster, Parse("cpuonly10-d1"));
  EXPECT_GE(MeasureWorkloadMix(light).cpu_only_cpu, 10);  // CPU-only pods drawn out
  EXPECT_LT(MeasureWorkloadMix(light).cpu_only_cpu, 12);
}

TEST(WorkloadVariantsTest, AskingForCpuWithoutCpuPodsEnds) {
  // Copies of a CPU-only pod that asks no CPU would never reach the share: none are made.
  const std::vector<TracePod> base = {Pod("g", 1, 1000, 8000), Pod("c", 0, 0, 0)};
  EXPECT_EQ(MakeWorkloadVariant(base, TwoModels(), Parse("cpuonly100-d1")).size(), 2u);
}

TEST(WorkloadVariantsTest, DrawsAreDeterministicAndDiffer) {
  const std::vector<TracePod> base = Base();
  const Cluster cluster = TwoModels();
  auto names = [&](const std::string& v) {
    std::vector<std::string> out;
    for (const TracePod& p : MakeWorkloadVariant(base, cluster, Parse(v))) out.push_back(p.name);
    return out;
  };
  EXPECT_EQ(names("gpushare80-d2"), names("gpushare80-d2"));
  EXPECT_NE(names("gpushare80-d2"), names("gpushare80-d3"));
  std::vector<std::string> sorted = names("multigpu50-d1");
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "unique names";
}

}  // namespace
}  // namespace berth
