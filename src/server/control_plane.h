// The server's state: one engine (src/core) and the jobs as users see them, kept durable in
// the state store. No HTTP here: http_api.cc maps requests onto these calls.
//
// Job states: pending -> scheduled (placed; an agent then starts it) -> ... -> succeeded,
// failed, stopped or lost. A preempted or evicted job records "preempted" and goes back to
// pending. Every transition is stored with its time and reason before the call that made it
// returns, so what a client was told survives a kill -9 (the state store's group commit lets
// concurrent calls share one fsync).
//
// Recovery: a new ControlPlane over an existing state rebuilds the engine from the stored
// jobs: pending ones are queued again, placed ones are adopted at the exact GPUs they hold.
// A job whose spec no longer fits the cluster, or whose GPUs are gone, is marked so with the
// reason (failed, or lost and back to pending), never silently dropped.
//
// Hot reload: ApplyPolicy and ApplyQueues build a new engine under the new rules and hand it
// every job as Recover does (placed jobs adopted at exactly their GPUs, pending ones queued
// again, the cordons kept). If any job would not be kept as it is (its priority class or queue
// gone, its spec refused, its GPUs not adoptable under the new guarantees), nothing changes and
// the reload is refused (409) listing those jobs: an admin's edit never fails or moves users'
// jobs behind their backs. What was applied is stored, and a restart uses it rather than the
// server's --policy and --vcs flags (the API's is the later decision); the first log line
// says which.
//
// Node agents (protocol/agent_protocol.h): each registered node's agent is handed the replicas
// of the jobs placed there and reports its containers; the reports move jobs through starting,
// running and their end (succeeded, failed), and a container that vanished makes its job lost
// (back to pending). On a node with an agent, a preempted job keeps its GPUs until the agent
// reports its containers stopped; on a node without one (nothing runs there) it stops at once.
// An agent silent for `unhealthy_after_s` has its node cordoned (no new jobs); silent for
// `lost_after_s`, the node is lost and its jobs are placed again elsewhere. The gap keeps a
// network blip from running a job twice. An agent that reports it cannot reach its container
// engine counts as silent from its first such report (it can neither start nor see containers).
//
// Threading: every call may come from any thread. Two mutexes: engine_mu_ serializes the engine
// (its contract: one caller at a time) and is held through a scheduling cycle; mu_ guards the
// job table and is held only briefly, so that submissions and reads never wait for a cycle. A
// submitted job is stored at once and handed to the engine at the start of the next cycle.
// Lock order: engine_mu_, then mu_. The store's commit is waited for outside both, by writers
// and by readers of jobs and assignments alike: nothing is shown before it is kept.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/cluster.h"
#include "core/policy.h"
#include "core/scheduler.h"
#include "protocol/agent_protocol.h"
#include "server/access.h"
#include "server/metrics.h"
#include "server/node_join.h"
#include "store/log_store.h"
#include "store/state_store.h"

namespace berth {

// A request the control plane refuses: the HTTP status and what to tell the client.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, nlohmann::json detail = nlohmann::json::object())
      : std::runtime_error(message), status(status), detail(std::move(detail)) {}
  int status;
  nlohmann::json detail;  // fields a program reads, sent beside "error"
};

struct JobFilter {
  std::string queue, user;       // "" matches any
  std::set<std::string> states;  // empty matches any
  bool live = false;  // only jobs not ended, and stopped ones whose containers still stop
  int64_t after = 0;  // ids above this only (paging)
  size_t limit = 1000;
};

// The policy and queues in force as text: each a file of its format (a built-in policy as a
// file of just its base), and where it came from.
struct RulesText {
  std::string policy_name;  // set by InForce
  std::string policy_yaml, policy_from;
  std::string queues_yaml, queues_from;
};

