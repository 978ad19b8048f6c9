#include "core/job.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/plugins/node_label.h"

namespace berth {

const char* QosName(QosClass qos) {
  switch (qos) {
    case QosClass::kGuaranteed:
      return "guaranteed";
    case QosClass::kBurstable:
      return "burstable";
    case QosClass::kBestEffort:
      return "best-effort";
  }
  return "?";
}

bool ParseQos(const std::string& text, QosClass* qos) {
  if (text == "guaranteed")
    *qos = QosClass::kGuaranteed;
  else if (text == "burstable")
    *qos = QosClass::kBurstable;
  else if (text == "best-effort" || text == "besteffort")
    *qos = QosClass::kBestEffort;
  else
    return false;
  return true;
}

int TotalReplicas(const JobSpec& spec) {
  int n = 0;
  for (const TaskGroup& g : spec.groups) n += g.replicas;
  return n;
}

namespace {

// Read as the node-selector filter reads it ("node" and "rack" too), or a job pinned by name
// would be refused as fitting no node.
bool MatchesSelector(const Node& node, const TaskGroup& group) {
  std::string value;
  for (const auto& [key, want] : group.node_selector)
    if (!NodeLabel(node, key, &value) || value != want) return false;
  return true;
}

bool ModelAllowed(const Demand& d, const std::string& model) {
  return d.models.empty() || std::find(d.models.begin(), d.models.end(), model) != d.models.end();
}

// How many replicas of a whole-GPU group the cluster could hold at once, empty; -1 when the
// group asks no whole GPUs (shares and MIG slices are left to the allocator).
int64_t MostReplicas(const Cluster& cluster, const TaskGroup& group) {
  const Demand& d = group.demand;
  if (d.gpus <= 0) return -1;
  int64_t most = 0;
  for (const Node& node : cluster.nodes) {
    if (!MatchesSelector(node, group)) continue;
    int64_t gpus = 0;
    for (const Gpu& gpu : node.gpus) gpus += !gpu.mig_enabled && ModelAllowed(d, gpu.model);
    int64_t here = gpus / d.gpus;
    if (d.cpu_milli > 0) here = std::min(here, node.cpu_milli / d.cpu_milli);
    if (d.memory_mib > 0) here = std::min(here, node.memory_mib / d.memory_mib);
    most += here;
  }
  return most;
}

}  // namespace

std::string WhyNoNodeFits(const Cluster& cluster, const TaskGroup& group) {
  const Demand& d = group.demand;
  for (const Node& node : cluster.nodes) {
    if (!MatchesSelector(node, group) || d.cpu_milli > node.cpu_milli ||
        d.memory_mib > node.memory_mib)
      continue;
    // Usable GPUs on the node, and under each switch and socket (an affinity below the node
    // keeps a replica's GPUs inside one of those).
    int gpus = 0;
    std::vector<int> by_switch(node.switches.size()), by_socket(node.sockets.size());
    for (const Gpu& gpu : node.gpus) {
      const GpuModel* model = cluster.FindModel(gpu.model);
      if (!model || !ModelAllowed(d, gpu.model)) continue;
      const bool usable =
          !d.mig_profile.empty()
              ? gpu.mig_enabled && FindMigProfile(model->mig_profiles, d.mig_profile) >= 0
              : !gpu.mig_enabled && (d.gpu_milli == 0 || d.gpu_memory_mib <= model->memory_mib);
      if (!usable) continue;
      ++gpus;
      if (gpu.pcie_switch >= 0 && gpu.pcie_switch < static_cast<int>(by_switch.size())) {
        ++by_switch[gpu.pcie_switch];
        const int socket = node.switches[gpu.pcie_switch].socket;
        if (socket >= 0 && socket < static_cast<int>(by_socket.size())) ++by_socket[socket];
      }
    }
    const auto most = [](const std::vector<int>& counts) {
      return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
    };
    if (d.affinity && d.gpus > 1 && *d.affinity < Level::kNode)
      gpus = *d.affinity == Level::kGpu      ? std::min(gpus, 1)
             : *d.affinity == Level::kSwitch ? most(by_switch)
                                             : most(by_socket);
    const bool asks_gpus = d.gpus > 0 || d.gpu_milli > 0 || !d.mig_profile.empty();
    if (!asks_gpus || gpus >= std::max(1, d.gpus)) return "";
  }
  std::string what;
  if (!d.mig_profile.empty())
    what = "a MIG " + d.mig_profile + " instance";
  else if (d.gpu_milli > 0)
    what = "a " + std::to_string(d.gpu_milli) + " milli share" +
           (d.gpu_memory_mib > 0 ? " with " + std::to_string(d.gpu_memory_mib) + " MiB" : "");
  else if (d.gpus > 0)
    what = std::to_string(d.gpus) + " GPUs on one " +
           (d.affinity && *d.affinity < Level::kNode ? LevelName(*d.affinity) : "node");
  else
    what = "no GPU";
  if (!d.models.empty()) {
    what += " of model";
    for (const std::string& m : d.models) what += " " + m;
  }
  what += ", " + std::to_string(d.cpu_milli) + " milli-CPU and " + std::to_string(d.memory_mib) +
          " MiB";
  if (!group.node_selector.empty()) what += " on nodes matching its node selector";
  const std::string whose = group.name.empty() ? "the job" : "group " + group.name;
  return "no node of the cluster can ever hold one replica of " + whose + " (" + what +
         "); ask for less, or add such a node";
}

JobSpec FirstReplicas(const JobSpec& spec, int replicas) {
  JobSpec first = spec;
  first.groups.clear();
  for (const TaskGroup& g : spec.groups) {
    if (replicas <= 0) break;
    first.groups.push_back(g);
    first.groups.back().replicas = std::min(g.replicas, replicas);
    replicas -= g.replicas;
  }
  if (first.min_replicas > TotalReplicas(first)) first.min_replicas = TotalReplicas(first);
  return first;
}

std::string WhyJobNeverFits(const Cluster& cluster, const JobSpec& spec) {
  for (const TaskGroup& g : spec.groups) {
    std::string why = WhyNoNodeFits(cluster, g);
    if (!why.empty()) return why;
  }
  // A gang larger than the cluster: each node holds a replica, but not all at once. An elastic
  // job needs only its first min_replicas replicas.
  const JobSpec least = spec.min_replicas > 0 ? FirstReplicas(spec, spec.min_replicas) : spec;
  for (const TaskGroup& g : least.groups) {
    const int64_t most = MostReplicas(cluster, g);
    if (most >= 0 && most < g.replicas)
      return "the cluster can never hold all " + std::to_string(g.replicas) + " replicas of " +
             (g.name.empty() ? std::string("the job") : "group " + g.name) + " at once (" +
             std::to_string(most) + " at most, empty); ask for fewer, or add nodes";
  }
  if (!spec.gang_affinity || *spec.gang_affinity > Level::kNode || spec.groups.empty()) return "";
  // A gang bound to one node (or one socket, switch or GPU of it) needs all of it there: whole
  // GPUs, CPU and memory add up. Shares and MIG slices may pack onto fewer GPUs, and groups
  // that differ in models or selectors ask different nodes, so those are left to the allocator.
  const std::string level = LevelName(*spec.gang_affinity);
  TaskGroup whole;
  whole.name = "(the whole gang, which gangAffinity " + level + " puts on one " + level + ")";
  if (*spec.gang_affinity < Level::kNode) whole.demand.affinity = spec.gang_affinity;
  whole.demand.models = spec.groups[0].demand.models;
  whole.node_selector = spec.groups[0].node_selector;
  int64_t gpus = 0;
  for (const TaskGroup& g : spec.groups) {
    const Demand& d = g.demand;
    if (d.gpu_milli > 0 || !d.mig_profile.empty() || d.models != whole.demand.models ||
        g.node_selector != whole.node_selector)
      return "";
    const int64_t replicas =
        spec.groups.size() == 1 && spec.min_replicas > 0 ? spec.min_replicas : g.replicas;
    int64_t add = 0;
    if (__builtin_mul_overflow(replicas, static_cast<int64_t>(d.gpus), &add) ||
        __builtin_add_overflow(gpus, add, &gpus) ||
        __builtin_mul_overflow(replicas, d.cpu_milli, &add) ||
        __builtin_add_overflow(whole.demand.cpu_milli, add, &whole.demand.cpu_milli) ||
        __builtin_mul_overflow(replicas, d.memory_mib, &add) ||
        __builtin_add_overflow(whole.demand.memory_mib, add, &whole.demand.memory_mib))
      return "the job asks for more than any number could hold; ask for less";
  }
  whole.demand.gpus = static_cast<int>(std::min<int64_t>(gpus, INT32_MAX));
  return WhyNoNodeFits(cluster, whole);
}

double GpuEquivalents(const Cluster& cluster, const Demand& demand) {
  if (demand.gpus > 0) return demand.gpus;
  if (demand.gpu_milli > 0) return demand.gpu_milli / 1000.0;
  if (demand.mig_profile.empty()) return 0;
  // A MIG slice counts by its compute slices: 7g is a whole GPU, 1g a seventh.
  for (const GpuModel& m : cluster.models) {
    const int p = FindMigProfile(m.mig_profiles, demand.mig_profile);
    if (p >= 0) return m.mig_profiles[p].compute_slices / static_cast<double>(kMigComputeSlices);
  }
  return 0;
}

double GpuEquivalents(const Cluster& cluster, const JobSpec& spec, int replicas) {
  double gpus = 0;
  int left = replicas;
  for (const TaskGroup& g : spec.groups) {
    const int n = std::min(left, g.replicas);
    gpus += n * GpuEquivalents(cluster, g.demand);
    left -= n;
  }
  return gpus;
}

void SetGpuDemand(int gpus, int milli, Demand* demand) {
  demand->gpus = 0;
  demand->gpu_milli = 0;
  if (gpus <= 0 || milli <= 0) return;
  if (gpus == 1 && milli < 1000)
    demand->gpu_milli = milli;
  else
    demand->gpus = gpus;
}

}  // namespace berth
