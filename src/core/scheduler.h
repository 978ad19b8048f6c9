// The scheduling engine: queues of jobs, fair shares, elastic borrowing, preemption,
// reservations and the plugin pipeline, over the allocator. Pure: the clock is passed in,
// telemetry is fed in, and decisions and events come out for adapters (simulator, server,
// Kubernetes extender) to carry out and persist.
//
// Threading: one engine is driven by one thread. Nothing here locks; an adapter that serves
// several clients (the server) funnels every call through one owner (a mutex around the engine,
// or a single engine thread fed by a queue), so calls never overlap.
//
// Contract, per call:
//  - A queue is a virtual cluster: its guarantee is the VC's cells. Jobs of priority >= 0 run
//    inside the guarantee when they fit; above it a queue borrows idle capacity (up to its cap)
//    and borrowed jobs are preemptible. Priority < 0 jobs always borrow.
//  - Gangs are all-or-nothing. Elastic jobs (min_replicas > 0) start with as many replicas as
//    fit (and as the queue's cap leaves room for), at least min_replicas. At the end of each
//    cycle, running elastic jobs below full size grow into what pending jobs left free (kGrow).
//    While another queue under its fair share has work waiting out a back-off, a borrower
//    starts or grows past its minimum only within (1 + reclaim_hysteresis) x its own queue's
//    share: the GPUs it would take are that work's when the back-off ends, and a reclaim would
//    cut it back. Free GPUs that nobody waits for this way are taken whole.
//    Before whole jobs are preempted, elastic victims give back replicas, one at a time down to
//    their minimum (kShrink, at once), and the preemptor starts on what they freed. An elastic
//    preemptor reclaims at the size its fair share, or its queue's guarantee, leaves room for,
//    down to its minimum.
//  - Order (queue_order.h): the queues below their fair share of GPUs first (and those whose
//    waiting jobs ask for no GPUs), then the others; within each, the queue with the smallest
//    weighted dominant share goes next (shares as of the cycle's start, usage as it changes);
//    inside a queue, the highest whole priority point (priority plus aging), then the user with the
//    smallest dominant share, updated as jobs start in the cycle (DRF among users), then submit
//    time. A job that cannot be placed does not block the jobs behind it (backfill), but nobody is
//    placed on GPUs reserved for another job.
//  - Preemption (preemption.h): to reclaim a guarantee or a fair share from borrowers, or for a
//    strictly higher priority inside one queue; a fair-share reclaim may also take the queue's
//    own borrowed work of lower priority (a node often holds some of each, and neither alone
//    frees it). Victims are whole jobs, each queue's lowest priority first (a victim above
//    another candidate of its queue could come straight back by preempting it), then fewest
//    victims, then least GPU-time lost, and only when the preemptor then fits within its
//    guarantee or cap. A job started in the same Schedule call is no victim until the next;
//    nor, in one call of each wait of the preemptor (the first that meets one), is a job of the
//    started job's queue above it by raw and aged priority (it would come straight back over
//    the started job; only started jobs that could be victims themselves count). Guarantees and
//    fair shares are GPUs: a job reclaims them only at a size that asks for GPUs (one that asks for
//    none makes no reclaim; a reservation may still move work aside for it).
//
// Contract, over time (what holds cycle after cycle; tests/core/scheduler_dynamics_test.cc):
//  - No thrash. A preemptor's planned placement (its victims' GPUs and the free GPUs of its
//    plan) is reserved for it until it starts or goes away; nobody else is placed there, and
//    the guarantee cells the plan binds stay unbound for it (its queue's other work binds no
//    cell in their stead), so it starts as soon as its last victim stops. Should its queue's
//    guarantee be bound elsewhere by then all the same, it starts on its plan borrowed where
//    its cap and the allocator's borrowing rules allow (its share band is not applied), rather
//    than leave its victims stopped for nothing. Victims are chosen only for a preemptor that
//    then fits.
//  - Shares settle. Guarantee and fair-share checks count *committed* usage: running jobs that
//    are not stopping, plus preemptors waiting for their victims. A queue reclaims its fair
//    share only while it stays within that share after the start; a queue is reclaimed from
//    only while it holds more than (1 + reclaim_hysteresis) x its share, and a reclaim must cut
//    the total shortfall below the shares (sum of max(0, share - committed)) by at least half
//    the GPUs the job gets: a victim's queue may end a little below its share when its excess
//    is in jobs too big to give whole, but each reclaim moves the cluster toward the water-fill
//    by a fixed amount, so with steady demand preemptions stop and usage stays at the weighted
//    max-min shares (up to one job's size). The reclaiming queue never passes its share, so
//    the queue it took from cannot take back.
//    The exception: a queue whose own small jobs fragment its guarantee cells can leave GPUs
//    there that only it may use and that its bigger jobs cannot.
//  - Nothing starves. A pending job that has waited reserve_after_s and fits the empty cluster
//    (within its cap) gets a reservation: the GPUs of a placement chosen like a preemption's
//    (fewest, cheapest occupants), up to max_reservations jobs at once, oldest first. Smaller
//    jobs backfill around it; as the occupants end, their GPUs stay free for it, so it starts
//    within reserve_after_s plus the longest run of the jobs on its reserved GPUs (plus the
//    wait for an earlier reservation when max_reservations are taken). Jobs of higher priority
//    of its own queue (aging included, compared every cycle) may still be placed on reserved
//    GPUs; the reservation stays whole and waits for them too. Guaranteed work may be placed
//    on a borrower's reserved GPUs: the reservation is then dropped and made anew, and the
//    bound counts again from then (a borrower's bound holds while guaranteed work keeps off
//    its GPUs). A borrower's is planned around guaranteed work (more would start where some
//    ended). Another queue's borrowing jobs never pass a reservation, whatever their
//    priority. A borrowing job whose queue has no cap room for it now reserves nothing (it
//    could not start there): in a queue kept at its cap by its own small jobs, a big job waits
//    for cap room, not for GPUs, and this bound does not cover it. Nor does it cover a
//    borrowing job while its reservation, the other borrowers' and the guarantees (as far as
//    work that could run inside them asks for them) would not fit the cluster together: it
//    reserves nothing then. Guaranteed work passes a borrower's reservation, so such a
//    reservation would be overrun again and again while keeping every other borrower off its
//    GPUs.
//    Under steady demand occupants never end: a reservation that has waited reserve_after_s
//    more moves them (MoveForReservations) when each fits elsewhere now and the job's queue
//    then stays within its guarantee or fair share band. Each occupant is preempted once in its
//    life, its destination is reserved for it until it starts again, and the job waits for them
//    as a preemptor does. Only the job's own queue's work and borrowed work are moved. When the
//    occupants cannot all move, the reservation goes to GPUs whose occupants can (moving, when
//    the plan needs it, a job off another node first to make room for one of them: a chain);
//    failing that, the job's reclaims (the rules above) may move its own queue's jobs aside
//    from the GPUs the borrowers give back. A moved job stays counted in its queue until it
//    starts again, exactly on its destination, as soon as it and every job stopping there have
//    stopped, before the job it was moved for (placed afresh, its guarantee could take it back
//    onto the plan's GPUs); a plan is made only where the job still fits once its movers are
//    back. A mover in a queue with model caps is placed afresh, judged by them.
//  - Guarantees first. Each cycle places jobs within their queue's guarantee (reclaiming for
//    them) before any job borrows, so nothing is started and then preempted in one cycle.
//    Priority preemption inside a queue compares the same whole points (aging included) that
//    order the queue; the gap between two jobs' points does not change as both age.
//  - Health: cordon, drain, a bad GPU or node, and every freed GPU wake pending jobs; jobs on
//    bad hardware or a drained node get an evict decision and go back to pending.
//  - A victim that has not stopped by its grace deadline gets a kill decision.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/fairness.h"
#include "core/job.h"
#include "core/job_shape.h"
#include "core/placement.h"
#include "core/preemption.h"
#include "core/queue_order.h"
#include "core/reservation.h"
#include "core/telemetry.h"