struct ControlPlaneConfig {
  Cluster cluster;
  // Whether a node the cluster does not have joins it when its agent registers with its shape
  // (berth server --cluster none); joined nodes are kept in the state.
  bool nodes_join = false;
  // Whether every node of the cluster file is watched from the start (berth server
  // --expect-agents): a node whose agent does not come within unhealthy_after_s turns
  // unhealthy (no new jobs), then lost (its jobs placed elsewhere), as a node whose agent went
  // silent does. Without it, a node is watched once its agent registered or jobs ran there.
  bool expect_agents = false;
  // The server's flags; a policy or queues applied through the API and kept in the state win.
  std::vector<QueueSpec> queues;  // a queue "default" is added when missing
  Policy policy;
  // The text of the files they came from, which GET /v1/policy and /v1/queues give back: ""
  // for a built-in policy, and for no --vcs.
  std::string policy_yaml, queues_yaml;
  // Host directories a job's volumes may mount from (--allow-mount), lexically
  // normal (config/mount_path.h); none: no volume is accepted.
  std::vector<std::string> allowed_mounts;
  // Agents (above): seconds without a report before a node is unhealthy, then lost.
  double unhealthy_after_s = 15;
  double lost_after_s = 120;
  // Where agents' log lines are kept; none: logs are dropped.
  LogStore* logs = nullptr;
};

class ControlPlane {
 public:
  // `now` gives seconds since the epoch. Rebuilds from what `store` holds; throws ApiError 500
  // when the engine refuses the cluster or queues, or the stored policy or queues no longer
  // load.
  ControlPlane(ControlPlaneConfig config, StateStore* store, std::function<double()> now);

  // Accepts a job spec (JSON or YAML, docs/api.md) from `caller`; returns its id. ApiError 400
  // names the field when the spec is wrong, or says why the job could never fit the cluster;
  // 403 when the caller may not use the queue or names another user, or a volume mounts a host
  // path the server does not allow. The job's user is the
  // caller's, when the caller has one.
  int64_t Submit(const std::string& body, const Caller& caller = Caller());
  // Calls `visit` on each job the filter selects, by id, under the job table's lock: a page of
  // thousands is written out without copying a job. `reason` is the job's, but for a pending
  // job: why it waits now (WhyWaiting, as of the last refresh), once it has been tried.
  void List(
      const JobFilter& filter,
      const std::function<void(const StoredJob& job, const std::string& reason)>& visit) const;
  std::vector<StoredJob> List(const JobFilter& filter) const;  // copies, with that reason
  StoredJob Get(int64_t id) const;                             // ApiError 404
  // Its containers are still stopping (preempted; or ended: stopped, or failed while other
  // replicas ran): they hold its GPUs, and their last output is still to come.
  bool Stopping(int64_t id) const;
  // Stops the job (pending or placed); a job already ended is left as it is (409).
  StoredJob Stop(int64_t id);
  // Forgets an ended job; 409 while it has not ended.
  void Remove(int64_t id);
  // Up to `limit` of the job's events after `seq`, oldest first (ApiError 404).
  EventPage Events(int64_t id, int64_t seq = 0, size_t limit = 1000) const;
  // Events after `seq` that `caller` may see (its jobs' and the nodes'; all for an admin), at
  // most `limit`; waits up to `wait_s` for one when there are none yet.
  EventPage EventsAfter(int64_t seq, size_t limit, const Caller& caller, double wait_s) const;
  std::vector<QueueStatus> Queues() const;
  // The cluster in force: the server's, with the nodes that joined it so far (a node that joins
  // is added at the end, so a node's index never changes).
  std::shared_ptr<const Cluster> cluster() const;
  // The most nodes the cluster may have: its own, or kMaxJoinedNodes where nodes join.
  size_t max_nodes() const;
  // The cell tree with each cell's free, used and bad GPUs as the jobs hold them now
  // (config/cells_report.h).
  nlohmann::json Cells() const;
  // Hot reload (above) of a policy file's YAML (docs/policy-file.md) or of a VC file's (one
  // queue per VC, weight 1, no cap; "default" added when missing). `by` names the admin for
  // the event log. Returns what was done, as logged. ApiError 400 for a bad file (each
  // mistake's line and field) or guarantees the cluster cannot give; 409 naming the queue and
  // its jobs when a queue with jobs not ended would go, or listing the jobs that would not be
  // kept as they are.
  std::string ApplyPolicy(const std::string& yaml, const std::string& by);
  std::string ApplyQueues(const std::string& yaml, const std::string& by);
  // The policy and queues in force, as files that `berth policy apply` and `berth queues
  // apply` take back unchanged.
  RulesText InForce() const;
  struct AgentStatus {
    bool registered = false, simulated = false, unhealthy = false, lost = false;
    std::string engine_error;                    // "" while its agent reaches its container engine
    double heartbeat_age_s = -1;                 // -1: never heard from
    std::vector<std::string> topology_mismatch;  // see AgentNode
    std::vector<std::string> off_gpus;           // ditto
    int images = 0;                              // as last reported
    int64_t image_bytes = 0;                     // their layers', each layer once
  };
  struct NodeStatus {
    Node node;  // as the cluster has it
    int free_gpus = 0;
    bool cordoned = false;
    std::string gpu_map;  // a character a GPU: '#' held by a placed job, 'x' bad, '.' neither
    AgentStatus agent;
  };
  // Per node, in node order; read at once under both locks, so each row is one node's state.
  std::vector<NodeStatus> Nodes() const;
  // An operator's action on a node: "cordon" (no new jobs), "uncordon", or "drain" (cordon,
  // and evict its jobs, which wait again). Kept across restarts; for a node left out at a
  // restart, applied when it joins again. ApiError 404 for an unknown node, 400 for an unknown
  // action.
  void NodeAction(const std::string& node, const std::string& action);
  // Forgets a node that joined (berth server --cluster none): it leaves the cluster, and its
  // kept row, cordon and GPU UUIDs go, so a restart does not bring it back; its agent may join
  // it again later. Nodes after it move up one index. Returns the event's reason. ApiError 404
  // for a node neither in the cluster nor kept; 409 with a cluster file (edit the file), while
  // jobs are placed on it or stopping there (drain it first), while its agent reports (stop
  // the agent first), or when the queues' guarantees would no longer fit the cluster.
  std::string RemoveNode(const std::string& node);
  // One scheduling cycle; its decisions are applied and stored before it returns.
  void Cycle();
  // Returns when a cycle has work that did not wait for it (a job became pending, a job ended
  // and freed its GPUs), after `max_wait_s` at the latest, or once the watches are stopped.
  void WaitForWork(double max_wait_s);
  // What Recover found, for the server's first log line.
  const std::string& recovery_summary() const { return recovery_summary_; }
  // A commit failed: memory may now hold what the database does not. Every later change is
  // refused (503), and the server should stop so that a restart rebuilds from the database.
  bool broken() const { return broken_; }

