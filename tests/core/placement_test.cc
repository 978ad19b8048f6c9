#include "core/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/plugin_test_util.h"

namespace berth {
namespace {

PluginConfig Plugin(const std::string& name, double weight = 1) {
  PluginConfig c;
  c.name = name;
  c.weight = weight;
  return c;
}

Policy MakePolicy(std::vector<PluginConfig> filters, std::vector<PluginConfig> scores,
                  uint64_t seed = 42) {
  Policy p;
  p.name = "test";
  p.filters = std::move(filters);
  p.scores = std::move(scores);
  p.seed = seed;
  return p;
}

std::unique_ptr<PlacementPipeline> Build(const Policy& policy) {
  std::vector<std::string> errors;
  auto pipeline = PlacementPipeline::Make(policy, &errors);
  EXPECT_NE(pipeline, nullptr);
  EXPECT_TRUE(errors.empty()) << errors.front();
  return pipeline;
}

// One single-GPU candidate on GPU 0 of each of the first `nodes` nodes.
std::vector<Candidate> OnePerNode(int nodes) {
  std::vector<Candidate> out;
  for (int n = 0; n < nodes; ++n) out.push_back(Cand(n, {0}));
  return out;
}

class PlacementPipelineTest : public ::testing::Test {
 protected:
  PlacementPipelineTest() : h_(SyntheticDgxCluster(8, 8, 0)) { h_.demand().gpus = 1; }

  int Choose(PlacementPipeline& p, const std::vector<Candidate>& candidates) {
    p.SetContext(h_.ctx());
    return p.Choose(AllocationRequest{}, candidates, {}, 0);
  }

  PluginHarness h_;
};

TEST_F(PlacementPipelineTest, FiltersThenRanksByWeightedScore) {
  // image-locality: 100 on nodes 0 and 2, 0 on node 1. load: 0 on node 0 (busy), 100 elsewhere.
  h_.group().image = "trainer:v1";
  Telemetry& t = h_.Observe();
  t.node_images[0] = {"trainer:v1"};
  t.node_images[2] = {"trainer:v1"};
  t.gpus[0][0].util_percent = 100;
  t.gpus[1][0].util_percent = 0;
  t.gpus[2][0].util_percent = 0;
  const std::vector<Candidate> candidates = OnePerNode(3);

  auto images_first =
      Build(MakePolicy({Plugin("node-health")}, {Plugin("image-locality", 3), Plugin("load", 1)}));
  EXPECT_EQ(Choose(*images_first, candidates), 2);  // 400 vs 300 vs 100
  // The best-scored node is filtered out: the next best wins, not a random survivor.
  h_.alloc().SetNodeCordoned(2, true);
  EXPECT_EQ(Choose(*images_first, candidates), 0);  // 300 vs 100
  // Weights decide, not the plugin order.
  auto load_first =
      Build(MakePolicy({Plugin("node-health")}, {Plugin("image-locality", 1), Plugin("load", 3)}));
  EXPECT_EQ(Choose(*load_first, candidates), 1);  // 100 vs 300
  // Nothing survives the filters: -1.
  h_.alloc().SetNodeCordoned(0, true);
  h_.alloc().SetNodeCordoned(1, true);
  EXPECT_EQ(Choose(*load_first, candidates), -1);
  EXPECT_FALSE(load_first->refused_by_retryable());
  EXPECT_EQ(Choose(*load_first, {}), -1);
}

// The picks of `rounds` Choose calls over `count` tied candidates.
std::vector<int> TiePicks(PluginHarness& h, uint64_t seed, int count, int rounds) {
  auto p = Build(MakePolicy({}, {Plugin("load")}, seed));  // no telemetry: every node 50
  p->SetContext(h.ctx());
  const std::vector<Candidate> candidates = OnePerNode(count);
  std::vector<int> picks;
  for (int i = 0; i < rounds; ++i)
    picks.push_back(p->Choose(AllocationRequest{}, candidates, {}, 0));
  return picks;
}

TEST_F(PlacementPipelineTest, TiesAreBrokenBySeededRng) {
  const std::vector<int> a = TiePicks(h_, 7, 8, 400);
  EXPECT_EQ(TiePicks(h_, 7, 8, 400), a);  // the same seed: the same choices
  EXPECT_NE(TiePicks(h_, 8, 8, 400), a);  // another seed: other choices
  EXPECT_NE(TiePicks(h_, 42, 8, 400), a);
  // Every tied candidate is chosen, about evenly (50 expected of each).
  std::map<int, int> counts;
  for (int pick : a) ++counts[pick];
  ASSERT_EQ(counts.size(), 8u);
  for (const auto& [candidate, n] : counts) {
    EXPECT_GE(candidate, 0);
    EXPECT_GT(n, 20) << "candidate " << candidate;
    EXPECT_LT(n, 90) << "candidate " << candidate;
  }
}

TEST_F(PlacementPipelineTest, TieBreakFirstTakesTheFirstBestCandidate) {
  Policy policy = MakePolicy({}, {Plugin("load")});
  policy.tie_break = TieBreak::kFirst;
  auto p = Build(policy);
  Telemetry& t = h_.Observe();
  t.gpus[0][0].util_percent = 60;  // the others are unknown (50): tied best from node 1 on
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Choose(*p, OnePerNode(6)), 1);
}

TEST_F(PlacementPipelineTest, OnlyTheBestScoresTie) {
  Telemetry& t = h_.Observe();
  for (int n = 0; n < 4; ++n) t.gpus[n][0].util_percent = n % 2 == 0 ? 0 : 60;
  auto p = Build(MakePolicy({}, {Plugin("load")}, 3));
  std::map<int, int> counts;
  for (int i = 0; i < 200; ++i) ++counts[Choose(*p, OnePerNode(4))];
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[2], 0);
}