namespace berth {

struct QueueSpec {
  std::string name;
  double weight = 1;
  double cap_gpus = -1;                 // most GPU-equivalents the queue may hold; < 0: no cap
  std::vector<VcGuarantee> guarantees;  // each may carry a lending limit
  // Most GPU-equivalents the queue may hold of each listed GPU model (models not listed: only
  // cap_gpus). A job is placed only on models with room for all of it.
  std::map<std::string, double> model_caps = {};
};

enum class JobState { kPending, kRunning, kStopping, kDone };
const char* JobStateName(JobState state);

// How a job left the engine.
enum class JobEnd { kNone, kSucceeded, kFailed, kCancelled, kLost };
const char* JobEndName(JobEnd end);

struct JobRecord {
  int id = -1;
  JobSpec spec;
  int queue = -1;
  JobState state = JobState::kPending;
  JobEnd end = JobEnd::kNone;
  int exit_code = 0;
  std::string external_id;  // the adapter's name for it (container id, pod UID)
  int user = -1;            // index of spec.user among its queue's users
  int shape_class = -1;     // job_shape.h; -1: not remembered
  ShapeSize shape;
  double submit_time = 0;
  double pending_since = 0;  // submit, or the last return to pending
  double start_time = -1;
  double end_time = -1;
  double stop_deadline = -1;  // while stopping: when the victim is killed
  bool borrowed = false;      // placed above its queue's guarantee: preemptible by reclaim
  std::vector<int> allocations;
  std::vector<ReplicaPlacement> placements;
  int replicas = 0;            // replicas running (elastic jobs may run fewer than asked)
  double gpu_equivalents = 0;  // what it holds while running
  double next_try = 0;         // back-off after a retryable refusal or a failed start
  double backoff = 0;
  int preempted_by = -1;         // while stopping: the preemptor the victim is reserved for
  std::vector<int> waiting_for;  // a preemptor: victims still stopping
  bool preempting = false;       // a preemptor waiting for its victims
  // The call in which PreemptionPlans first passed over candidates above a job just started, for
  // this job: it does so in that call only, until the job next starts, so a queue that starts a
  // job every cycle holds nobody back for longer.
  double held_back_at = -1;
  // A waiting preemptor: its plan is inside the guarantee; a moved job: it is counted so.
  bool reserved_guaranteed = false;
  std::vector<ReplicaPlacement> planned;  // a waiting preemptor: where its plan places it
  // A moved job, from its move until it starts again: where it goes, counted as committed
  // (committed_gpus) meanwhile (StartMoved).
  std::vector<ReplicaPlacement> destination;
  std::vector<int> promised_cells;  // the guarantee cells that plan binds (Promise)
  double committed_gpus = 0;        // a waiting preemptor or moved job: GPUs counted committed
  int preemptions = 0;              // times this job was preempted or evicted
  bool moved = false;               // moved once off a starving job's reserved GPUs: never again
  uint64_t move_tried_at = UINT64_MAX;  // a starving job: the version its occupants were judged
  double shrunk_at = -1;                // an elastic job's last shrink: it does not regrow then
  // The scheduler's state version when the job last failed to fit; it is retried only after
  // capacity was freed, health changed, new victims appeared or a fair share grew, since nothing
  // else can help.
  uint64_t failed_at = UINT64_MAX;
  std::string reason;      // why it is still pending, or why it stopped
  std::string never_fits;  // set: no node of the cluster could ever hold it (WhyNoNodeFits)
  // While pending: its place in its queue's pending list (taken out at once, however long).
  std::list<JobRecord*>::iterator pending_at;
};

struct Decision {
  enum class Kind {
    kStart,    // run the job at `placements`
    kPreempt,  // stop the job within grace_period_s (for `preemptor`), then report Stopped
    kEvict,    // stop the job now (bad hardware, drain, an elastic shrink); report Stopped
    kKill,     // a victim passed its grace deadline: kill it, then report Stopped
    kGrow,     // an elastic job runs more replicas: start them at `placements`
    kShrink,   // an elastic job gives back the replicas at `placements`: stop them now
  };
  Kind kind = Kind::kStart;
  int job = -1;
  std::vector<ReplicaPlacement> placements;  // kStart, kGrow, kShrink: the replicas concerned
  std::vector<std::string> gpu_ids;          // their GPUs, "node/index", in placement order
  int preemptor = -1;         // kPreempt; the reason does not name it (an adapter has its own ids)
  double grace_period_s = 0;  // kPreempt: the victim's grace period
  std::string reason;
};
const char* DecisionKindName(Decision::Kind kind);

// One entry of the engine's ordered event stream: every decision and every state change, with
// its reason. Sequence numbers start at 1 and never repeat within an engine.
struct EngineEvent {
  uint64_t seq = 0;
  double time = 0;
  int job = -1;
  std::string kind;  // submitted, start, preempt, evict, kill, stopped, pending, succeeded, ...
  std::string reason;
};

struct QueueStatus {
  std::string name;
  double weight = 1;
  double guarantee_gpus = 0;
  double fair_share_gpus = 0;
  double usage_gpus = 0;      // held: running and stopping jobs
  double committed_gpus = 0;  // running jobs not stopping, plus waiting preemptors
  double borrowed_gpus = 0;
  double pending_gpus = 0;
  int running = 0, pending = 0;
};

// One node's answer to a dry run.
struct NodeVerdict {
  int node = -1;
  bool feasible = false;
  double score = 0;  // the pipeline's weighted score of its (last replica's) placement there
  std::vector<ReplicaPlacement> placements;
  std::string reason;  // when infeasible
};

// Why the engine refuses to queue `spec` in `queue`: no replicas, a bad share or minReplicas,
// an unknown priority class, or more than the queue's cap even at its smallest size; "" when
// it would queue it. Submit refuses the same (and an unknown queue before that), so that an
// adapter can answer a client before handing the job to the engine.
std::string WhyRefused(const Cluster& cluster, const Policy& policy, const QueueSpec& queue,
                       const JobSpec& spec);

class Scheduler {
 public:
  Scheduler(const Cluster* cluster, const std::vector<QueueSpec>& queues, const Policy& policy);
  const std::string& error() const { return error_; }