  static bool Ended(const std::string& state);

  // The agent protocol. ApiError 404 for a node the cluster does not have (unless nodes join:
  // then it joins, or 400 says why it cannot); 409 when the agent's GPUs are not the cluster's
  // (count), naming both.
  uint64_t RegisterAgent(const std::string& node, const NodeRegistration& registration);
  // How long the agent that registered so may go without reaching the server before another
  // process may register as its node (three report periods, at most --node-unhealthy-after).
  // The agent holds its hand for as long (it cannot tell whether it was replaced).
  double ReplaceableAfterS(const NodeRegistration& registration) const;
  // The node's assignments; waits up to `wait_s` while their version is still `since`, unless
  // the watches were stopped. The watch of an agent process (`instance`; "": not said) that
  // another has replaced is refused, and ends when that happens (RefuseASupersededAgent).
  AssignmentSet Assignments(const std::string& node, uint64_t since, double wait_s,
                            const std::string& instance = "") const;
  // Ends the assignment watches now, and later ones answer at once: the server is stopping.
  void StopWatches();
  // A heartbeat: the node's containers and new log lines. ApiError 409 when the agent has not
  // registered since the server started (it should register again). The reply names the runs
  // whose chunk was not taken (LogChunk::from); such a run's exited container counts as running
  // until its output is all in.
  ReportReply Report(const std::string& node, AgentReport report);
  // Up to `max` bytes of the job's output from `offset` (`*next`: the offset after them);
  // waits up to `wait_s` for some when there are none yet. With `stderr_spans`, also what of
  // them the job wrote to stderr.
  std::string Logs(int64_t id, int64_t offset, size_t max, double wait_s, int64_t* next,
                   StderrSpans* stderr_spans = nullptr) const;
  std::vector<AgentStatus> Agents() const;  // by node
  // What the agents last reported of the job's replicas (their containers, exit codes and
  // start phases), by replica; empty when none reported since the server started. Each
  // replica's phases start with "queued", the server's own: from pending to placed.
  std::map<int, ContainerReport> Replicas(int64_t id) const;
  // Why a pending job waits, as the engine last found ("" before its first cycle), or what
  // keeps a scheduled one from starting (StartBlocker; "" when nothing known does). Waits for
  // a cycle in progress. A listing (List) gives the same as the job's reason, a pending job's
  // refreshed once a second, without waiting for a cycle.
  std::string WhyWaiting(int64_t id) const;