TEST(PlacementPipelineMakeTest, InvalidPolicyGivesOneErrorPerBadField) {
  Policy p = MakePolicy({Plugin("node-health"), Plugin("no-such-filter")},
                        {Plugin("load", 0), Plugin("binpack", 2), Plugin("binpack", 1)});
  p.candidates = -1;
  std::vector<std::string> errors;
  EXPECT_EQ(PlacementPipeline::Make(p, &errors), nullptr);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].rfind("filters[1]: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("no-such-filter"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1].rfind("scores[0].weight: ", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("scores[2]: ", 0), 0u) << errors[2];
  EXPECT_NE(errors[2].find("twice"), std::string::npos) << errors[2];
  EXPECT_EQ(errors[3].rfind("candidates: ", 0), 0u) << errors[3];
  // A valid policy clears the list.
  EXPECT_NE(PlacementPipeline::Make(MakePolicy({Plugin("node-health")}, {}), &errors), nullptr);
  EXPECT_TRUE(errors.empty());
}

TEST_F(PlacementPipelineTest, RefusedByRetryableOnlyWhenATelemetryFilterRefused) {
  auto p = Build(MakePolicy({Plugin("resources-fit"), Plugin("gpu-memory-threshold")}, {}));
  const std::vector<Candidate> candidates = OnePerNode(2);
  Telemetry& t = h_.Observe();
  // Both GPUs are observed nearly full (more than 0.9 of 80 GiB): only the threshold refuses.
  t.gpus[0][0].fb_used_mib = 80000;
  t.gpus[1][0].fb_used_mib = 80000;
  EXPECT_EQ(Choose(*p, candidates), -1);
  EXPECT_TRUE(p->refused_by_retryable());
  // One is free in memory: chosen, and the flag clears.
  t.gpus[1][0].fb_used_mib = 1000;
  EXPECT_EQ(Choose(*p, candidates), 1);
  EXPECT_FALSE(p->refused_by_retryable());
  // Capacity refuses (resources-fit, not retryable): no flag.
  h_.Take(0, 8);
  h_.Take(1, 8);
  t.gpus[0][0].fb_used_mib = 1000;
  EXPECT_EQ(Choose(*p, candidates), -1);
  EXPECT_FALSE(p->refused_by_retryable());
}

TEST_F(PlacementPipelineTest, AContinuedChooseCountsFeasibleRunsAndKeepsTheBest) {
  // Node 0 holds the image; the others cannot win, but a bounded scan still needs to know which
  // of them the filters pass: node 1 lacks the spread key (a filter that is not node-local),
  // node 3's GPU is observed full (a node-local one).
  Policy policy = MakePolicy({Plugin("gpu-memory-threshold"), Plugin("topology-spread")},
                             {Plugin("image-locality")});
  policy.tie_break = TieBreak::kFirst;
  auto p = Build(policy);
  h_.job.spread.push_back({"zone", 1, true});
  for (int n : {0, 2, 3, 4}) h_.cluster().nodes[n].labels["zone"] = "a";
  h_.group().image = "trainer:v1";
  Telemetry& t = h_.Observe();
  t.node_images[0] = {"trainer:v1"};
  t.node_images[4] = {"trainer:v1"};
  t.gpus[3][0].fb_used_mib = 80000;
  const std::vector<std::vector<Candidate>> runs = {
      {Cand(0, {0})}, {Cand(1, {0})}, {Cand(2, {0})}, {Cand(3, {0})}, {Cand(4, {0})}};
  CandidateList list;
  list.Add(runs[0]);
  list.Add(runs[1]);
  p->SetContext(h_.ctx());
  EXPECT_EQ(p->Choose(AllocationRequest{}, list, {}, 0), 0);
  EXPECT_EQ(p->feasible_runs(), 1);
  list.Add(runs[2]);
  list.Add(runs[3]);
  EXPECT_EQ(p->Choose(AllocationRequest{}, list, {}, 2), 0);
  EXPECT_EQ(p->feasible_runs(), 2);
  // A tie with the earlier best: the first in node order still wins.
  list.Add(runs[4]);
  EXPECT_EQ(p->Choose(AllocationRequest{}, list, {}, 4), 0);
  EXPECT_EQ(p->feasible_runs(), 3);
  // Choosing afresh starts the count over.
  EXPECT_EQ(p->Choose(AllocationRequest{}, list, {}, 0), 0);
  EXPECT_EQ(p->feasible_runs(), 3);
}