  // Replaces the policy if it is valid as a whole; else returns its errors and keeps the old.
  std::vector<std::string> SetPolicy(const Policy& policy);
  // Replaces the queues (weights, caps, guarantees; new queues may be added) if every queue
  // with jobs stays and every running job still holds its GPUs as it does (inside its queue's
  // guarantee or borrowing, as now) with every VC's guarantee safe; else returns why, naming
  // the queue, and changes nothing.
  std::string SetQueues(const std::vector<QueueSpec>& queues);
  // Runtime node changes: replaces the cluster (nodes added, removed, relabeled), keeping the
  // queues. Nodes are matched by name; cordons, bad GPUs, telemetry and reservations follow
  // them. Jobs running on a node that is gone, or on GPUs it no longer has, are lost: they go
  // back to pending (event "lost"). Refused whole, with why, when the cluster is invalid or the
  // queues' guarantees no longer fit it. `cluster` must outlive the engine, or the next call.
  std::string SetCluster(const Cluster* cluster, double now);
  const Cluster& cluster() const { return *cluster_; }
  const Policy& policy() const { return pipeline_->policy(); }

  // Queues a job; returns its id, or -1 with `why` (unknown queue, nothing asked, ...).
  int Submit(const JobSpec& spec, double now, std::string* why);
  // The job ended (succeeded, failed, cancelled, lost); frees what it holds. A pending job can
  // end too (cancelled). Its record stays readable until it falls out of the last
  // kKeptFinished ended jobs.
  void Finish(int job, double now, JobEnd end = JobEnd::kSucceeded, int exit_code = 0);
  // A running job told to stop for good (a user's stop): it stops (no victim, no decision)
  // but keeps what it holds until the adapter says its containers are gone (Finish), so that
  // nothing starts on its GPUs while it still runs there. A victim being stopped (preempted,
  // evicted) is stopped for good the same way: it is not killed at its grace deadline, and
  // does not go back to pending.
  void Stopping(int job, double now, const std::string& why);
  // A job told to stop (preempt, evict, kill) has stopped: it goes back to pending, and a
  // preemptor whose victims have all stopped is placed at once, after the jobs moved for it
  // that can start again on their destinations (the stopped job itself among them). Returns
  // the start decisions.
  std::vector<Decision> Stopped(int job, double now);
  // The adapter could not start a job it was told to start (image pull failed, ...): it goes
  // back to pending with back-off, and what it held is freed.
  void StartFailed(int job, double now, const std::string& reason);
  // A running job's node was lost: it goes back to pending without back-off (nothing it did
  // failed), and what it held is freed.
  void NodeLost(int job, double now, const std::string& reason);
  // One scheduling cycle.
  std::vector<Decision> Schedule(double now);