  // What GET /metrics reports (docs/api.md, "Metrics"), as plain numbers; http_api.cc writes
  // them out. Read at once under both locks, so the parts agree with each other.
  struct GpuCount {
    std::string node, model;
    // Each GPU counted once: held by a placed job; else bad; else on a cordoned node; else free.
    int allocated = 0, bad = 0, cordoned = 0, free = 0;
  };
  struct MetricsSnapshot {
    std::map<std::string, int> jobs;  // by state, every state of JobStates() (0 included)
    std::vector<QueueStatus> queues;
    std::vector<GpuCount> gpus;  // per node and GPU model, in node order
    // FGD's fragmentation (core/fragmentation.h) in GPUs, the workload being the shapes of the
    // jobs not ended; 0 while there are none.
    double fragmentation_gpus = 0;
    Histogram cycle_seconds;                    // the engine's Schedule call, per cycle
    std::map<std::string, uint64_t> decisions;  // applied, by DecisionKindName (every kind)
    uint64_t preemptions = 0;  // jobs sent back to pending by a preempt, evict or kill
    std::vector<std::pair<std::string, double>> heartbeat_ages;  // nodes with an agent, or expected
    std::vector<std::pair<std::string, size_t>> topology_mismatches;  // nodes with an agent
    std::vector<std::pair<std::string, size_t>> off_gpus;  // ditto: containers off their GPUs
    std::vector<std::pair<std::string, bool>> engine_up;   // ditto: its agent reaches its engine
    // GPUs as their agents' DCGM exporters last saw them, by node name.
    std::vector<std::pair<std::string, std::vector<GpuReport>>> gpu_telemetry;
    // Running replicas' contention as their agents last measured it: (job, replica, report).
    std::vector<std::tuple<int64_t, int, ContainerReport>> containers;
    std::map<std::string, Histogram> start_phases;  // cold-start phases' seconds, by phase
  };
  MetricsSnapshot Metrics() const;
  static const std::vector<std::string>& JobStates();
  static std::vector<double> CycleSecondsBuckets();  // 0.5 ms to 5 s
  static std::vector<double> StartPhaseBuckets();    // 10 ms to 5 min

 private:
  struct Job {
    StoredJob stored;
    JobSpec spec;
    int engine_id = -1;  // while the engine knows it
    bool borrowed = false;
    // Agents (memory only; agents' reports fill it again after a restart).
    std::string placement;                    // the placement's token, while placed
    std::set<int> nodes;                      // nodes whose agents were last handed it
    std::map<int, uint64_t> node_version;     // node -> its assignments' version at that change
    std::map<int, ContainerReport> replicas;  // replica -> its last report
    int start_failures = 0;                   // agents could not start it, in a row
    // Adopted as placed when the server started: its run's start phases were timed and counted
    // by the server before, so their first report here is not counted again.
    bool adopted = false;
    double queued_s = -1;  // its latest placement's wait, from pending to placed (-1: none)
    // Its latest placement, kept after it ends: the last lines of its stopping containers
    // still belong to it.
    std::string log_placement;
    std::set<int> log_nodes;
    // While pending: why it waits, as the engine found at the last refresh (RefreshWaiting);
    // "" before one.
    std::string waiting;
  };
  struct AgentNode {
    bool registered = false;
    // Watched for silence although not registered yet: a node that joined before a restart,
    // whose agent is expected back, a node where jobs ran, or any with --expect-agents.
    bool expected = false;
    // Of those, the nodes that joined or where jobs ran: their agent, back, may still run a
    // job, so a job stopped there holds its GPUs until the agent says it ended.
    bool may_run_jobs = false;
    NodeRegistration registration;
    double last_seen = 0;
    // Its agent's last registration: contact, though not a report (which lifts an outage).
    double registered_at = -1;
    bool unhealthy = false, lost = false;
    // Down before its agent ever registered with this server process (--expect-agents): its
    // first report is no return.
    bool down_before_registering = false;
    // Since when its agent says it cannot reach its container engine (-1: it can), and why
    // (AgentReport::runtime_error); counted as silence is.
    double engine_away_since = -1;
    std::string engine_error;
    // The server's own cordon (unhealthy, or not registered again since a restart), which a
    // report or registration lifts.
    bool cordoned_by_us = false;
    uint64_t version = 0;               // of its assignments
    std::vector<GpuReport> gpus;        // the last report's DCGM view
    std::vector<ReportedImage> images;  // as last reported
    std::vector<std::string> prefetch;  // images to pull ahead (AssignmentSet::prefetch)
    int64_t image_bytes = 0;            // their layers', each layer once
    // Where the node its agent found differs from the cluster file's (CompareNodes): jobs
    // would be pinned to CPUs away from their GPUs, or cells would not match the hardware.
    std::vector<std::string> topology_mismatch;
    // Its containers that run on CPUs away from their GPUs' NUMA node (the agent could not move
    // them back: ContainerReport::off_gpus), as of its last report: "job J replica R ...".
    std::vector<std::string> off_gpus;
  };

