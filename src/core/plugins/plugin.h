// The placement plugin interface (kube-scheduler's framework, in small): filters say whether a
// candidate placement is allowed, scores rank the allowed ones from 0 (worst) to 100 (best).
// The pipeline (placement.h) multiplies scores by their policy weights and sums them.
//
// A candidate is one way to place one replica: a node and the GPUs on it. Plugins only read;
// they never change the allocator. Each plugin lives in plugins/<name>.cc.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/job.h"
#include "core/policy.h"
#include "core/reservation.h"
#include "core/telemetry.h"

namespace berth {

// Candidate (a node, its GPUs, how tight they are) is declared in allocator.h: the allocator
// produces candidates, plugins rank them.

class FragmentationTracker;  // fragmentation.h

// A pod shape of the workload and how often it occurs (FGD's "typical pods").
struct TypicalPod {
  int64_t cpu_milli = 0;
  int gpus = 0;                     // GPUs per pod
  int gpu_milli = 0;                // per GPU, 1..1000
  std::vector<std::string> models;  // allowed models; empty: any
  double frequency = 0;
  // Past the typical pods' coverage: FGD's expected fragment leaves it out (TypicalPodsOptions::
  // rare_min_gpus, rare_bound), the scarcity score still keeps its hosts.
  bool rare = false;
};

// Everything a plugin may read about the decision at hand.
struct PlacementContext {
  const Allocator* alloc = nullptr;
  const Telemetry* telemetry = nullptr;  // may be null: no telemetry
  const Policy* policy = nullptr;
  const JobSpec* job = nullptr;
  const TaskGroup* group = nullptr;
  const std::vector<ReplicaPlacement>* placed = nullptr;  // this group's replicas placed so far
  // The replicas of the job's earlier groups placed in this decision; null: none. With `placed`,
  // every replica of the job placed so far.
  const std::vector<ReplicaPlacement>* job_placed = nullptr;
  const std::vector<TypicalPod>* typical_pods = nullptr;  // workload model (fgd); may be null
  // Another value whenever the list's contents change in place (plugins cache what they build
  // from it, keyed by its address, size and this).
  uint64_t typical_pods_version = 0;
  // The workload's fragmentation per node, current with `alloc` (the caller refreshes every
  // node it changes before the next decision). When set, fgd reads the nodes from it instead of
  // compiling typical_pods and comparing each node with the allocator; may be null.
  const FragmentationTracker* fragmentation = nullptr;
  // Per node, GPU-equivalents held by running jobs, by priority (the engine keeps them, for
  // packing that respects priority); may be null.
  const std::vector<std::map<int, double>>* gpus_by_priority = nullptr;
  std::mt19937_64* rng = nullptr;  // seeded by the policy; for random choices only
  // GPUs reserved for waiting jobs (the engine's); the pipeline never offers another job's to
  // `job_id`. May be null: nothing reserved.
  const Reservations* reservations = nullptr;
  int job_id = -1;
  int queue = -1;           // the job's queue
  bool guaranteed = false;  // placed inside the job's guarantee (yielding reservations give way)
  double priority = 0;      // the job's whole priority points, aging included
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual bool Feasible(const PlacementContext& ctx, const Candidate& c) const = 0;
  // True when the filter would pass every candidate of the replica at hand (kube's PreFilter
  // Skip): the pipeline then does not ask it, once per replica instead of per candidate.
  virtual bool Skip(const PlacementContext& /*ctx*/) const { return false; }
  // True for filters that refuse on observed, changing state (telemetry): a job they refuse is
  // retried with back-off instead of waiting for capacity to free up.
  virtual bool retryable() const { return false; }
  // True when the verdict reads only the candidate, its node's state and the decision's fixed
  // context (job, group, policy, telemetry, typical pods): never `placed`, other nodes or the
  // RNG. The pipeline then reuses it for a gang's later replicas while the node is unchanged.
  virtual bool node_local() const { return false; }
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  // 0..100, never outside: the pipeline skips candidates that could not win with full marks.
  virtual double Score(const PlacementContext& ctx, const Candidate& c) const = 0;
  // True when the score means a gang to take as few cells as hold it: the allocator then offers
  // a gang those cells' nodes first (Allocator::Allocate), which no per-replica score can do.
  virtual bool packs_gangs() const { return false; }
  // Called once before a replica's candidates are scored (kube's PreScore): state that every
  // candidate's score reads is brought up to date here, not per candidate.
  virtual void PreScore(const PlacementContext& /*ctx*/) const {}
  // True when the verdict reads only the candidate, its node's state and the decision's fixed
  // context (job, group, policy, telemetry, typical pods): never `placed`, other nodes or the
  // RNG. The pipeline then reuses it for a gang's later replicas while the node is unchanged.
  virtual bool node_local() const { return false; }
};

// Builds a plugin from its policy entry; returns null with `error` set for an unknown name or
// a bad parameter ("unknown parameter \"x\"; known: ratio").
std::unique_ptr<FilterPlugin> MakeFilter(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeScore(const PluginConfig& config, std::string* error);
std::vector<std::string> FilterNames();
std::vector<std::string> ScoreNames();

}  // namespace berth