  // Health through the engine: each wakes pending jobs; jobs on hardware that went bad, or on
  // a drained node, get evict decisions.
  std::vector<Decision> SetNodeCordoned(int node, bool cordoned, double now);
  std::vector<Decision> Drain(int node, double now);  // cordon, and evict every job on it
  std::vector<Decision> SetGpuBad(int node, int gpu, bool bad, double now);
  std::vector<Decision> SetNodeBad(int node, bool bad, double now);  // every GPU of the node

  // Crash recovery: a job that is already running at exactly `placements` (as decided before),
  // counted as borrowed or not as before. Returns its id, or -1 with `why`.
  int Adopt(const JobSpec& spec, const std::vector<ReplicaPlacement>& placements, bool borrowed,
            double submit_time, double start_time, std::string* why);
  // Crash recovery, after Adopt or Submit: the job was moved once before (JobRecord::moved), so
  // it is never moved again.
  void RememberMoved(int job) { jobs_.at(job).moved = true; }
  // Dry run (the Kubernetes extender's filter/prioritize): the job's placement on each of
  // `nodes` alone, nothing committed. Reservations of other jobs are honoured.
  std::vector<NodeVerdict> Evaluate(const JobSpec& spec, const std::vector<int>& nodes);
  // Commits a pending job at `placements` (the extender's bind); false with `why` when they are
  // no longer free or the queue may not hold it.
  bool StartAt(int job, const std::vector<ReplicaPlacement>& placements, double now,
               std::string* why);

  void SetExternalId(int job, const std::string& external_id);
  const JobRecord* FindExternal(const std::string& external_id) const;

  void SetTelemetry(Telemetry telemetry) {
    telemetry_ = std::move(telemetry);
    crowding_known_ = false;
    ++version_;
  }
  // Changes the telemetry in place (one node's GPUs or images), without copying the rest: a
  // cluster's layers by node are large, and GPUs are reported every second.
  template <typename Change>
  void UpdateTelemetry(Change change) {
    change(telemetry_);
    crowding_known_ = false;
    ++version_;
  }
  void SetWorkloadModel(const std::vector<TypicalPod>& pods) {
    typical_pods_ = pods;
    ++typical_pods_version_;
  }

  const JobRecord* job(int id) const;
  const std::map<int, JobRecord>& jobs() const { return jobs_; }
  std::vector<QueueStatus> Queues() const;
  // Each guarantee of a queue: cells bound now and how many healthy hardware still backs.
  std::vector<Allocator::GuaranteeStatus> QueueCells(int queue) const {
    return allocator_->VcStatus(queue);
  }
  std::vector<int> pending(int queue) const;  // ids, in arrival order
  size_t pending_count(int queue) const { return queues_[queue].pending.size(); }
  const Allocator& allocator() const { return *allocator_; }
  const Reservations& reservations() const { return reservations_; }
  // The events after `seq` (0: all kept), oldest first. The engine keeps the last kKeptEvents.
  std::vector<EngineEvent> EventsSince(uint64_t seq) const;
  uint64_t last_event() const { return next_event_ - 1; }
  // "" when the per-queue accounting, the reservations and the allocator agree with the jobs.
  std::string CheckConsistency() const;

  static constexpr size_t kKeptFinished = 4096;
  static constexpr size_t kKeptEvents = 65536;
  // GPU-equivalents are sums of fractions (shares in milli-GPUs): compared with this slack.
  static constexpr double kEps = 1e-9;

