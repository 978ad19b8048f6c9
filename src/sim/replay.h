// Replay mode: jobs arrive at their submit times, queue, run for their durations and leave, on
// a virtual clock, through the same engine a server runs; a trace may also change node health
// and cancel jobs on the way.
//
// Contract, as the replay carries out the engine's decisions:
//  - start: the job runs from now; it ends after its remaining work, slowed down when placed
//    less tightly than the cluster could have placed it (each topology level crossed beyond the
//    tightest possible one multiplies its run time) and in proportion when an elastic job runs
//    with fewer replicas than it asked for.
//  - preempt: the victim uses its whole grace period, then stops; evict and kill: it stops at
//    once. A stopped job loses the work done since its last checkpoint and queues again.
//  - At one instant the replay takes, in order: completions and stops, arrivals, the trace's
//    events (in file order), then one scheduling cycle. A cycle also runs when a pending job
//    has waited the policy's reserve_after_s, as a server's periodic cycle would.
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
  JobSpec spec;         // what is submitted; queue "": the first queue
  double submit = 0;    // seconds from the trace start
  double duration = 0;  // run time at full size on the tightest placement
  double comm = 0.5;    // communication intensity 0..1 (how much crossing nodes hurts)
  // Where its trace file lists it, for messages about the whole trace: a CSV row's line
  // (column 0), a YAML entry's line and column; 0 for a job of no file (synthetic).
  int line = 0, column = 0;
};

// A change a trace makes during the replay: node health, or a job withdrawn.
struct ReplayEvent {
  enum class Kind {
    kCordon,
    kUncordon,
    kDrain,
    kFailGpu,
    kFailNode,
    kRecoverGpu,
    kRecoverNode,
    kCancel
  };
  double time = 0;
  Kind kind = Kind::kCordon;
  int node = -1;  // health events: index into the cluster's nodes
  int gpu = -1;   // kFailGpu, kRecoverGpu: GPU index on the node
  int job = -1;   // kCancel: index into the replay's jobs
};

struct ReplayOptions {
  double cross_switch = 1.5;  // slowdown for spreading over PCIe switches of one socket
  double cross_socket = 1.5;  // ... over sockets of one node
  double cross_node = 5;      // ... over nodes, for a fully communication-bound job
  double checkpoint_interval_s = 1800;
  bool shortest_first = false;  // order by known duration (SJF) instead of arrival
  int timeline_points = 400;
  // A server's scheduling cycle: a wait within a guarantee counts as a sharing anomaly only when
  // it passes the victims' grace period by more than this.
  double cycle_s = 1;
};

// One run of a job: from its start decision until it stopped or ended.
struct JobRun {
  double start = -1;
  std::vector<ReplicaPlacement> placements;
  double told_to_stop = -1;  // when a preempt decision came (the run went on for its grace)
  double stop = -1;          // -1: still running when the replay ended
  std::string stop_kind;     // preempt, evict, kill, succeeded, cancelled
  std::string reason;        // the stop decision's reason
};

struct JobOutcome {
  std::string name;
  std::string queue;
  std::string user;
  double submit = 0, first_start = -1, end = -1;
  std::string end_kind;  // succeeded, cancelled, refused; "" while pending or running
  std::string refused;   // why the engine refused it at submit
  int preemptions = 0, evictions = 0;
  int grows = 0, shrinks = 0;  // an elastic job's replicas added or given back
  // The longest stretch it waited within its queue's guarantee while other queues borrowed.
  double guaranteed_wait_s = 0;
  bool anomaly = false;  // that stretch passed the victims' grace period plus one cycle
  double slowdown = 1;   // of its last run
  std::vector<JobRun> runs;
};

struct TimelinePoint {
  double time = 0;
  double utilization = 0;    // GPU-equivalents in use / GPUs, %
  double fragmentation = 0;  // FGD fragmentation, % of GPUs
};

// A queue's state from `time` until its next point (a point is kept only when it changed).
struct QueuePoint {
  double time = 0;
  double usage_gpus = 0;  // held: running and stopping jobs
  double fair_share_gpus = 0;
  int pending = 0;
};

struct Distribution {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};
Distribution Summarize(std::vector<double> values);

struct ReplayResult {
  std::string policy;
  std::string error;  // the engine refused the cluster, queues or policy; nothing ran
  std::vector<std::string> queues;
  std::vector<JobOutcome> jobs;  // in input order
  std::vector<TimelinePoint> timeline;
  std::vector<std::vector<QueuePoint>> queue_timeline;  // per queue
  Distribution jct, wait;                               // over jobs that succeeded
  std::map<std::string, std::pair<Distribution, Distribution>> per_queue;  // (jct, wait)
  double makespan = 0;
  // Time-weighted over the window the load is offered in, from the first arrival to the last
  // (to the last end when every job arrives at once): the drain after it is left out.
  double mean_utilization = 0;
  double utilization_from = 0, utilization_to = 0;
  int preemptions = 0, evictions = 0, kills = 0;
  int grows = 0, shrinks = 0;
  int anomalies = 0;
  double anomaly_tolerance_s = 0;  // the longest grace period plus one cycle
  int cancelled = 0, refused = 0;
  int unfinished = 0;  // jobs still pending or running when nothing was left to happen
};

// Communication intensity of a model by name (vgg/alexnet heavy, resnet/inception light).
double CommIntensity(const std::string& workload);

// Builds replay jobs from trace pods: multi-node requests become gangs of node-sized replicas,
// queues are assigned round-robin by job index when the trace has none. Pods without times are
// left out.
std::vector<ReplayJob> ReplayJobsFromTrace(const Cluster& cluster,
                                           const std::vector<TracePod>& pods,
                                           const std::vector<QueueSpec>& queues);

ReplayResult RunReplay(const Cluster& cluster, const std::vector<QueueSpec>& queues,
                       const std::vector<ReplayJob>& jobs, const std::vector<ReplayEvent>& events,
                       const Policy& policy, const ReplayOptions& options,
                       const std::function<void(double)>& progress);

}  // namespace berth
