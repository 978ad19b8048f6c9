// Replay mode: jobs arrive at their submit times, queue, run for their durations and leave, on
// a virtual clock, through the same engine a server runs.
//
// Placement changes speed: a job placed less tightly than the cluster could have placed it
// runs slower (each topology level crossed beyond the tightest possible one multiplies its run
// time). A preempted job loses the work done since its last checkpoint and queues again.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/policy.h"
#include "core/scheduler.h"
#include "sim/trace.h"

namespace berth {

struct ReplayJob {
  TracePod pod;  // per-replica shape when replicas > 1
  int replicas = 1;
  std::string queue;  // "" : the first queue
  int priority = 100;
  double comm = 1;  // communication intensity 0..1 (how much crossing nodes hurts)
};

struct ReplayOptions {
  double cross_switch = 1.5;  // slowdown for spreading over PCIe switches of one socket
  double cross_socket = 1.5;  // ... over sockets of one node
  double cross_node = 5;      // ... over nodes, for a fully communication-bound job
  double checkpoint_interval_s = 1800;
  bool shortest_first = false;  // order by known duration (SJF) instead of arrival
  int timeline_points = 400;
};

struct JobOutcome {
  std::string name;
  std::string queue;
  double submit = 0, first_start = -1, end = -1;
  int preemptions = 0;
  bool anomaly = false;  // waited while its VC's guarantee was held by another VC
  double slowdown = 1;
};

struct TimelinePoint {
  double time = 0;
  double utilization = 0;                             // GPU-equivalents in use / GPUs, %
  double fragmentation = 0;                           // FGD fragmentation, % of GPUs
  std::vector<double> queue_usage, queue_fair_share;  // GPUs, per queue
};

struct Distribution {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};
Distribution Summarize(std::vector<double> values);

struct ReplayResult {
  std::string policy;
  std::vector<std::string> queues;
  std::vector<JobOutcome> jobs;
  std::vector<TimelinePoint> timeline;
  Distribution jct, wait;
  std::map<std::string, std::pair<Distribution, Distribution>> per_queue;  // (jct, wait)
  double makespan = 0;
  double mean_utilization = 0;
  int preemptions = 0;
  int anomalies = 0;
  int unfinished = 0;  // jobs that never fit the cluster
};

// Communication intensity of a model by name (vgg/alexnet heavy, resnet/inception light).
double CommIntensity(const std::string& workload);

// Builds replay jobs from trace pods: multi-node requests become gangs of node-sized replicas,
// queues are assigned round-robin by job index when the trace has none.
std::vector<ReplayJob> ReplayJobsFromTrace(const Cluster& cluster,
                                           const std::vector<TracePod>& pods,
                                           const std::vector<QueueSpec>& queues);

ReplayResult RunReplay(const Cluster& cluster, const std::vector<QueueSpec>& queues,
                       const std::vector<ReplayJob>& jobs, const Policy& policy,
                       const ReplayOptions& options, const std::function<void(double)>& progress);

}  // namespace berth