  // What a reload replaces. Submissions check a spec against a snapshot, and a reload swaps
  // it, so neither waits for the other.
  struct Rules {
    std::shared_ptr<const Cluster> cluster;  // replaced whole when a node joins
    std::vector<QueueSpec> queues;
    Policy policy;
    RulesText text;
  };
  // A fresh engine over `rules` holding `stored` (Recover, Reload).
  struct Loaded {
    std::string error;  // the engine refuses the rules; nothing else is set
    std::unique_ptr<Scheduler> engine;
    std::map<int64_t, Job> jobs;
    std::map<int, int64_t> by_engine_id;
    int adopted = 0, lost = 0, failed = 0, ended = 0;
    int stopping = 0;  // stopped or preempted, held at their GPUs until their containers stop
    // The jobs not kept as they were (failed, lost and queued again), recorded on them.
    std::vector<StoreWrite> writes;
  };
  // Ended jobs are kept as they are; placed ones adopted at exactly their GPUs (guaranteed
  // before borrowed), and so are stopped and preempted ones whose containers were still
  // stopping (held until they are gone, then ended or queued again); the rest, and placed ones
  // whose GPUs cannot be taken again (lost), queued. A job whose spec the rules refuse fails.
  // `cordoned`: node indices. `when` starts the reasons recorded ("after a restart").
  Loaded Load(const Rules& rules, std::vector<StoredJob> stored, const std::vector<int>& cordoned,
              const std::string& when);
  void Recover();
  // Adds the node its agent registers, or replaces it when the agent found other hardware than
  // it joined with (nodes_join_; both locks held): the engine and the rules take the new
  // cluster, and the registration is queued to be kept. Returns its index; ApiError 400 says
  // why it cannot join, 409 that jobs are placed on a node whose hardware changed.
  int Join(const std::string& node, const NodeRegistration& registration, double now,
           std::vector<StoreWrite>* writes);
  // Queues the kept row of joined node `node`: its order of joining (a new place if it has none
  // yet) and `registration`, with the event `kind` and `reason`.
  void KeepJoined(const std::string& node, const NodeRegistration& registration,
                  const std::string& kind, const std::string& reason, double now,
                  std::vector<StoreWrite>* writes);
  // After a node joined again with other GPUs, or was removed (`cause`, for the reason):
  // pending jobs naming a GPU model that `old` had and the cluster has no more fail (mu_ and
  // engine_mu_ held).
  void FailJobsOfDroppedModels(const Cluster& old, const std::string& cause, double now,
                               std::vector<StoreWrite>* writes);
  // Adds to `cluster` node `node` that joined before, from its kept row (`kept`: {"order",
  // "registration"}), and sets `registration` to the kept one; says why not.
  static std::string JoinAgain(const std::string& node, const std::string& kept, Cluster* cluster,
                               NodeRegistration* registration);
  // The order in which a kept node joined; none when the row does not say.
  static std::optional<int64_t> JoinOrder(const std::string& kept);
  AgentStatus AgentStatusOf(int node, double now) const;  // mu_ held
  // Throws for an agent call from node `node`, which the cluster does not have: 404, or 409
  // (register first) where nodes join.
  [[noreturn]] void RefuseUnknownNode(const std::string& node) const;
  // The key of a joined node's kept row, before its name: one row per node name.
  inline static const std::string kJoinedNodeKey = "node:";
  // Applies `change` to the rules (ApplyPolicy, ApplyQueues: `what`, named `label` in the
  // log) when every job is kept as it is, and stores `setting` with them. Returns the event's
  // reason.
  std::string Reload(const std::function<void(Rules&)>& change, const std::string& what,
                     const std::string& label, StoredSetting setting, const std::string& by);
  std::shared_ptr<const Rules> CurrentRules() const;
  // The spec of a submission, checked against `rules` for `caller` (Submit's ApiErrors).
  JobSpec CheckedSpec(const std::string& body, const Caller& caller, const Rules& rules) const;
  // Records `state` and `reason` on the job (a transition) and queues its write.
  void Record(Job& job, const std::string& state, const std::string& reason,
              std::vector<StoreWrite>* writes);
  // Whether agents should run the job's containers now.
  static bool Desired(const Job& job);
  // After a change of the job's state or placements: the versions of the nodes it left or
  // joined move on, and their watchers wake (mu_ held).
  void Touch(Job& job);
  std::set<int> NodesOf(const std::string& placements) const;
  // A scheduled job's containers cannot start while an agent of its nodes cannot reach its
  // container engine: why, or "" (mu_ held).
  std::string StartBlocker(const Job& job) const;
  bool HasAgent(const Job& job) const;
  // The job's replicas on `node` as assignments (mu_ held).
  void AssignmentsOf(const Job& job, int node, std::vector<Assignment>* out) const;
  // A refusal's detail for an agent that cannot register for now (its hardware): {"keep": the
  // runs (job, replica, placement) still placed on `node`}. The agent stops its other containers
  // (their jobs were stopped, or placed elsewhere once the node was lost): else a job could run
  // here and elsewhere at once (mu_ held).
  nlohmann::json KeptRuns(int node) const;
  // Applies a node's report to one job placed there, or stopping there (both locks held).
  // What the agents last reported of the GPUs and images, for the engine's telemetry plugins
  // (gpu-memory-threshold, load, image-locality). Under mu_.
  Telemetry ObservedTelemetry() const;
  // Node n of `t` from its agent's last report: its GPUs, and its images when `images`.
  void ObserveNode(int n, bool images, Telemetry* t) const;
  // Every image some node holds, by normalized name, with its layers.
  std::map<std::string, std::vector<ImageLayer>> KnownImageLayers() const;
  // What the agent's `report` says of the job's replicas on `node`; `lost`: the node was lost
  // (no report: its containers count as stopped).
  void ReportOn(Job& job, int node, const AgentReport& report,
                const std::map<std::pair<int64_t, int>, const ContainerReport*>& mine, double now,
                std::vector<StoreWrite>* writes, bool lost = false);
  // A job stopped on request (or failed) whose containers are gone: the engine frees its GPUs.
  void FinishStopped(Job& job);
  // Whether every replica of the job's placement has stopped: reported ended, or on a node
  // that is lost or has no agent (nothing runs it there).
  bool StoppedEverywhere(const Job& job) const;
  // The job back to pending, its GPUs freed: an agent could not start it, or lost it (with
  // back-off), or its node was lost (without: it is placed elsewhere at once).
  void Requeue(Job& job, const std::string& state, const std::string& reason, double now,
               std::vector<StoreWrite>* writes, bool node_lost = false);
  // Unhealthy and lost nodes (Cycle, both locks held).
  void CheckAgents(double now, std::vector<StoreWrite>* writes);
  // ApiError 409 for a registration of another agent process while the node's agent still
  // reports (two agents under one --node name would run the node's jobs twice), and for a
  // report or watch of a process that another one has replaced since: its detail
  // `replacedBy` names the new process and its engine, so that the old one stops its work.
  void RefuseASecondAgent(const AgentNode& agent, const std::string& node,
                          const NodeRegistration& registration, double now) const;
  void RefuseASupersededAgent(const AgentNode& agent, const std::string& node,
                              const std::string& instance) const;
  // Copies each pending job's reason from the engine (Job::waiting), at most once a second:
  // a pass over every engine job. Both locks held.
  void RefreshWaiting(double now);
  void Apply(const std::vector<Decision>& decisions, std::vector<StoreWrite>* writes);
  // Asks each node to pull ahead the images of the jobs that will land on it (`reserved_nodes`:
  // engine job id to the nodes of its reservation or preemption plan), so that their pulls
  // overlap their wait; a node's assignments change when its list does. Under both locks.
  void AskPrefetch(const std::map<int, std::set<int>>& reserved_nodes);
  std::string PlacementsJson(const JobRecord& record, const std::string& token) const;
  // The stored placements on this cluster, or nullopt when a node or GPU is gone.
  std::optional<std::vector<ReplicaPlacement>> ParsePlacements(const std::string& json) const;
  // Why the engine would refuse the spec or could never place it; "" when neither.
  std::string WhyUnrunnable(const JobSpec& spec) const;
  // Which volume of the spec mounts a host path outside the allowed mounts, and what they are;
  // "" when none does.
  std::string WhyMountsRefused(const JobSpec& spec) const;
  // Why the engine under `rules` would refuse the spec or could never place it; "" when
  // neither.
  std::string WhyUnrunnable(const Rules& rules, const JobSpec& spec) const;
  void RefuseIfBroken() const;
  // (node, GPU) of every placed job's GPUs, shares too (engine_mu_ held).
  std::set<std::pair<int, int>> HeldGpus() const;
  // Hands the jobs submitted since the last cycle to the engine (engine_mu_ and mu_ held).
  void SubmitIncoming(double now, std::vector<StoreWrite>* writes);
  std::string NodesOf(const JobRecord& record) const;
  Job& Find(int64_t id);
  const Job& Find(int64_t id) const;
  // Queues `writes` (under the caller's lock, so the store sees this order), releases the
  // locks, and waits for the commit, and for that of `enqueued`, a ticket queued earlier.
  void Commit(std::vector<std::unique_lock<std::mutex>*> locks, std::vector<StoreWrite> writes,
              uint64_t enqueued = 0);
  // Waits until `ticket`'s writes are committed (ApiError 503 when they failed). Readers take
  // the store's newest ticket under mu_ and wait for it outside: every change they saw was
  // enqueued under mu_ before it was released, so they answer only what a restart keeps.
  void AwaitCommitted(uint64_t ticket) const;

