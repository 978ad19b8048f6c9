#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "openb_test_cluster.h"

namespace berth {
namespace {

TEST(RandomScoreTest, DeterministicForASeedAndVariesAcrossCandidates) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 4}, {.gpus = 4}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const auto random = MakeScoreOrDie("random");
  TaskGroup group;
  group.demand = WholeDemand(1);
  auto run = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    PlacementContext ctx = ContextFor(alloc, group);
    ctx.rng = &rng;
    std::vector<double> scores;
    for (int i = 0; i < 20; ++i) scores.push_back(random->Score(ctx, GpuCandidate(i % 2, {0})));
    return scores;
  };
  const std::vector<double> a = run(7);
  EXPECT_EQ(a, run(7));
  EXPECT_NE(a, run(8));
  EXPECT_EQ(std::set<double>(a.begin(), a.end()).size(), a.size());
  for (double s : a) {
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 100);
  }
  const PlacementContext no_rng = ContextFor(alloc, group);
  EXPECT_EQ(random->Score(no_rng, GpuCandidate(0, {0})), 0);
}

// The reference draws a node uniformly, then a GPU uniformly among those the share fits on.
// Node 0 offers two candidates (its shared GPU and one fresh GPU standing for three), node 1
// one: each node should win half the time, and on node 0 the shared GPU a quarter of that.
TEST(RandomScoreTest, NodesUniformThenGpusUniform) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 4}, {.gpus = 1}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const int shared = GpuOf(alloc, Place(&alloc, 0, ShareDemand(500)));
  const int fresh = shared == 0 ? 1 : 0;
  const auto random = MakeScoreOrDie("random");
  TaskGroup group;
  group.demand = ShareDemand(200);
  std::mt19937_64 rng(42);
  PlacementContext ctx = ContextFor(alloc, group);
  ctx.rng = &rng;
  const std::vector<Candidate> candidates = {GpuCandidate(0, {shared}), GpuCandidate(0, {fresh}),
                                             GpuCandidate(1, {0})};
  std::vector<int> wins(3, 0);
  const int trials = 40000;
  for (int t = 0; t < trials; ++t) {
    int best = 0;
    double best_score = -1;
    for (int i = 0; i < 3; ++i) {
      const double s = random->Score(ctx, candidates[i]);
      if (s > best_score) best = i, best_score = s;
    }
    ++wins[best];
  }
  EXPECT_NEAR(wins[0] / static_cast<double>(trials), .125, .01);
  EXPECT_NEAR(wins[1] / static_cast<double>(trials), .375, .01);
  EXPECT_NEAR(wins[2] / static_cast<double>(trials), .5, .01);
}

}  // namespace
}  // namespace berth