 private:
  // ---- The cycle and a job's life (scheduler.cc)
  struct Queue {
    QueueSpec spec;
    double guarantee_gpus = 0;
    ResourceVector held;                          // running and stopping jobs
    std::map<std::string, double> held_by_model;  // GPU-equivalents held, by GPU model
    ResourceVector committed;  // running jobs not stopping, plus waiting preemptors
    double committed_guaranteed = 0;
    double waiting_gpus = 0;  // waiting preemptors' GPUs: held soon, so caps count them
    std::map<int, int> committed_by_priority;  // running jobs not stopping, by priority
    double borrowed_gpus = 0;
    double demand_gpus = 0;  // every job not ended, at full size
    std::map<std::string, int> user_index;
    std::vector<ResourceVector> user_usage;  // [user] committed
    int running = 0;
    std::list<JobRecord*>
        pending;              // longest waiting first; records live in jobs_ (nodes never move)
    double pending_gpus = 0;  // the full size of the pending jobs
    WaitingJobs waiting;      // the pending jobs a cycle may try, indexed for it
  };
  // Places replicas [first, replicas) of the job on `alloc` (only on `only_node` when >= 0),
  // appending to ids and placements (which hold the first ones), or leaves nothing new behind.
  bool TryPlace(JobRecord& job, bool guaranteed, int replicas, Allocator& alloc,
                std::vector<int>* ids, std::vector<ReplicaPlacement>* placements,
                const std::vector<ReplicaPlacement>* exact = nullptr, int only_node = -1,
                int first = 0);
  // most < 0: the job's full size.
  bool Start(JobRecord& job, bool guaranteed, double now, std::vector<Decision>* out,
             int most = -1);
  std::vector<std::string> GpuIds(const std::vector<ReplicaPlacement>& placements) const;
  void Run(JobRecord& job, bool guaranteed, int replicas, std::vector<int> ids,
           std::vector<ReplicaPlacement> placements, double now, std::vector<Decision>* out);
  bool TryJob(JobRecord& job, double priority, bool guarantee_pass, const std::vector<double>& fair,
              double now, std::vector<Decision>* out);
  void Release(JobRecord& job);
  void ToPending(JobRecord& job, double now, const std::string& why);
  void BackToPending(int id, double now, const std::string& reason, bool back_off);
  // Not tried again before its back-off (doubled each time, up to the policy's most) ends.
  void BackOff(JobRecord& job, double now) const;
  // Priority plus aging, in whole points (aging reorders by points, not by seconds).
  double WholePriority(const JobRecord& job, double now) const;
  double WholePriority(int priority, double submit, double now) const;
  void Emit(double now, int job, const std::string& kind, const std::string& reason = "");
  void Forget(int job);

  // ---- What each queue holds and commits, and the checks on it (scheduler_accounting.cc)
  void CountGuarantees();
  void CountCapacity();
  double JobGpus(const JobSpec& spec, int replicas) const;
  ResourceVector JobResources(const JobRecord& job) const;
  // The job's GPU-equivalents by the model of the GPUs each replica holds.
  std::map<std::string, double> ModelGpus(const JobRecord& job) const;
  std::map<std::string, double> ModelGpus(const JobSpec& spec,
                                          const std::vector<ReplicaPlacement>& placements) const;
  // The models the job may still use under its queue's model caps at `gpus` more; `capped`
  // names the models at their cap. False when none is left.
  bool ModelsUnderCap(const JobRecord& job, double gpus, const Demand& demand,
                      std::vector<std::string>* models, std::string* capped) const;
  bool MayGuarantee(const JobRecord& job, double need) const;
  bool MayGuarantee(int queue, int priority, double need) const;
  bool UnderCap(const JobRecord& job, double need, std::string* why) const;
  void Account(const JobRecord& job, int sign);  // held and committed, while running
  void Uncommit(const JobRecord& job);           // a running job was told to stop
  static void CountPriority(Queue& q, int priority, int sign);
  void CommitWaiting(JobRecord& preemptor, double gpus, bool guaranteed,
                     const std::vector<int>& binds);
  void UncommitWaiting(JobRecord& preemptor);
  std::vector<double> FairShares() const;
  // The GPUs fair shares divide: all but the idle ones no job may take (bad, or on a cordoned
  // node). A held one counts, as its holder's usage does, wherever it is.
  double SharedGpus() const;

  // ---- Pending lists, and what a deep queue's cycle knows will fail (scheduler_pending.cc)
  bool TurnComesToNothing(JobRecord& job, double priority, bool guarantee_pass, double now);
  // Pending lists: every pending job is listed, and indexed unless it never fits.
  static WaitingJobs::Job WaitingOf(JobRecord& job);
  static WaitingJobs::Job WaitingOf(const JobRecord& job);  // no record: not for the index
  void AddPending(JobRecord& job);
  void RemovePending(JobRecord& job);
  // Whether a job of class `cls`, `size`, raw `priority` and `submit` is known to fail in this
  // pass (queue_order.h), and which jobs of an exhausted queue are tried anyway: reservation
  // holders, and the first of each shape that is due one.
  bool KnownToFail(int cls, const ShapeSize& size, int priority, double submit, bool guarantee_pass,
                   double now) const;
  std::vector<WaitingJobs::Job> StillWorthTrying(int queue, double now) const;
  // KnownToFail, or else failing by bounds alone, which is then known (as a tried job's failure
  // would be: job_shape.h): a class of one task group of whole GPUs whose shape no free GPUs
  // could hold (guaranteed or borrowing) and for which no victim can exist. So a queue whose
  // waiting shapes all fail ends its walk at its first failure instead of walking to a job of
  // its smallest shape.
  bool ShapeFails(int queue, int cls, const ShapeSize& size, int priority, double submit,
                  bool guarantee_pass, const std::vector<double>& fair, double now);

