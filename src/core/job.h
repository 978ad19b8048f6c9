// Jobs as the engine sees them: a gang of task groups, with a queue, a user, a priority and a
// QoS class. Plain data; the engine (scheduler.h) owns the life cycle.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"

namespace berth {

enum class QosClass { kGuaranteed, kBurstable, kBestEffort };

const char* QosName(QosClass qos);
bool ParseQos(const std::string& text, QosClass* qos);  // guaranteed | burstable | best-effort

// kube-scheduler's PodTopologySpread, over a job's replicas.
struct SpreadConstraint {
  std::string topology_key;  // "node", "rack", "zone" or any node label
  int max_skew = 1;
  bool hard = true;  // DoNotSchedule; false: ScheduleAnyway (a score, not a filter)
};

// A host directory that a group's containers see, as docker's -v HOST:CONTAINER[:ro]. The
// server accepts only host paths under its --allow-mount prefixes, compared lexically; the agent
// that mounts it refuses a path with a symbolic link on it (agent/host_paths.h).
struct Mount {
  std::string host, container;  // absolute and lexically normal (config/mount_path.h)
  bool read_only = false;
};

struct TaskGroup {
  std::string name;
  int replicas = 1;
  Demand demand;  // per replica: GPUs / share / MIG profile, models, CPU, memory, affinity
  std::string image;
  std::map<std::string, std::string> node_selector;  // node labels that must match
  std::vector<Mount> mounts;                         // each at its own container path
  int64_t shm_bytes = 0;                             // /dev/shm's size; 0: the runtime's default
  std::vector<std::string> command;                  // empty: the image's own
  std::map<std::string, std::string> env;
};

struct JobSpec {
  std::string name;
  std::string queue;
  std::string user;
  int priority = 0;
  // A named class of the policy's priorityClasses; when set, it gives `priority` at submit.
  std::string priority_class;
  QosClass qos = QosClass::kBurstable;
  std::vector<TaskGroup> groups;
  int min_replicas = 0;  // elastic jobs: start with at least this many replicas (0: all)
  std::vector<SpreadConstraint> spread;
  std::optional<Level> gang_affinity;  // all replicas inside one cell of this level
  bool preemptible = true;
  double grace_period_s = 30;
};

// Replicas a spec asks for in all.
int TotalReplicas(const JobSpec& spec);
// The job cut to its first `replicas` replicas, in group order (an elastic job at a smaller size).
JobSpec FirstReplicas(const JobSpec& spec, int replicas);
// Why no node of the cluster, even empty and healthy, could ever hold one replica of the group
// (too many GPUs for any node, a MIG profile no MIG-enabled GPU offers, a share of more memory
// than a GPU has, CPU or memory past a node's, a selector no node matches); "" when one could.
std::string WhyNoNodeFits(const Cluster& cluster, const TaskGroup& group);
// The same for the whole job: each group, and a gang bound to one node (gangAffinity node)
// as a whole; "" when it could fit.
std::string WhyJobNeverFits(const Cluster& cluster, const JobSpec& spec);
// GPU-equivalents one replica of a group uses: whole GPUs, milli / 1000, or a MIG instance's
// compute slices / 7 (a 7g slice counts 7 times a 1g).
double GpuEquivalents(const Cluster& cluster, const Demand& demand);
// The same for the job's first `replicas` replicas, in group order.
double GpuEquivalents(const Cluster& cluster, const JobSpec& spec, int replicas);
// Sets the GPUs of `demand` as traces and job specs give them: `gpus` GPUs of `milli`
// thousandths each (0 of either: none). A share of 1000 is the whole GPU, so readers accept
// 1..1000 while the allocator's shares stay 1..999; several GPUs are always whole.
void SetGpuDemand(int gpus, int milli, Demand* demand);

}  // namespace berth
