// topology-spread (kube-scheduler's PodTopologySpread, over one job's replicas): spreads a job's
// replicas evenly over topology domains so that losing one rack or zone loses few of them.
//
// For each SpreadConstraint of the job, the domains are the distinct values of its topology key
// (node_label.h: "node" = node name, "rack" = rack, other keys = labels) among the *eligible*
// nodes: nodes that carry the key, match the group's node_selector (kube's nodeAffinityPolicy
// Honor) and, for a GPU replica, have at least one GPU it could ever use (model allowed, MIG
// mode matching). The last rule is berth's: without it a rack of CPU-only nodes would be a domain
// stuck at 0 replicas and would cap every other domain at max_skew.
//
// count(d) = this job's replicas placed so far (of every group: ctx.job_placed and ctx.placed) on
// eligible nodes of domain d;
// skew = count(domain of the candidate) + 1 - min over domains of count   (kube's filter).
//
// Filter (hard constraints, DoNotSchedule): refuses a candidate whose node lacks a key, or
// whose skew exceeds max_skew for some constraint.
// Score (soft constraints, ScheduleAnyway): per constraint 100 * max_skew / (max_skew + skew - 1),
// so the least loaded domain (skew 1) scores 100 and each extra replica in the candidate's
// domain costs less the larger max_skew is (kube adds max_skew - 1 to its raw score for the same
// damping); a node lacking the key scores 0 (kube's ignored nodes). The score is the mean over
// the soft constraints, 100 when there are none. Kube normalises raw scores over the nodes it
// sees; a plugin here scores one candidate at a time, so the scale is absolute instead.
#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>

#include "core/plugins/factories.h"
#include "core/plugins/node_label.h"

namespace berth {
namespace {

// Whether a replica of `group` could ever run on `node`, ignoring what is in use now.
bool Eligible(const Cluster& cluster, const TaskGroup& group, const Node& node) {
  std::string value;
  for (const auto& [key, want] : group.node_selector)
    if (!NodeLabel(node, key, &value) || value != want) return false;
  const Demand& d = group.demand;
  if (d.gpus == 0 && d.gpu_milli == 0 && d.mig_profile.empty()) return true;
  for (const Gpu& g : node.gpus) {
    if (g.mig_enabled != !d.mig_profile.empty()) continue;
    if (!d.models.empty() && std::find(d.models.begin(), d.models.end(), g.model) == d.models.end())
      continue;
    if (!d.mig_profile.empty()) {
      const GpuModel* model = cluster.FindModel(g.model);
      if (model == nullptr || FindMigProfile(model->mig_profiles, d.mig_profile) < 0) continue;
    }
    return true;
  }
  return false;
}

// The skew placing one more replica on `node` gives for `constraint`; false when the node has no
// value for the constraint's key.
bool SkewAfter(const PlacementContext& ctx, const SpreadConstraint& constraint, int node,
               int* skew) {
  const Cluster& cluster = ctx.alloc->cluster();
  const std::string& key = constraint.topology_key;
  std::string here;
  if (!NodeLabel(cluster.nodes[node], key, &here)) return false;
  std::map<std::string, int> counts;  // eligible domains
  std::vector<char> eligible(cluster.nodes.size(), 0);
  std::string value;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    if (!NodeLabel(cluster.nodes[n], key, &value) ||
        !Eligible(cluster, *ctx.group, cluster.nodes[n]))
      continue;
    eligible[n] = 1;
    counts.emplace(value, 0);
  }
  counts.emplace(here, 0);  // the candidate's domain counts even if the plugin order let it in
  for (const std::vector<ReplicaPlacement>* replicas : {ctx.job_placed, ctx.placed})
    if (replicas != nullptr)
      for (const ReplicaPlacement& r : *replicas)
        if (r.node >= 0 && eligible[r.node] && NodeLabel(cluster.nodes[r.node], key, &value))
          ++counts[value];
  int min = counts.begin()->second;
  for (const auto& [domain, count] : counts) min = std::min(min, count);
  *skew = counts[here] + 1 - min;
  return true;
}

class TopologySpreadFilter : public FilterPlugin {
 public:
  bool Skip(const PlacementContext& ctx) const override {
    return std::none_of(ctx.job->spread.begin(), ctx.job->spread.end(),
                        [](const SpreadConstraint& constraint) { return constraint.hard; });
  }
  bool Feasible(const PlacementContext& ctx, const Candidate& c) const override {
    for (const SpreadConstraint& constraint : ctx.job->spread) {
      if (!constraint.hard) continue;
      int skew = 0;
      if (!SkewAfter(ctx, constraint, c.node, &skew) || skew > constraint.max_skew) return false;
    }
    return true;
  }
};

class TopologySpreadScore : public ScorePlugin {
 public:
  double Score(const PlacementContext& ctx, const Candidate& c) const override {
    double sum = 0;
    int soft = 0;
    for (const SpreadConstraint& constraint : ctx.job->spread) {
      if (constraint.hard) continue;
      ++soft;
      int skew = 0;
      if (!SkewAfter(ctx, constraint, c.node, &skew)) continue;  // scores 0
      const double max_skew = std::max(1, constraint.max_skew);
      sum += 100.0 * max_skew / (max_skew + std::max(1, skew) - 1);
    }
    return soft == 0 ? 100.0 : sum / soft;
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeTopologySpreadFilter(const PluginConfig& config,
                                                       std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<TopologySpreadFilter>();
}

std::unique_ptr<ScorePlugin> MakeTopologySpreadScore(const PluginConfig& config,
                                                     std::string* error) {
  if (!CheckParams(config, {}, error)) return nullptr;
  return std::make_unique<TopologySpreadScore>();
}

}  // namespace berth
