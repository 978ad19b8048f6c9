// A scheduling policy: which filter and score plugins run, with what weights and parameters,
// plus the engine's knobs (priority classes, QoS weights, aging, reclaim hysteresis).
//
// A policy is validated whole before it replaces the running one: `ValidatePolicy` returns one
// message per bad field, and an empty list means the policy is usable.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/job.h"

namespace berth {

// The largest weight, parameter weight or scale a policy may set: enough to make one score
// dominate the others, and small enough that weighted sums stay finite.
constexpr double kMostWeight = 1e6;

struct PluginConfig {
  std::string name;
  double weight = 1;                     // scores only
  std::map<std::string, double> params;  // plugin-specific, e.g. gpu-memory-threshold's "ratio"
};

// qos-balance: how much each resource's load counts for a QoS class.
struct QosWeights {
  double cpu = 1, memory = 1, gpu = 1;
};

// How the pipeline picks among candidates with the best score: uniformly at random (seeded), or
// the first in node order, as the openb benchmark's kube-scheduler does "for reproducibility".
enum class TieBreak { kRandom, kFirst };

struct Policy {
  std::string name = "berth";
  std::vector<PluginConfig> filters;
  std::vector<PluginConfig> scores;
  std::map<std::string, int> priority_classes;  // e.g. prod 1000, default 100, opportunistic -1
  std::map<QosClass, QosWeights> qos_weights;
  int candidates = 0;  // nodes scored per replica; 0: every feasible node
  uint64_t seed = 42;  // tie breaks
  TieBreak tie_break = TieBreak::kRandom;
  double aging_per_hour = 10;        // priority points a waiting job gains per hour
  double aging_cap = 100;            // most points aging can add
  double reclaim_hysteresis = 0.05;  // fraction of a queue's fair share (no oscillation)
  double retry_backoff_s = 10;       // first back-off of a job refused by a filter
  // A job pending this long gets a reservation (nothing starves); at most this many at once.
  double reserve_after_s = 600;
  int max_reservations = 2;
  double max_backoff_s = 300;
};

// One message per problem, each naming the field ("scores[2].weight: must be > 0").
std::vector<std::string> ValidatePolicy(const Policy& policy);

// Built-in policies: "berth" (the default), and the openb benchmark's single-plugin policies
// random, dotprod, gpu-clustering, gpu-packing, bestfit, fgd. Returns false for other names.
bool BuiltinPolicy(const std::string& name, Policy* out);
std::vector<std::string> BuiltinPolicyNames();

}  // namespace berth