  // ---- Elastic jobs (scheduler_elastic.cc)
  // Elastic jobs: the largest replica count in [least, most] that `fits` (most first, then
  // least, then bisecting), or -1; and the most replicas the queue's cap leaves room for.
  static int LargestFitting(int least, int most, const std::function<bool(int)>& fits);
  int MostUnderCap(const JobRecord& job) const;
  // A borrowing elastic job's most replicas: while another queue under its fair share has
  // work waiting out a back-off (OthersWaitOutABackOff), those (at least its minimum) that keep
  // its queue within (1 + reclaim_hysteresis) x its fair share, else its full size.
  int MostInShareBand(const JobRecord& job, const std::vector<double>& fair, double now) const;
  bool OthersWaitOutABackOff(int queue, const std::vector<double>& fair, double now) const;
  // A running elastic job to `replicas`: grown where more fit, or shrunk keeping its first
  // replicas where they are. False when nothing changed.
  bool Resize(JobRecord& job, int replicas, double now, std::vector<Decision>* out);
  void GrowElastic(const std::vector<double>& fair, double now, std::vector<Decision>* out);

  // ---- Preemption (scheduler_preemption.cc)
  void WakePreemptor(JobRecord& victim);  // a victim left: its preemptor stops waiting for it
  // Why TryPreempt might find victims for a job of `queue` at raw `priority` needing `need`
  // GPUs inside its guarantee (`share_need` toward its fair share: the sizes an elastic job
  // reclaims at); none: no victim can exist.
  // `reclaim_may_fit`: whether the job may fit its guarantee once every borrower has left
  // (ReplicaBound::MayFitReclaiming), asked only where borrowers and guarantee room exist.
  struct PreemptionRoom {
    bool within_guarantee = false;  // reclaim the guarantee from borrowers
    bool below_fair_share = false;  // reclaim toward the fair share from queues above theirs
    bool lower_exists = false;      // lower priority runs in the queue
    bool any() const { return within_guarantee || below_fair_share || lower_exists; }
  };
  PreemptionRoom RoomToPreempt(int queue, int priority, double need, double share_need,
                               bool guarantee_only, const std::vector<double>& fair,
                               const std::function<bool()>& reclaim_may_fit) const;
  // guarantee_only: reclaim for the guarantee, nothing else. Tries each plan in turn; true when
  // the job started or waits for its victims.
  bool TryPreempt(JobRecord& job, double now, const std::vector<double>& fair, bool guarantee_only,
                  std::vector<Decision>* out);
  // The replicas a job is placed at when it reclaims its guarantee, toward its fair share, or
  // for priority (an elastic job's may be fewer than its full size, down to its minimum).
  struct PreemptionSizes {
    int guarantee, share, full;
  };
  // One way to make room for a job: the jobs it may take, why, and where it then runs.
  struct PreemptionPlan {
    enum class Why { kGuarantee, kFairShare, kPriority };
    std::vector<JobRecord*> victims;
    bool guaranteed;  // placed inside its queue's guarantee
    Why why;
    int replicas;                         // the size the job is placed at
    std::vector<JobRecord*> movers = {};  // of `victims`, its own queue's, restarted elsewhere
  };
  // The plans worth trying, in order: reclaims, priority, reclaims that also take the queue's
  // own borrowed lower-priority work, then (for a starving job) reclaims that move its queue's
  // jobs aside. Candidates it passes over (just started, or above one) set preempt_deferred_,
  // and the latter the job's held_back_at.
  std::vector<PreemptionPlan> PreemptionPlans(JobRecord& job, const PreemptionRoom& room,
                                              const PreemptionSizes& sizes,
                                              const std::vector<double>& fair, bool guarantee_only,
                                              double now);
  // Whether the queue may hold the job once `taken` GPUs (by queue) are given back, as Schedule
  // asks of a start, and a fair-share reclaim moves the cluster toward the water-fill. `own`:
  // the job's own queue's part of `taken`, `own_guaranteed` of it guaranteed.
  bool PlanAllowed(const JobRecord& job, const PreemptionPlan& plan,
                   const std::vector<double>& fair, const std::map<int, double>& taken, double own,
                   double own_guaranteed) const;
  // Elastic victims shrink if that is enough (the job starts now), else the fewest, cheapest
  // whole victims are found; false when the plan finds none.
  bool TryPreemptionPlan(JobRecord& job, const PreemptionPlan& plan,
                         const std::vector<double>& fair, double now, std::vector<Decision>* out);
  // Tells the plan's victims to stop (its movers to restart at `destinations`), and holds the
  // placement and the guarantee cells it binds for the job until they have.
  void WaitForVictims(JobRecord& job, const PreemptionPlan& plan, const VictimPlan& found,
                      const std::vector<std::vector<ReplicaPlacement>>& destinations, double now,
                      std::vector<Decision>* out);
  // The whole job on a what-if allocator, with the guarantee cells it binds. `freed`: the GPUs
  // by model that the job's own queue gave back on the trial, which no longer count toward its
  // model caps.
  bool TryPlaceOn(JobRecord& job, bool guaranteed, int replicas, Allocator& trial,
                  const std::map<std::string, double>& freed, TrialPlacement* placement);
  // What jobs of `queue` among `gone`, or shrinking as `shrinks` say, give back, by model.
  std::map<std::string, double> FreedByModel(int queue, const std::vector<JobRecord*>& gone) const;
  std::map<std::string, double> FreedByModel(int queue, const std::vector<Shrink>& shrinks) const;
  static std::vector<std::pair<int, int>> ReservedGpus(const TrialPlacement& placement);
  const JobRecord* CellBeingReclaimed(int queue) const;
  void TellToStop(JobRecord& job, Decision::Kind kind, int preemptor, const std::string& why,
                  double now, std::vector<Decision>* out);
  void DropPreemptor(JobRecord& preemptor);
  bool StartPreemptor(JobRecord& preemptor, double now, std::vector<Decision>* out);
  // Starts `replicas` of the job exactly on `where`, held by its reservation; false, doing
  // nothing, when the reservation is gone, a GPU of it was observed crowded since, its queue has
  // model caps, or it no longer fits there.
  bool StartOn(JobRecord& job, bool guaranteed, int replicas,
               const std::vector<ReplicaPlacement>& where, double now, std::vector<Decision>* out);

