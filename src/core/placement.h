// The placement pipeline: the allocator's candidates for a replica go through the policy's
// filter plugins, the survivors are ranked by the weighted sum of its score plugins, and the
// best wins; ties are broken uniformly at random by an RNG seeded from the policy.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/plugins/plugin.h"

namespace berth {

class PlacementPipeline : public PlacementChooser {
 public:
  // Builds the plugins of `policy`; null with one message per bad field if it is invalid.
  static std::unique_ptr<PlacementPipeline> Make(const Policy& policy,
                                                 std::vector<std::string>* errors);

  // The decision the next Choose calls belong to (job, group, allocator, telemetry, ...).
  // `placed` and `rng` are filled in by the pipeline itself. Clears refused_by_retryable: a
  // decision whose request never reaches Choose (no candidate at all) must not inherit the
  // previous decision's refusal.
  void SetContext(const PlacementContext& context) {
    context_ = context;
    retryable_refusal_.clear();
    ++decision_;
  }
  // Declares that every later decision has the same context but for the group's demand, and
  // that whatever the node-local plugins read of a node (the fragmentation tracker included)
  // changes only with the node's version: the packing simulator's case. Node-local verdicts
  // are then kept per demand across decisions while their node is unchanged.
  void KeepVerdictsAcrossDecisions() { keep_ = true; }
  const Policy& policy() const { return policy_; }

  int Choose(const AllocationRequest& request, const CandidateList& candidates,
             const std::vector<ReplicaPlacement>& placed, size_t first) override;
  int feasible_runs() const override { return feasible_runs_; }
  // When a score of the policy packs gangs, unless the job asks for its replicas to be spread.
  bool packs_gangs() const override {
    return packs_gangs_ && (context_.job == nullptr || context_.job->spread.empty());
  }

  // Whether the last replica chosen for since SetContext (its Choose and the calls continuing
  // it) had a candidate refused through a retryable filter and none picked.
  bool refused_by_retryable() const { return !retryable_refusal_.empty(); }
  // Then the first such filter's name ("gpu-memory-threshold"); else "".
  const std::string& retryable_refusal() const { return retryable_refusal_; }
  // The weighted score of the candidate the last Choose picked.
  double best_score() const { return best_score_; }

 private:
  struct WeightedScore {
    double weight;
    const ScorePlugin* plugin;
  };
  // What the node-local plugins said of one candidate: the first node-local filter that refused
  // it (-1: none), else the weighted sum of the node-local scores.
  struct LocalVerdict {
    bool known = false;
    int refused_by = -1;
    double score = 0;
  };
  void JudgeLocally(const PlacementContext& ctx, const Candidate& c, LocalVerdict* v) const;
  // The first filter in policy order that refuses `c`, given the first node-local one
  // (`local`, -1: none); -1: none refuses.
  int FirstRefusal(const PlacementContext& ctx, const Candidate& c, int local) const;

  Policy policy_;
  std::vector<std::unique_ptr<FilterPlugin>> filters_;  // in policy order
  std::vector<std::unique_ptr<ScorePlugin>> score_plugins_;
  // Split by node_local(), asked once: filters as indices into filters_ (order kept).
  std::vector<int> local_filters_, other_filters_;
  std::vector<int> asked_filters_;  // of other_filters_, those the replica at hand does not Skip
  std::vector<WeightedScore> local_scores_, other_scores_;
  PlacementContext context_;
  std::mt19937_64 rng_;
  std::string retryable_refusal_;
  // The replica's choice so far, kept for a Choose that continues the last one.
  int best_ = -1;
  double best_score_ = 0;
  int ties_ = 0;
  int feasible_runs_ = 0;
  double nonlocal_max_ = 0;   // the most the scores that are not node-local can add
  bool packs_gangs_ = false;  // a score plugin's packs_gangs()
  // The local verdicts of cached runs (one per node; its version is unique to the node's
  // state), for this decision only, or per demand when kept across decisions: a gang's later
  // replicas see mostly the runs its first replica saw, and a demand's next decision every node
  // that has not changed since.
  struct NodeVerdicts {
    uint64_t decision = 0, version = 0;
    std::vector<LocalVerdict> verdicts;
  };
  uint64_t decision_ = 0;  // counts SetContext calls
  bool keep_ = false;
  std::vector<Demand> demands_;                     // when kept: the demands seen
  std::vector<std::vector<NodeVerdicts>> by_node_;  // [0, or 1 + demand's index when kept][node]
};

}  // namespace berth