TEST_F(PlacementPipelineTest, GangsArePackedWhenAScoreAsksAndTheJobDoesNotSpread) {
  Policy berth;
  ASSERT_TRUE(BuiltinPolicy("berth", &berth));
  auto p = Build(berth);
  p->SetContext(h_.ctx());
  EXPECT_TRUE(p->packs_gangs());
  h_.job.spread.push_back({"rack", 1, false});
  p->SetContext(h_.ctx());
  EXPECT_FALSE(p->packs_gangs());
  h_.job.spread.clear();
  auto spread = Build(MakePolicy({Plugin("resources-fit")}, {Plugin("spread")}));
  spread->SetContext(h_.ctx());
  EXPECT_FALSE(spread->packs_gangs());
}

TEST_F(PlacementPipelineTest, NewContextClearsTheRetryableFlag) {
  auto p = Build(MakePolicy({Plugin("gpu-memory-threshold")}, {}));
  Telemetry& t = h_.Observe();
  t.gpus[0][0].fb_used_mib = 80000;
  EXPECT_EQ(Choose(*p, OnePerNode(1)), -1);
  ASSERT_TRUE(p->refused_by_retryable());
  // The next decision may never reach Choose (the allocator had no candidate to offer): it
  // must not inherit the last decision's refusal.
  p->SetContext(h_.ctx());
  EXPECT_FALSE(p->refused_by_retryable());
}

TEST_F(PlacementPipelineTest, AGangsLaterReplicasSeeTheNodesItChanged) {
  // spread is node-local, so the pipeline reuses its scores between a gang's replicas; the node
  // the first replica took must be scored afresh, or it would still look empty and win the tie.
  Policy policy = MakePolicy({Plugin("resources-fit")}, {Plugin("spread")});
  policy.tie_break = TieBreak::kFirst;
  auto p = Build(policy);
  h_.demand().gpus = 4;
  p->SetContext(h_.ctx());
  AllocationRequest req;
  req.demand = h_.demand();
  req.replicas = 3;
  std::string why;
  const std::optional<int> id = h_.alloc().Allocate(req, &why, p.get(), 0);
  ASSERT_TRUE(id.has_value()) << why;
  std::vector<int> nodes;
  for (const ReplicaPlacement& r : h_.alloc().Find(*id)->replicas) nodes.push_back(r.node);
  EXPECT_EQ(nodes, (std::vector<int>{0, 1, 2}));
}

// Verdicts kept across decisions choose as a pipeline that judges every candidate afresh: a
// node's are judged again once it changes (a placement on it, a cordon and its end).
TEST(PlacementPipelineKeepTest, KeptVerdictsChooseAsFreshOnes) {
  PluginHarness kept_h(SyntheticDgxCluster(8, 8, 0)), fresh_h(SyntheticDgxCluster(8, 8, 0));
  Policy policy =
      MakePolicy({Plugin("node-health"), Plugin("resources-fit")}, {Plugin("gpu-packing")});
  policy.tie_break = TieBreak::kFirst;
  auto kept = Build(policy);
  auto fresh = Build(policy);
  kept->KeepVerdictsAcrossDecisions();
  const int shapes[][2] = {{1, 0}, {0, 300}, {2, 0}, {0, 700}, {0, 300}};  // GPUs, GPU milli
  int placed = 0;
  for (int i = 0; i < 60; ++i) {
    for (PluginHarness* h : {&kept_h, &fresh_h}) {
      h->demand().gpus = shapes[i % 5][0];
      h->demand().gpu_milli = shapes[i % 5][1];
      if (i == 20 || i == 30) h->alloc().SetNodeCordoned(3, i == 20);
    }
    AllocationRequest req;
    req.demand = kept_h.demand();
    kept->SetContext(kept_h.ctx());
    fresh->SetContext(fresh_h.ctx());
    const auto a = kept_h.alloc().Allocate(req, nullptr, kept.get());
    const auto b = fresh_h.alloc().Allocate(req, nullptr, fresh.get());
    ASSERT_EQ(a.has_value(), b.has_value()) << "decision " << i;
    if (!a) continue;
    ++placed;
    const ReplicaPlacement& ra = kept_h.alloc().Find(*a)->replicas[0];
    const ReplicaPlacement& rb = fresh_h.alloc().Find(*b)->replicas[0];
    EXPECT_EQ(ra.node, rb.node) << "decision " << i;
    EXPECT_EQ(ra.gpus, rb.gpus) << "decision " << i;
  }
  EXPECT_GT(placed, 40);
}

}  // namespace
}  // namespace berth
