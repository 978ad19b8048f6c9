#include "sim/packing_bound.h"

#include <gtest/gtest.h>

#include <random>

#include "config/flat_node.h"
#include "core/policy.h"
#include "sim/packing.h"

namespace berth {
namespace {

TracePod Pod(int gpus, int gpu_milli, std::vector<std::string> models = {}) {
  static int n = 0;
  TracePod p;
  p.name = "p" + std::to_string(n++);
  p.gpus = gpus;
  p.gpu_milli = gpu_milli;
  p.cpu_milli = 1000;
  p.memory_mib = 1024;
  p.models = std::move(models);
  return p;
}

Cluster Nodes(const std::vector<std::pair<int, std::string>>& gpus_and_model) {
  Cluster c;
  for (const auto& [gpus, model] : gpus_and_model) {
    if (!c.FindModel(model)) c.models.push_back({model, 16384, {}});
    c.nodes.push_back(
        MakeFlatNode("n" + std::to_string(c.nodes.size()), 64000, 262144, gpus, model));
  }
  return c;
}

std::vector<const TracePod*> Ptrs(const std::vector<TracePod>& pods) {
  std::vector<const TracePod*> out;
  for (const TracePod& p : pods) out.push_back(&p);
  return out;
}

TEST(PackingBoundTest, TheUpperBoundIsCapacityDemandModelsAndSizes) {
  const Cluster one = Nodes({{2, "T4"}});
  // Three whole GPUs asked of two: the capacity.
  const std::vector<TracePod> three = {Pod(1, 1000), Pod(1, 1000), Pod(1, 1000)};
  EXPECT_EQ(FluidUpperBoundMilli(one, Ptrs(three)), 2000);
  // Less asked than there is: the demand.
  const std::vector<TracePod> small = {Pod(1, 300), Pod(1, 300)};
  EXPECT_EQ(FluidUpperBoundMilli(one, Ptrs(small)), 600);
  // Pods bound to T4 use only T4's two GPUs of four; unbound ones use all four.
  const Cluster two = Nodes({{2, "T4"}, {2, "V100"}});
  const std::vector<TracePod> t4 = {Pod(1, 1000, {"T4"}), Pod(1, 1000, {"T4"}),
                                    Pod(1, 1000, {"T4"}), Pod(1, 1000, {"T4"})};
  EXPECT_EQ(FluidUpperBoundMilli(two, Ptrs(t4)), 2000);
  const std::vector<TracePod> any = {Pod(1, 1000), Pod(1, 1000), Pod(1, 1000), Pod(1, 1000)};
  EXPECT_EQ(FluidUpperBoundMilli(two, Ptrs(any)), 4000);
  // A 4-GPU pod fits no 2-GPU node; on 2x2 + 4 GPUs it can only take the 4-GPU node.
  const std::vector<TracePod> big = {Pod(4, 1000), Pod(4, 1000)};
  EXPECT_EQ(FluidUpperBoundMilli(two, Ptrs(big)), 0);
  EXPECT_EQ(FluidUpperBoundMilli(Nodes({{2, "T4"}, {2, "T4"}, {4, "T4"}}), Ptrs(big)), 4000);
  // CPU-only pods add nothing.
  EXPECT_EQ(FluidUpperBoundMilli(one, Ptrs({Pod(0, 0)})), 0);
}

// Packing's workload model keeps, past the typical pods' coverage, the shapes whose hosts are
// few (4 GPUs or more, or bound to GPU models) for the scarcity score; 2-GPU ones stay out.
TEST(PackingBoundTest, WorkloadTypicalPodsKeepRareBigAndBoundShapes) {
  std::vector<TracePod> pods;
  for (int i = 0; i < 100; ++i) pods.push_back(Pod(1, 1000));
  pods.push_back(Pod(8, 1000));
  pods.push_back(Pod(2, 1000));
  pods.push_back(Pod(1, 1000, {"T4"}));
  const std::vector<TypicalPod> typical = WorkloadTypicalPods(pods);
  ASSERT_EQ(typical.size(), 3u);
  EXPECT_FALSE(typical[0].rare);
  EXPECT_TRUE(typical[1].rare);
  EXPECT_EQ(typical[1].gpus, 8);
  EXPECT_DOUBLE_EQ(typical[1].frequency, 1.0 / 100);
  EXPECT_TRUE(typical[2].rare);
  EXPECT_EQ(typical[2].models, std::vector<std::string>{"T4"});
}

TEST(PackingBoundTest, OfflinePlacesLargestFirstWhereOnlineCannot) {
  // One GPU; 400, 400, then 600 milli arrive. Online the 600 no longer fits (800 placed);
  // offline, 600 then 400 fill the GPU.
  const Cluster one = Nodes({{1, "T4"}});
  const std::vector<TracePod> pods = {Pod(1, 400), Pod(1, 400), Pod(1, 600)};
  const std::vector<TypicalPod> typical = WorkloadTypicalPods(pods);
  Policy bestfit;
  ASSERT_TRUE(BuiltinPolicy("bestfit", &bestfit));
  PackingPlacer online(&one, bestfit, &typical);
  for (const TracePod& p : pods) online.Place(p);
  EXPECT_EQ(online.allocated_milli(), 800);
  const OfflinePacking offline = BestOfflinePacking(one, Ptrs(pods), typical);
  EXPECT_EQ(offline.allocated_milli, 1000);
  EXPECT_FALSE(offline.heuristic.empty());
  EXPECT_EQ(FluidUpperBoundMilli(one, Ptrs(pods)), 1000);
}

TEST(PackingBoundTest, NoPackingExceedsTheUpperBound) {
  const Cluster c = Nodes({{8, "V100"}, {8, "V100"}, {4, "T4"}, {2, "T4"}, {1, "P100"}});
  std::mt19937 rng(7);
  std::vector<TracePod> pods;
  const int gpus[] = {1, 1, 1, 2, 4, 8};
  for (int i = 0; i < 60; ++i) {
    const int g = gpus[rng() % 6];
    pods.push_back(
        Pod(g, g == 1 && rng() % 2 ? 100 + static_cast<int>(rng() % 900) : 1000,
            rng() % 5 == 0 ? std::vector<std::string>{"T4"} : std::vector<std::string>{}));
  }
  const std::vector<TypicalPod> typical = WorkloadTypicalPods(pods);
  const int64_t upper = FluidUpperBoundMilli(c, Ptrs(pods));
  EXPECT_LE(upper, c.gpu_count() * 1000);
  EXPECT_LE(BestOfflinePacking(c, Ptrs(pods), typical).allocated_milli, upper);
  for (const char* name : {"fgd", "bestfit", "berth"}) {
    Policy p;
    ASSERT_TRUE(BuiltinPolicy(name, &p));
    PackingPlacer online(&c, p, &typical);
    for (const TracePod& pod : pods) online.Place(pod);
    EXPECT_LE(online.allocated_milli(), upper) << name;
  }
}

}  // namespace
}  // namespace berth