  // ---- Reservations and moves (scheduler_reservations.cc)
  void TryReserve(JobRecord& job, double now);
  // GPUs a borrowing job may still reserve: the shared GPUs less each queue's guarantee as
  // far as its guaranteed work, and pending work (the job aside) that could run inside it, ask
  // for it, and less what borrowers' reservations of starving jobs already hold.
  double BorrowerReservationRoom(const JobRecord& job) const;
  // The job of `queue` that has waited longest, holds no reservation and may reserve now (not
  // backing off nor waiting for victims): reservations go oldest first.
  const JobRecord* LongestWaitingUnreserved(int queue) const;
  // Starving jobs whose reservations have waited reserve_after_s for their occupants: the
  // occupants are moved (preempted, their destinations held for them) when each fits elsewhere
  // now, and the job waits for them as a preemptor does. A reservation whose occupants cannot
  // all move (another queue's guaranteed work, or nowhere for them to go) is planned anew on
  // GPUs whose occupants can, when there are such GPUs.
  void MoveForReservations(const std::vector<double>& fair, double now, std::vector<Decision>* out);
  // Whether the job's queue may hold it once started (moves are made only for such a job).
  bool MayMoveFor(const JobRecord& job, const std::vector<double>& fair) const;
  // Whether `o` may be moved for `job`: running, preemptible, not moved before, not started in
  // this cycle, and the job's own queue's or borrowed.
  static bool Movable(const JobRecord& o, const JobRecord& job, double now);
  // Moves the occupants of `reserved_gpus` (the job's reservation) off them, and the jobs in
  // `also` (a chain: one moved elsewhere to make room for an occupant); false, doing nothing,
  // when one of them cannot move or has nowhere to go. True also when none is there.
  bool TryMoveFor(JobRecord& job, const std::vector<std::pair<int, int>>& reserved_gpus, double now,
                  std::vector<Decision>* out, const std::vector<JobRecord*>& also = {});
  // Moves the occupants of a placement whose occupants all fit elsewhere now, and reserves it
  // for the job (`held`: the reservation it had, set aside); false, doing nothing, if none.
  bool MoveOnOtherGpus(JobRecord& job, const Reservations::Reservation& held, double now,
                       std::vector<Decision>* out);
  // A placement for the job whose occupants all fit elsewhere now, fewest first, with the jobs
  // to move (occupants, and any whose GPUs an occupant needs); nullopt if none.
  std::optional<VictimPlan> PlanAmongMovable(JobRecord& job, double now);
  // Places `o` on `trial` where its move would take it: its guarantee first, then borrowing,
  // and no lent GPUs (their owner would take them back).
  bool PlaceMoved(JobRecord& o, Allocator& trial, std::vector<ReplicaPlacement>* placed);
  // While set, TryPreempt's reclaims may also move the job's own queue's jobs aside.
  bool reclaim_with_moves_ = false;
  // Tells `o` to stop for `for_job`, to start again on `destination`, which is held for it.
  void MoveAway(JobRecord& o, int for_job, const std::vector<ReplicaPlacement>& destination,
                const std::string& why, double now, std::vector<Decision>* out);
  // A moved job that has stopped starts again on its destination (the plan it was moved for
  // was checked with it there), inside its guarantee if it was counted so, else borrowing.
  // False while a stopping job still sits on its destination (it waits, still counted), or
  // when it no longer fits there (hardware changed) or its queue has model caps: its
  // reservation and count go, and it waits as any job does.
  bool StartMoved(JobRecord& o, double now, std::vector<Decision>* out);
  // StartMoved for every moved job that has stopped. Moved jobs go back before the job they
  // were moved for, as FitsAfterMovers checked it (its exact placement assumes them back).
  void StartStoppedMovers(double now, std::vector<Decision>* out);
  // Whether `replicas` of the job still fit exactly on `where` once `gone` have left and
  // `movers` (some of them) are back at `destinations`: they start again before it does, and
  // the trial that found `where` placed the job first (a borrowed share is never placed in a
  // cell its own queue's guaranteed work binds by then).
  bool FitsAfterMovers(JobRecord& job, bool guaranteed, int replicas,
                       const std::vector<ReplicaPlacement>& where,
                       const std::vector<JobRecord*>& gone, const std::vector<JobRecord*>& movers,
                       const std::vector<std::vector<ReplicaPlacement>>& destinations);
  // Reservations change through these, which keep the allocator's reserved nodes
  // (Allocator::SetNodeReserved) in step with them.
  void Reserve(int job, const std::vector<std::pair<int, int>>& gpus,
               const Reservations::Reservation& kind);
  void DropReservation(int job);
  // A moved job whose destination is no longer held: a pending one waits as any job does (its
  // count goes), a stopping one goes back to pending uncounted (Stopped).
  void DestinationGone(JobRecord& job);
  // Guaranteed `job` placed at `placements` ends the yielding reservations it passed
  // (reservation.h) and took GPUs of, saying so: a preemptor's victims stopped for nothing, and
  // it waits like any other job; a starving job reserves anew.
  void DisplaceYieldingPlans(const JobRecord& job, const std::vector<ReplicaPlacement>& placements,
                             double now);
  void MarkReservedNodes();

