#include "core/placement.h"

namespace berth {

std::unique_ptr<PlacementPipeline> PlacementPipeline::Make(const Policy& policy,
                                                           std::vector<std::string>* errors) {
  *errors = ValidatePolicy(policy);
  if (!errors->empty()) return nullptr;
  auto pipeline = std::unique_ptr<PlacementPipeline>(new PlacementPipeline());
  pipeline->policy_ = policy;
  pipeline->rng_.seed(policy.seed);
  std::string error;
  for (const PluginConfig& f : policy.filters) pipeline->filters_.push_back(MakeFilter(f, &error));
  for (const PluginConfig& s : policy.scores)
    pipeline->scores_.push_back({s.weight, MakeScore(s, &error)});
  return pipeline;
}

int PlacementPipeline::Choose(const AllocationRequest& /*request*/, const CandidateList& candidates,
                              const std::vector<ReplicaPlacement>& placed) {
  PlacementContext ctx = context_;
  ctx.placed = &placed;
  ctx.policy = &policy_;
  ctx.rng = &rng_;
  refused_by_retryable_ = false;
  for (const WeightedScore& s : scores_) s.plugin->PreScore(ctx);
  int best = -1;
  double best_score = 0;
  int ties = 0;
  for (const CandidateList::Run& run : candidates.runs())
    for (size_t j = 0; j < run.candidates->size(); ++j) {
      const size_t i = run.start + j;
      const Candidate& c = (*run.candidates)[j];
      bool feasible = true;
      for (const auto& f : filters_) {
        if (f->Feasible(ctx, c)) continue;
        feasible = false;
        refused_by_retryable_ = refused_by_retryable_ || f->retryable();
        break;
      }
      if (!feasible) continue;
      double score = 0;
      for (const WeightedScore& s : scores_) score += s.weight * s.plugin->Score(ctx, c);
      if (best < 0 || score > best_score + 1e-9) {
        best = static_cast<int>(i);
        best_score = score;
        ties = 1;
      } else if (score > best_score - 1e-9 && policy_.tie_break == TieBreak::kRandom) {
        // Reservoir sampling keeps every tied candidate equally likely.
        ++ties;
        if (std::uniform_int_distribution<int>(0, ties - 1)(rng_) == 0) best = static_cast<int>(i);
      }
    }
  if (best >= 0) refused_by_retryable_ = false;
  return best;
}

}  // namespace berth
