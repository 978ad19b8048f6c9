// The scheduling engine: queues of jobs, fair shares, elastic borrowing, preemption and the
// plugin pipeline, over the allocator. Pure: the clock is passed in, telemetry is fed in, and
// decisions come out for adapters (simulator, server, Kubernetes extender) to carry out.
//
// Contract:
//  - A queue is a virtual cluster: its guarantee is the VC's cells. Jobs of priority >= 0 run
//    inside the guarantee when they fit; above it a queue borrows idle capacity (up to its cap)
//    and the borrowed jobs are preemptible. Priority < 0 jobs always borrow.
//  - Gangs are all-or-nothing. Elastic jobs start with min_replicas when all do not fit.
//  - Order: the queue with the smallest weighted dominant share goes next; inside a queue,
//    priority (plus aging), then the user with the smallest share, then submit time. A job that
//    cannot be placed does not block the jobs behind it (backfill).
//  - Preemption: to reclaim a guarantee (or a fair share, with hysteresis) from borrowers, or
//    for a strictly higher priority inside one queue. Victims are whole jobs, chosen for fewest
//    victims, then least GPU-time lost, then lowest priority, and only when the preemptor then
//    fits, within its guarantee or cap. Victims stay reserved for their preemptor, and the cells
//    of those that have stopped are held for it, until the last has stopped; then the preemptor
//    is placed at once, before anyone else. Preempted jobs go back to pending.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/fairness.h"
#include "core/job.h"
#include "core/placement.h"
#include "core/telemetry.h"

namespace berth {

struct QueueSpec {
  std::string name;
  double weight = 1;
  double cap_gpus = -1;  // most GPU-equivalents the queue may hold; < 0: no cap
  std::vector<VcGuarantee> guarantees;
};

enum class JobState { kPending, kRunning, kStopping, kDone };
const char* JobStateName(JobState state);

struct JobRecord {
  int id = -1;
  JobSpec spec;
  int queue = -1;
  JobState state = JobState::kPending;
  double submit_time = 0;
  double start_time = -1;
  double end_time = -1;
  bool borrowed = false;  // placed above its queue's guarantee: preemptible by reclaim
  std::vector<int> allocations;
  std::vector<ReplicaPlacement> placements;
  int replicas = 0;            // replicas running (elastic jobs may run fewer than asked)
  double gpu_equivalents = 0;  // what it holds while running
  double next_try = 0;         // back-off after a retryable refusal
  double backoff = 0;
  int preempted_by = -1;         // while stopping: the preemptor the victim is reserved for
  std::vector<int> waiting_for;  // a preemptor: victims still stopping
  std::vector<int> held;  // a preemptor: allocations of its stopped victims, kept until it starts
  bool reserved_guaranteed = false;
  int preemptions = 0;  // times this job was preempted
  // The scheduler's state version when the job last failed to fit; it is retried only after
  // capacity was freed (or new victims appeared), since nothing else can make it fit.
  uint64_t failed_at = UINT64_MAX;
  std::string reason;  // why it is still pending
};

struct Decision {
  enum class Kind { kStart, kPreempt };
  Kind kind = Kind::kStart;
  int job = -1;
  std::vector<ReplicaPlacement> placements;  // kStart
  int preemptor = -1;                        // kPreempt
  double grace_period_s = 0;                 // kPreempt: the victim's grace period
};

struct QueueStatus {
  std::string name;
  double weight = 1;
  double guarantee_gpus = 0;
  double fair_share_gpus = 0;
  double usage_gpus = 0;
  double borrowed_gpus = 0;
  double pending_gpus = 0;
  int running = 0, pending = 0;
};

class Scheduler {
 public:
  Scheduler(const Cluster* cluster, const std::vector<QueueSpec>& queues, const Policy& policy);
  const std::string& error() const { return error_; }

  // Replaces the policy if it is valid as a whole; else returns its errors and keeps the old.
  std::vector<std::string> SetPolicy(const Policy& policy);
  const Policy& policy() const { return pipeline_->policy(); }

  // Queues a job; returns its id, or -1 with `why` (unknown queue, nothing asked, ...).
  int Submit(const JobSpec& spec, double now, std::string* why);
  // The job ended (completed, failed or cancelled); frees what it holds.
  void Finish(int job, double now);
  // A victim told to stop has stopped: it goes back to pending, and a preemptor whose victims
  // have all stopped is placed at once. Returns the resulting start decisions.
  std::vector<Decision> Stopped(int job, double now);
  // One scheduling cycle.
  std::vector<Decision> Schedule(double now);

  void SetTelemetry(const Telemetry& telemetry) {
    telemetry_ = telemetry;
    ++version_;
  }
  void SetWorkloadModel(const std::vector<TypicalPod>& pods) { typical_pods_ = pods; }

  const JobRecord* job(int id) const;
  const std::map<int, JobRecord>& jobs() const { return jobs_; }
  std::vector<QueueStatus> Queues() const;
  // Each guarantee of a queue: cells bound now and how many healthy hardware still backs.
  std::vector<Allocator::GuaranteeStatus> QueueCells(int queue) const {
    return allocator_->VcStatus(queue);
  }
  const std::vector<int>& pending(int queue) const { return queues_[queue].pending; }
  const Allocator& allocator() const { return *allocator_; }
  Allocator& mutable_allocator() { return *allocator_; }

 private:
  struct Queue {
    QueueSpec spec;
    double guarantee_gpus = 0;
    ResourceVector usage;
    double borrowed_gpus = 0;
    double guaranteed_gpus = 0;  // usage inside the guarantee
    std::map<std::string, double> user_usage;
    int running = 0;
    std::vector<int> pending;
  };

  double JobGpus(const JobSpec& spec, int replicas) const;
  ResourceVector JobResources(const JobRecord& job) const;
  // Places every group on `alloc`; fills ids and placements, or leaves nothing behind.
  bool TryPlace(JobRecord& job, bool guaranteed, int replicas, Allocator& alloc,
                std::vector<int>* ids, std::vector<ReplicaPlacement>* placements);
  bool Start(JobRecord& job, bool guaranteed, double now, std::vector<Decision>* out);
  bool TryPreempt(JobRecord& job, double now, const std::vector<double>& fair,
                  std::vector<Decision>* out);
  void Account(const JobRecord& job, int sign);
  void Release(JobRecord& job);
  JobRecord* HandOver(JobRecord& victim);
  void ReleaseHeld(JobRecord& job);
  bool StartPreemptor(JobRecord& preemptor, double now, std::vector<Decision>* out);
  std::vector<double> FairShares() const;
  double EffectivePriority(const JobRecord& job, double now) const;

  const Cluster* cluster_;
  std::string error_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<PlacementPipeline> pipeline_;
  std::vector<Queue> queues_;
  std::map<std::string, int> queue_index_;
  std::map<int, JobRecord> jobs_;
  Telemetry telemetry_;
  std::vector<TypicalPod> typical_pods_;
  ResourceVector capacity_;
  int next_job_ = 1;
  std::map<int, JobRecord*> running_;  // running and stopping jobs (preemption candidates)
  std::vector<std::map<int, double>> gpus_by_priority_;  // [node] priority -> GPU-equivalents
  uint64_t version_ = 0;  // bumped whenever capacity is freed or a borrower starts
};

}  // namespace berth