  // ---- Changes from outside: cluster, queues, health (scheduler_changes.cc)
  // A fresh allocator with every running job placed again where it runs (SetQueues,
  // SetCluster).
  struct Rebuilt {
    std::unique_ptr<Allocator> allocator;
    std::map<int, std::vector<int>> allocations;              // [job] ids there
    std::map<int, std::vector<ReplicaPlacement>> placements;  // [job] on the new nodes
    std::vector<int> lost;  // running jobs that could not be placed again
  };
  // `node_map`: old node index -> new (-1: gone). keep_all: a job that cannot be placed again
  // refuses the rebuild, else it is lost.
  std::string Rebuild(const Cluster* cluster, const std::vector<QueueSpec>& specs,
                      const std::map<std::string, int>& index, const std::vector<int>& node_map,
                      bool keep_all, Rebuilt* out);
  void Install(Rebuilt& rebuilt, const std::vector<int>& node_map);
  void EvictFrom(int node, int gpu, const std::string& why, double now, std::vector<Decision>* out);
  void HealthChanged(int node);

  // ---- State
  const Cluster* cluster_;
  std::string error_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<PlacementPipeline> pipeline_;
  std::vector<Queue> queues_;
  std::map<std::string, int> queue_index_;
  std::map<int, JobRecord> jobs_;
  // The pending ones by id: a deep cycle looks up thousands, which jobs_ answers in tens of
  // cache misses each.
  std::unordered_map<int, JobRecord*> pending_by_id_;
  std::map<std::string, int> by_external_;
  std::deque<int> finished_;  // ended jobs still kept, oldest first
  Reservations reservations_;
  Telemetry telemetry_;
  // Whether the allocator's crowded GPUs (Allocator::SetGpuCrowded) follow telemetry_, as the
  // policy's gpu-memory-threshold filter judges a GPU alone (-1: the policy has none).
  bool crowding_known_ = false;
  double crowded_ratio_ = -1;
  void MarkCrowdedGpus();
  std::vector<TypicalPod> typical_pods_;
  uint64_t typical_pods_version_ = 0;  // PlacementContext::typical_pods_version
  ResourceVector capacity_;
  int next_job_ = 1;
  std::map<int, JobRecord*> running_;  // running and stopping jobs (preemption candidates)
  std::vector<std::map<int, JobRecord*>> running_by_queue_;  // the same, [queue]
  std::set<int> elastic_running_;               // those of them with minReplicas (GrowElastic)
  std::set<std::pair<double, int>> deadlines_;  // (stop deadline, victim) not yet killed
  std::vector<int> ready_preemptors_;           // preemptors whose last victim ended (not stopped)
  std::map<std::string, int> shape_classes_;
  std::vector<bool> class_bounded_;  // [shape class] one task group of whole GPUs (ShapeFails)
  FailedShapes failed_shapes_;       // this cycle's
  FailedShapes not_guaranteed_;   // this guarantee pass's: neither placed nor reclaimed inside it
  FailedShapes unreservable_[2];  // this cycle's: no reservation plan, [guaranteed]
  std::vector<std::map<int, double>> gpus_by_priority_;  // [node] priority -> GPU-equivalents
  std::vector<double> last_fair_;  // [queue] the fair shares of the last cycle
  uint64_t version_ = 0;  // bumped when capacity is freed, health changes, a borrower starts or a
                          // fair share grows
  std::deque<EngineEvent> events_;
  uint64_t next_event_ = 1;
  double now_ = 0;                         // the clock of the latest call that passed one
  mutable std::vector<bool> backing_off_;  // [queue] has pending work in back-off, this cycle
  bool planning_reservation_ = false;      // TryReserve's trials: every reservation blocks
  bool placing_plan_ = false;  // TryPlaceOn's trials: a plan that waits borrows no lent GPUs
  std::map<std::string, double> model_credit_;  // TryPlaceOn's `freed`, while it places
  // TryPreempt passed over a job started in this call, or one above it: tried again later.
  bool preempt_deferred_ = false;
};

}  // namespace berth