  // The cluster of rules_ (mu_ or engine_mu_ held: a join swaps it under both).
  const Cluster& cluster_now() const { return *rules_->cluster; }

  const bool nodes_join_;
  const std::vector<std::string> allowed_mounts_;
  StateStore* store_;
  std::function<double()> now_;
  mutable std::mutex engine_mu_;  // engine_, by_engine_id_
  mutable std::mutex mu_;         // jobs_, incoming_, next_id_, rules_ (swapped under both)
  std::shared_ptr<const Rules> rules_;
  std::unique_ptr<Scheduler> engine_;
  std::map<int64_t, Job> jobs_;
  std::vector<int64_t> incoming_;  // submitted, not yet given to the engine
  std::map<int, int64_t> by_engine_id_;
  int64_t next_id_ = 1;
  std::string recovery_summary_;
  std::atomic<bool> broken_{false};
  bool watches_stopped_ = false;  // under mu_
  // Metrics, under engine_mu_.
  Histogram cycle_seconds_{CycleSecondsBuckets()};
  std::map<Decision::Kind, uint64_t> decisions_;
  uint64_t preemptions_ = 0;
  std::map<std::string, Histogram> start_phases_;  // under mu_
  // Agents, under mu_.
  const double unhealthy_after_s_, lost_after_s_;
  LogStore* logs_;
  std::vector<AgentNode> agents_;           // by node
  std::vector<std::set<int64_t>> on_node_;  // by node: the jobs its agent is handed
  std::set<int64_t> stopping_;  // preempted, stopped or failed, waiting for agents to stop them
  // Joined nodes, under mu_: each name's order of joining (kept across restarts), and the next.
  std::map<std::string, int64_t> join_order_;
  int64_t next_join_order_ = 0;
  // Nodes that joined before a restart and were left out (their kept row no longer joins), under
  // mu_, until they join again: the operator's cordon, applied then, and the GPU UUIDs of the
  // kept registration, which no other node may register meanwhile.
  struct LeftOut {
    bool cordoned = false;
    std::vector<std::string> gpu_uuids;
  };
  std::map<std::string, LeftOut> left_out_;
  uint64_t nodes_removed_ = 0;  // under mu_: a watch finds its node's index again after one
  mutable std::condition_variable assignments_changed_;
  bool cycle_wanted_ = false;      // under mu_
  double waiting_refreshed_ = -1;  // under engine_mu_: when RefreshWaiting last ran
  std::condition_variable cycle_wanted_cv_;
};

}  // namespace berth
