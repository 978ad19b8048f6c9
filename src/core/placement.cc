#include "core/placement.h"

#include <algorithm>

namespace berth {

std::unique_ptr<PlacementPipeline> PlacementPipeline::Make(const Policy& policy,
                                                           std::vector<std::string>* errors) {
  *errors = ValidatePolicy(policy);
  if (!errors->empty()) return nullptr;
  auto pipeline = std::unique_ptr<PlacementPipeline>(new PlacementPipeline());
  pipeline->policy_ = policy;
  pipeline->rng_.seed(policy.seed);
  std::string error;
  for (const PluginConfig& f : policy.filters) {
    const int index = static_cast<int>(pipeline->filters_.size());
    pipeline->filters_.push_back(MakeFilter(f, &error));
    (pipeline->filters_.back()->node_local() ? pipeline->local_filters_ : pipeline->other_filters_)
        .push_back(index);
  }
  for (const PluginConfig& s : policy.scores) {
    pipeline->score_plugins_.push_back(MakeScore(s, &error));
    const ScorePlugin* plugin = pipeline->score_plugins_.back().get();
    pipeline->packs_gangs_ = pipeline->packs_gangs_ || plugin->packs_gangs();
    if (plugin->node_local()) {
      pipeline->local_scores_.push_back({s.weight, plugin});
    } else {
      pipeline->other_scores_.push_back({s.weight, plugin});
      pipeline->nonlocal_max_ += 100 * s.weight;
    }
  }
  return pipeline;
}

void PlacementPipeline::JudgeLocally(const PlacementContext& ctx, const Candidate& c,
                                     LocalVerdict* v) const {
  v->known = true;
  for (int f : local_filters_)
    if (!filters_[f]->Feasible(ctx, c)) {
      v->refused_by = f;
      return;
    }
  for (const WeightedScore& s : local_scores_) v->score += s.weight * s.plugin->Score(ctx, c);
}

int PlacementPipeline::FirstRefusal(const PlacementContext& ctx, const Candidate& c,
                                    int local) const {
  const int before = local >= 0 ? local : static_cast<int>(filters_.size());
  for (int f : asked_filters_) {
    if (f >= before) break;
    if (!filters_[f]->Feasible(ctx, c)) return f;
  }
  return local;
}

int PlacementPipeline::Choose(const AllocationRequest& request, const CandidateList& candidates,
                              const std::vector<ReplicaPlacement>& placed, size_t first) {
  PlacementContext ctx = context_;
  ctx.placed = &placed;
  ctx.policy = &policy_;
  ctx.rng = &rng_;
  if (first == 0) {
    retryable_refusal_.clear();
    best_ = -1;
    best_score_ = 0;
    ties_ = 0;
    feasible_runs_ = 0;
    asked_filters_.clear();
    for (int f : other_filters_)
      if (!filters_[f]->Skip(ctx)) asked_filters_.push_back(f);
    for (const auto& plugin : score_plugins_) plugin->PreScore(ctx);
  }
  // A run is seen again by a gang's later replicas within one decision, and, when verdicts are
  // kept, by the same demand's later decisions. Only a single replica's are kept: a gang's later
  // replicas see nodes its earlier ones changed before the allocator has recorded the gang.
  const bool keep = keep_ && request.replicas == 1;
  std::vector<NodeVerdicts>* memo = nullptr;
  if ((request.replicas > 1 || keep) && !(local_filters_.empty() && local_scores_.empty())) {
    size_t row = 0;
    if (keep) {
      const Demand& d = context_.group->demand;
      row = static_cast<size_t>(std::find(demands_.begin(), demands_.end(), d) - demands_.begin());
      if (row == demands_.size()) demands_.push_back(d);
      ++row;
    }
    if (row >= by_node_.size()) by_node_.resize(row + 1);
    memo = &by_node_[row];
  }
  const uint64_t stamp = keep ? 0 : decision_;
  for (const CandidateList::Run& run : candidates.runs()) {
    if (run.start < first) continue;
    LocalVerdict* verdicts = nullptr;
    if (memo && run.version != 0) {
      const size_t node = static_cast<size_t>(run.candidates->front().node);
      if (node >= memo->size()) memo->resize(node + 1);
      NodeVerdicts& seen = (*memo)[node];
      if (seen.decision != stamp || seen.version != run.version) {
        seen.decision = stamp;
        seen.version = run.version;
        seen.verdicts.assign(run.candidates->size(), LocalVerdict());
      }
      verdicts = seen.verdicts.data();
    }
    bool feasible = false;  // a candidate of the run passed every filter
    for (size_t j = 0; j < run.candidates->size(); ++j) {
      const size_t i = run.start + j;
      const Candidate& c = (*run.candidates)[j];
      if (ctx.reservations &&
          ctx.reservations->Blocks(c, ctx.job_id, ctx.queue, ctx.guaranteed, ctx.priority))
        continue;
      LocalVerdict once;
      LocalVerdict& v = verdicts ? verdicts[j] : once;
      if (!v.known) JudgeLocally(ctx, c, &v);
      // Scores are 0..100: a candidate whose node-local score leaves it short of the best even
      // with full marks from the rest cannot win or tie, and is not scored; it is filtered only
      // to count its run as feasible.
      const bool hopeless =
          v.refused_by < 0 && best_ >= 0 && v.score + nonlocal_max_ < best_score_ - 1e-9;
      if (hopeless && feasible) continue;
      // The first filter in policy order to refuse decides whether the refusal is retryable.
      const int refused_by = FirstRefusal(ctx, c, v.refused_by);
      if (refused_by >= 0) {
        if (retryable_refusal_.empty() && filters_[refused_by]->retryable())
          retryable_refusal_ = policy_.filters[refused_by].name;
        continue;
      }
      feasible = true;
      if (hopeless) continue;
      double score = v.score;
      for (const WeightedScore& s : other_scores_) score += s.weight * s.plugin->Score(ctx, c);
      if (best_ < 0 || score > best_score_ + 1e-9) {
        best_ = static_cast<int>(i);
        best_score_ = score;
        ties_ = 1;
      } else if (score > best_score_ - 1e-9 && policy_.tie_break == TieBreak::kRandom) {
        // Reservoir sampling keeps every tied candidate equally likely.
        ++ties_;
        if (std::uniform_int_distribution<int>(0, ties_ - 1)(rng_) == 0)
          best_ = static_cast<int>(i);
      }
    }
    feasible_runs_ += feasible;
  }
  if (best_ >= 0) retryable_refusal_.clear();
  return best_;
}

}  // namespace berth
