#include "core/preemption.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <tuple>

#include "core/scheduler.h"

namespace berth {

ReplicaBound::ReplicaBound(const Allocator& alloc, const JobSpec& spec, int vc)
    : alloc_(&alloc), vc_(vc) {
  if (!Measure(alloc, spec)) return;
  std::vector<int> nodes;
  for (int pool : {kPhysical, kOwn}) {
    free_[pool].assign(alloc.cluster().nodes.size(), 0);
    if (pool == kOwn && vc < 0) continue;
    // Only nodes with a free GPU: a full cluster has few.
    alloc.NodesWithFree(pool == kOwn ? vc : -1, 1, &nodes);
    for (int n : nodes) {
      if (free_[pool][n] != 0) continue;  // listed twice
      free_[pool][n] = alloc.FreeGpusOn(n, pool == kOwn ? vc : -1);
      slots_[pool] += free_[pool][n] / smallest_;
    }
  }
}

bool ReplicaBound::MayFitNow(const Allocator& alloc, const JobSpec& spec, int vc) {
  ReplicaBound b(alloc, vc);
  return !b.Measure(alloc, spec) || b.SlotsReachReplicas(alloc);
}

bool ReplicaBound::MayFitNow(const Allocator& alloc, int gpus, int replicas, int vc) {
  return gpus <= 0 || Sized(alloc, gpus, replicas, vc).SlotsReachReplicas(alloc);
}

bool ReplicaBound::MayFitReclaiming(const Allocator& alloc, const JobSpec& spec, int vc) {
  ReplicaBound b(alloc, vc);
  return !b.Measure(alloc, spec) || b.ReclaimReachesReplicas(alloc);
}

bool ReplicaBound::MayFitReclaiming(const Allocator& alloc, int gpus, int replicas, int vc) {
  return gpus <= 0 || Sized(alloc, gpus, replicas, vc).ReclaimReachesReplicas(alloc);
}

ReplicaBound ReplicaBound::Sized(const Allocator& alloc, int gpus, int replicas, int vc) {
  ReplicaBound b(alloc, vc);
  b.smallest_ = gpus;
  b.replicas_ = replicas;
  b.SetPhysicalCap(alloc);
  return b;
}

bool ReplicaBound::ReclaimReachesReplicas(const Allocator& alloc) {
  slots_[kOwn] = alloc.ReplicaSlots(vc_, smallest_, replicas_, /*borrowed_free=*/true);
  slots_[kPhysical] = INT_MAX;  // every borrower gone: only the cap counts
  return may_fit();
}

bool ReplicaBound::SlotsReachReplicas(const Allocator& alloc) {
  if (vc_ >= 0) slots_[kOwn] = alloc.ReplicaSlots(vc_, smallest_, replicas_);
  const int wanted = std::min(physical_cap_, replicas_ - slots_[kOwn]);
  if (wanted > 0) slots_[kPhysical] = alloc.ReplicaSlots(-1, smallest_, wanted);
  return may_fit();
}

// A released cell of the VC's own may go back to the physical pool; counting it in either is
// still an upper bound. A borrower frees the VC's own cells where it borrowed GPUs of them.
void ReplicaBound::Free(const JobRecord& victim) {
  if (smallest_ == 0) return;
  for (const ReplicaPlacement& r : victim.placements) {
    const bool own = vc_ >= 0 && (victim.borrowed ? !r.gpus.empty() && alloc_->BoundVcOfGpu(
                                                                           r.node, r.gpus[0]) == vc_
                                                  : victim.queue == vc_);
    const int pool = own ? kOwn : kPhysical;
    int& free = free_[pool][r.node];
    slots_[pool] -= free / smallest_;
    free += static_cast<int>(r.gpus.size());
    slots_[pool] += free / smallest_;
  }
}

bool ReplicaBound::MayFitWithout(const std::vector<JobRecord*>& victims) const {
  ReplicaBound after = *this;
  for (const JobRecord* v : victims) after.Free(*v);
  return after.may_fit();
}

bool ReplicaBound::Measure(const Allocator& alloc, const JobSpec& spec) {
  for (const TaskGroup& g : spec.groups) {
    if (g.demand.gpus <= 0) {
      smallest_ = 0;
      return false;
    }
    smallest_ = smallest_ == 0 ? g.demand.gpus : std::min(smallest_, g.demand.gpus);
    replicas_ += g.replicas;
  }
  if (smallest_ > 0) SetPhysicalCap(alloc);
  return smallest_ > 0;
}

void ReplicaBound::SetPhysicalCap(const Allocator& alloc) {
  physical_cap_ = vc_ < 0 ? INT_MAX : alloc.UnboundGuaranteeGpus(vc_) / smallest_;
}

std::optional<VictimPlan> FindVictims(const VictimSearch& search,
                                      std::vector<JobRecord*> candidates) {
  using Victims = std::vector<JobRecord*>;
  if (candidates.empty()) return std::nullopt;
  const ReplicaBound bound(*search.alloc, *search.spec, search.vc);
  if (!bound.MayFitWithout(candidates)) return std::nullopt;

  // GPU-time each candidate would lose: the cost a victim set minimizes after its size.
  std::map<const JobRecord*, double> lost;
  for (const JobRecord* v : candidates)
    lost[v] = v->gpu_equivalents * std::max(0.0, search.now - v->start_time);
  auto cheaper = [&](const JobRecord* x, const JobRecord* y) {
    if (lost[x] != lost[y]) return lost[x] < lost[y];
    if (x->spec.priority != y->spec.priority) return x->spec.priority < y->spec.priority;
    return x->id < y->id;
  };
  std::map<int, Victims> on_node;
  for (JobRecord* v : candidates) {
    std::set<int> nodes;
    for (const ReplicaPlacement& r : v->placements)
      if (search.every_node || nodes.empty()) nodes.insert(r.node);
    for (int node : nodes) on_node[node].push_back(v);
  }
  std::vector<std::tuple<size_t, double, int>> nodes;  // (victims needed, lost, node)
  for (auto& [node, victims] : on_node) {
    std::sort(victims.begin(), victims.end(), cheaper);
    int free = bound.free_on(node);
    size_t needed = 0;
    double cost = 0;
    while (needed < victims.size() && free < bound.smallest()) {
      for (const ReplicaPlacement& r : victims[needed]->placements)
        if (r.node == node) free += static_cast<int>(r.gpus.size());
      cost += lost[victims[needed++]];
    }
    if (free < bound.smallest()) needed = candidates.size() + 1;  // cannot host a replica
    nodes.push_back({needed, cost, node});
  }
  std::sort(nodes.begin(), nodes.end());
  Victims ordered;
  std::set<const JobRecord*> in_order;
  for (const auto& [needed, cost, node] : nodes)
    for (JobRecord* v : on_node[node])
      if (in_order.insert(v).second) ordered.push_back(v);

  auto fits_without = [&](const Victims& victims, TrialPlacement* where) {
    if (!search.allowed(victims)) return false;
    Allocator trial = *search.alloc;
    for (const JobRecord* v : victims)
      for (int a : v->allocations) trial.Release(a);
    return search.fits(trial, victims, where);
  };

  VictimPlan plan;
  bool fits = false;
  // A job that one node can hold: each of the cheapest few nodes' victims alone first. Growing
  // one set across nodes takes the cheapest victims first, and may then have to pass over the
  // one victim that frees a whole node (its queue would lose too much next to the others).
  constexpr int kNodeTrials = 4;
  int trials = 0;
  for (const auto& [needed, cost, node] : nodes) {
    if (fits || trials == kNodeTrials || needed > candidates.size()) break;
    ReplicaBound local = bound;
    Victims here;
    for (JobRecord* v : on_node[node]) {
      here.push_back(v);
      local.Free(*v);
      if (!local.may_fit()) continue;
      ++trials;
      if (fits_without(here, &plan.placement)) {
        plan.victims = here;
        fits = true;
      }
      break;
    }
  }
  // Else grow the victim set across nodes until the job fits on a what-if copy...
  if (!fits) {
    Allocator trial = *search.alloc;
    ReplicaBound growing = bound;
    for (JobRecord* v : ordered) {
      // A victim that would make an allowed set disallowed (its queue would fall below its
      // share) is passed over rather than taken: later ones may still do.
      if (!plan.victims.empty() && search.allowed(plan.victims)) {
        plan.victims.push_back(v);
        const bool still = search.allowed(plan.victims);
        plan.victims.pop_back();
        if (!still) continue;
      }
      for (int a : v->allocations) trial.Release(a);
      plan.victims.push_back(v);
      growing.Free(*v);
      if (growing.may_fit() && search.allowed(plan.victims) &&
          search.fits(trial, plan.victims, &plan.placement)) {
        fits = true;
        break;
      }
    }
  }
  if (!fits) return std::nullopt;
  // ...then drop the victims it does not need (fewest victims): first, at once, those with
  // nothing on the nodes the trial placed it on; then one by one.
  std::set<int> used_nodes;
  for (const ReplicaPlacement& r : plan.placement.where) used_nodes.insert(r.node);
  Victims touching;
  for (JobRecord* v : plan.victims) {
    bool touches = false;
    for (const ReplicaPlacement& r : v->placements) touches |= used_nodes.count(r.node) > 0;
    if (touches) touching.push_back(v);
  }
  TrialPlacement where;
  if (touching.size() < plan.victims.size() && fits_without(touching, &where)) {
    plan.victims = touching;
    plan.placement = where;
  }
  for (size_t i = plan.victims.size(); i-- > 1;) {
    Victims without = plan.victims;
    without.erase(without.begin() + static_cast<long>(i) - 1);
    if (bound.MayFitWithout(without) && fits_without(without, &where)) {
      plan.victims = without;
      plan.placement = where;
    }
  }
  return plan;
}

std::optional<VictimPlan> FindVictimsLowestFirst(
    const VictimSearch& search, const std::vector<JobRecord*>& candidates,
    const std::function<double(const JobRecord&)>& whole_priority,
    const std::vector<JobRecord*>& movers) {
  auto moves = [&](const JobRecord* v) {
    return std::find(movers.begin(), movers.end(), v) != movers.end();
  };
  // Per queue, per raw priority: the lowest whole priority among the candidates.
  std::map<int, std::map<int, double>> lowest;
  for (const JobRecord* u : candidates) {
    if (moves(u)) continue;
    auto [it, added] = lowest[u->queue].emplace(u->spec.priority, whole_priority(*u));
    if (!added) it->second = std::min(it->second, whole_priority(*u));
  }
  std::vector<size_t> tier(candidates.size(), 0);
  std::set<size_t> occurring = {0};  // aging may leave gaps
  for (size_t i = 0; i < candidates.size(); ++i) {
    const JobRecord& v = *candidates[i];
    if (moves(&v)) continue;
    const double whole = whole_priority(v);
    for (const auto& [priority, least] : lowest[v.queue])
      if (priority < v.spec.priority && least < whole) ++tier[i];
    occurring.insert(tier[i]);
  }
  // The lowest tier alone first: it usually fits. Above it, tiers are nested, and a tier that
  // fits is taken to fit with more candidates too (the search's heuristics do not promise it),
  // so the lowest that fits is found by bisection: up to three tiers are searched in order, and
  // a queue with many priority classes costs a few searches, not one per class. The last tier
  // holds every candidate.
  const std::vector<size_t> tiers(occurring.begin(), occurring.end());
  auto search_tier = [&](size_t index) {
    std::vector<JobRecord*> within;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (tier[i] <= tiers[index]) within.push_back(candidates[i]);
    return FindVictims(search, within);
  };
  if (tiers.size() == 1) return search_tier(0);
  if (std::optional<VictimPlan> found = search_tier(0)) return found;
  std::optional<VictimPlan> best;           // the search of tier `high`, once one fitted
  size_t low = 1, high = tiers.size() - 1;  // the lowest tier that fits is in [low, high]
  while (low < high) {
    const size_t mid = low + (high - low) / 2;
    if (std::optional<VictimPlan> found = search_tier(mid)) {
      best = std::move(found);
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return best ? best : search_tier(low);  // none fitted: `low` is the last tier, not searched
}

std::optional<ShrinkPlan> FindShrinks(const ShrinkSearch& search,
                                      std::vector<JobRecord*> candidates) {
  // A job on a cordoned node or a bad GPU cannot be placed again where it runs: it is left be.
  std::erase_if(candidates, [&](const JobRecord* j) {
    if (j->spec.min_replicas == 0 || j->replicas <= j->spec.min_replicas) return true;
    for (const ReplicaPlacement& r : j->placements)
      if (!search.alloc->node_healthy(r.node)) return true;
    return false;
  });
  if (candidates.empty()) return std::nullopt;
  std::sort(candidates.begin(), candidates.end(), [](const JobRecord* x, const JobRecord* y) {
    if (x->spec.priority != y->spec.priority) return x->spec.priority < y->spec.priority;
    if (x->start_time != y->start_time) return x->start_time > y->start_time;
    return x->id > y->id;  // one order whatever order the candidates came in
  });
  Allocator trial = *search.alloc;
  ShrinkPlan plan;
  for (JobRecord* j : candidates) {
    std::vector<int> ids = j->allocations;
    plan.shrinks.push_back({j, j->replicas});
    // One replica at a time: the job gives back no more than the preemptor needs.
    for (int keep = j->replicas - 1; keep >= j->spec.min_replicas; --keep) {
      plan.shrinks.back().replicas = keep;
      // A shrink the allocator refuses leaves the trial unusable: no plan then.
      if (!search.shrink(trial, plan.shrinks.back(), &ids)) return std::nullopt;
      if (!search.allowed(plan.shrinks)) {
        // Giving more only goes further past what is allowed: it keeps one more, and the next
        // candidate gives.
        plan.shrinks.back().replicas = keep + 1;
        if (!search.shrink(trial, plan.shrinks.back(), &ids)) return std::nullopt;
        break;
      }
      Allocator probe = trial;
      if (search.fits(probe, plan.shrinks, &plan.placement)) return plan;
    }
    if (plan.shrinks.back().replicas == j->replicas) plan.shrinks.pop_back();
  }
  return std::nullopt;
}

}  // namespace berth
