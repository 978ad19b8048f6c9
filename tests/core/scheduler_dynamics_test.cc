// The engine's contract over time (scheduler.h), checked by driving it as an adapter does: a
// virtual clock, random submits, ends, cancellations, cordons, drains, bad GPUs and telemetry;
// every decision carried out (a preempted job stops within its grace period, or never, so that
// the kill at the deadline is exercised). Every engine call is followed by the per-call checks,
// computed here from the job records and the test's own model of the hardware, not from the
// engine's accounting; phases of steady demand then check that shares settle at a water-fill
// written here, that nothing thrashes and that nothing starves.
//
// Each test runs BERTH_DYNAMICS_SEEDS seeds (default 3) from BERTH_DYNAMICS_FIRST_SEED (default
// 1); more seeds make a benchmark of the engine's dynamics, and a failure names its seed, step
// and call so that one seed can be replayed alone:
//   BERTH_DYNAMICS_SEEDS=200 build/berth_unit_tests --gtest_filter='SchedulerDynamics*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/scheduler.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

constexpr char kNodeCell[] = "dgx-a100/node";
constexpr int kGpusPerNode = 8;
constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-6;
constexpr int kMaxStopsPerJob = 3;  // "no thrash": times one job may be stopped in a steady phase

std::vector<uint64_t> Seeds() {
  auto env = [](const char* name, int fallback) {
    const char* value = std::getenv(name);
    const int n = value == nullptr ? 0 : std::atoi(value);
    return n > 0 ? n : fallback;
  };
  const int count = env("BERTH_DYNAMICS_SEEDS", 3);
  const int first = env("BERTH_DYNAMICS_FIRST_SEED", 1);
  std::vector<uint64_t> seeds;
  for (int i = 0; i < count; ++i) seeds.push_back(static_cast<uint64_t>(first + i));
  return seeds;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen_);
  }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  bool Chance(double p) { return Uniform(0, 1) < p; }
  template <typename T>
  T Pick(const std::vector<T>& from) {
    return from[static_cast<size_t>(Int(0, static_cast<int>(from.size()) - 1))];
  }
  std::mt19937_64& gen() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

// GPU-equivalents, counted here rather than asked of the engine: whole GPUs, or milli / 1000.
double ReplicaGpus(const Demand& d) { return d.gpu_milli > 0 ? d.gpu_milli / 1000.0 : d.gpus; }
double FullGpus(const JobSpec& spec) {
  double gpus = 0;
  for (const TaskGroup& g : spec.groups) gpus += g.replicas * ReplicaGpus(g.demand);
  return gpus;
}
double HeldGpus(const JobRecord& job) {
  double gpus = 0;
  for (const ReplicaPlacement& r : job.placements)
    gpus += r.gpu_milli > 0 ? r.gpu_milli / 1000.0 : static_cast<double>(r.gpus.size());
  return gpus;
}
bool Holds(const JobRecord& job) {
  return job.state == JobState::kRunning || job.state == JobState::kStopping;
}
bool AsksShares(const JobSpec& spec) {
  for (const TaskGroup& g : spec.groups)
    if (g.demand.gpu_milli > 0) return true;
  return false;
}
double GuaranteeGpus(const QueueSpec& q) {
  double gpus = 0;
  for (const VcGuarantee& g : q.guarantees) gpus += g.count * kGpusPerNode;  // node cells only
  return gpus;
}

// Weighted max-min over GPUs with guarantees and caps, as scheduler.h and fairness.h state it:
// each queue first gets its guarantee (up to its demand and cap), then the rest of the capacity
// raises every queue by the same amount per unit of weight, none past its demand or cap. The
// rate is found by bisection (the engine pours round by round), so that a mistake shared with
// the engine's water-fill is unlikely. The test's guarantees never exceed the capacity.
std::vector<double> OracleShares(double capacity, const std::vector<QueueSpec>& queues,
                                 const std::vector<double>& demand) {
  const size_t n = queues.size();
  std::vector<double> base(n), limit(n);
  double limits = 0, min_weight = kNever;
  for (size_t q = 0; q < n; ++q) {
    const double cap = queues[q].cap_gpus < 0 ? kNever : queues[q].cap_gpus;
    limit[q] = std::min(demand[q], cap);
    base[q] = std::min(GuaranteeGpus(queues[q]), limit[q]);
    limits += limit[q];
    min_weight = std::min(min_weight, queues[q].weight);
  }
  if (limits <= capacity) return limit;
  auto at = [&](double rate, size_t q) {
    return std::min(limit[q], base[q] + rate * queues[q].weight);
  };
  double lo = 0, hi = capacity / min_weight;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    double poured = 0;
    for (size_t q = 0; q < n; ++q) poured += at(mid, q);
    (poured < capacity ? lo : hi) = mid;
  }
  std::vector<double> share(n);
  for (size_t q = 0; q < n; ++q) share[q] = at(hi, q);
  return share;
}

Policy BerthPolicy() {
  Policy p;
  EXPECT_TRUE(BuiltinPolicy("berth", &p));
  return p;
}

QueueSpec Queue(const std::string& name, int guaranteed_nodes, double weight, double cap) {
  QueueSpec q{name, weight, cap, {}};
  if (guaranteed_nodes > 0) q.guarantees.push_back({kNodeCell, guaranteed_nodes});
  return q;
}

// 2-4 queues: guarantees on at most half the nodes, weights 0.5-3, some capped (never below
// their guarantee or the largest job, so that every job fits its queue).
std::vector<QueueSpec> RandomQueues(Rng& rng, int nodes, double largest_job) {
  std::vector<QueueSpec> queues;
  int guarantees_left = nodes / 2;
  const int count = rng.Int(2, 4);
  for (int i = 0; i < count; ++i) {
    const int guaranteed = rng.Int(0, std::min(2, guarantees_left));
    guarantees_left -= guaranteed;
    double cap = -1;
    if (rng.Chance(0.4))
      cap = std::max(largest_job, guaranteed * double{kGpusPerNode}) + kGpusPerNode * rng.Int(0, 2);
    queues.push_back(
        Queue("q" + std::to_string(i), guaranteed, rng.Pick<double>({0.5, 1, 2, 3}), cap));
  }
  return queues;
}

TaskGroup Group(int replicas, int gpus, int milli = 0) {
  TaskGroup g;
  g.name = "main";
  g.replicas = replicas;
  g.demand.gpus = gpus;
  g.demand.gpu_milli = milli;
  if (milli > 0) g.demand.gpu_memory_mib = milli * 40;
  // CPU and memory in proportion, below a DGX's per-GPU slice, so that GPUs stay dominant.
  const double gpu = milli > 0 ? milli / 1000.0 : gpus;
  g.demand.cpu_milli = static_cast<int64_t>(8000 * gpu);
  g.demand.memory_mib = static_cast<int64_t>(65536 * gpu);
  return g;
}

// A random job of the mix: single GPUs, 2-8 GPU jobs, gangs of whole GPUs, shares of one GPU,
// elastic gangs; priorities 0, 5 and -1 (always borrows); some not preemptible. `steady` keeps
// to jobs of at most 8 GPUs, all preemptible: a non-preemptible borrower may hold its queue
// above its share for good, and "within one job's size" should mean something.
JobSpec RandomJob(Rng& rng, const std::vector<QueueSpec>& queues, double capacity, bool steady) {
  JobSpec spec;
  // Queues get work in proportion to what they may hold, so that a capped queue's backlog does
  // not grow without end.
  std::vector<double> room;
  for (const QueueSpec& q : queues) room.push_back(q.cap_gpus < 0 ? capacity : q.cap_gpus);
  spec.queue = queues[std::discrete_distribution<size_t>(room.begin(), room.end())(rng.gen())].name;
  spec.user = "u" + std::to_string(rng.Int(0, 3));
  const int kind = rng.Int(0, 99);
  if (kind < 35) {
    spec.groups = {Group(1, 1)};
  } else if (kind < 55) {
    spec.groups = {Group(1, rng.Pick<int>({2, 4}))};
  } else if (kind < 62) {
    spec.groups = {Group(1, 8)};
  } else if (kind < 74) {
    spec.groups = {steady ? rng.Chance(0.5) ? Group(2, 4) : Group(4, 2)
                          : rng.Pick<TaskGroup>({Group(2, 8), Group(2, 4), Group(4, 2)})};
  } else if (kind < 86) {
    spec.groups = {Group(1, 0, rng.Pick<int>({250, 500}))};
  } else {
    spec.groups = {rng.Chance(0.5) ? Group(4, 2) : Group(3, 1)};
    spec.min_replicas = rng.Int(1, spec.groups[0].replicas - 1);
  }
  const int p = rng.Int(0, 99);
  spec.priority = p < 70 ? 0 : p < 85 ? 5 : -1;
  spec.preemptible = steady || rng.Chance(0.9);
  spec.grace_period_s = rng.Pick<double>({0, 10, 30, 60});
  spec.name = spec.queue + "-" + spec.user;
  return spec;
}

// The engine, driven as an adapter drives it, with the per-call checks after every call. The
// first violation is kept (with seed, step and call); callers stop at it.
class Driver {
 public:
  // Adapter behaviour.
  double never_stop = 0.2;    // preempted jobs that ignore the preemption (killed at the deadline)
  double start_fails = 0.02;  // starts the adapter cannot carry out (StartFailed)

  Driver(uint64_t seed, int nodes, const std::vector<QueueSpec>& queues, const Policy& policy)
      : rng_(seed * 7919 + 1),
        seed_(seed),
        cluster_(SyntheticDgxCluster(nodes, 3, 0)),
        queues_(queues),
        max_reservations_(policy.max_reservations),
        aging_per_hour_(policy.aging_per_hour),
        aging_cap_(policy.aging_cap),
        cordoned_(static_cast<size_t>(nodes), 0),
        drained_(static_cast<size_t>(nodes), 0),
        bad_(static_cast<size_t>(nodes), std::vector<char>(kGpusPerNode, 0)) {
    s_ = std::make_unique<Scheduler>(&cluster_, queues, policy);
    if (!s_->error().empty()) Fail("engine error: " + s_->error());
  }

  bool ok() const { return failure_.empty(); }
  const std::string& failure() const { return failure_; }
  const Scheduler& s() const { return *s_; }
  const std::vector<QueueSpec>& queues() const { return queues_; }
  double now() const { return now_; }
  int nodes() const { return static_cast<int>(cluster_.nodes.size()); }
  double capacity() const { return nodes() * double{kGpusPerNode}; }

  // --- What the adapter is asked to do -------------------------------------------------------

  int Submit(const JobSpec& spec, double duration) {
    int id = -1;
    Call("Submit", [&] {
      std::string why;
      id = s_->Submit(spec, now_, &why);
      // A job bigger than its queue's cap is refused at the door, as it should be.
      if (id < 0 && why.rfind("cap: ", 0) == 0) return;
      if (id < 0) return Fail("submit refused: " + why);
      jobs_[id] = {spec, duration};
    });
    return id;
  }
  void Cancel(int id) {
    Call("Finish(cancelled)", [&] { End(id, now_, JobEnd::kCancelled); });
  }
  void Cordon(int node, bool cordoned) {
    Call("SetNodeCordoned", [&] {
      cordoned_[static_cast<size_t>(node)] = cordoned;
      if (!cordoned) drained_[static_cast<size_t>(node)] = 0;
      Apply(s_->SetNodeCordoned(node, cordoned, now_), now_);
    });
  }
  void Drain(int node) {
    Call("Drain", [&] {
      cordoned_[static_cast<size_t>(node)] = drained_[static_cast<size_t>(node)] = 1;
      Apply(s_->Drain(node, now_), now_);
    });
  }
  void GpuBad(int node, int gpu, bool bad) {
    Call("SetGpuBad", [&] {
      bad_[static_cast<size_t>(node)][static_cast<size_t>(gpu)] = bad;
      Apply(s_->SetGpuBad(node, gpu, bad, now_), now_);
    });
  }
  void NodeBad(int node, bool bad) {
    Call("SetNodeBad", [&] {
      for (char& b : bad_[static_cast<size_t>(node)]) b = bad;
      Apply(s_->SetNodeBad(node, bad, now_), now_);
    });
  }
  void SetTelemetry(const Telemetry& t) {
    Call("SetTelemetry", [&] { s_->SetTelemetry(t); });
  }
  // Everything healthy again, and telemetry that refuses nothing.
  void RestoreHealth() {
    for (int n = 0; n < nodes(); ++n) {
      if (cordoned_[static_cast<size_t>(n)]) Cordon(n, false);
      for (int g = 0; g < kGpusPerNode; ++g)
        if (bad_[static_cast<size_t>(n)][static_cast<size_t>(g)]) GpuBad(n, g, false);
    }
    SetTelemetry(Telemetry{});
  }
  bool cordoned(int node) const { return cordoned_[static_cast<size_t>(node)]; }
  bool bad(int node, int gpu) const {
    return bad_[static_cast<size_t>(node)][static_cast<size_t>(gpu)];
  }

  // The clock moves on; the ends, stops and failed starts that fell due are carried out, in
  // time order.
  void Advance(double dt) {
    now_ += dt;
    ++step_;
    enum { kFailStart, kEnd, kStop };
    std::vector<std::tuple<double, int, int>> due;  // (time, what, job)
    for (const auto& [id, t] : jobs_) {
      if (t.phase == Phase::kPending) continue;
      if (t.fail_start) due.push_back({t.started_at, kFailStart, id});
      if (t.ends <= now_) due.push_back({t.ends, kEnd, id});
      if (t.phase == Phase::kStopping && t.stop_at <= now_) due.push_back({t.stop_at, kStop, id});
    }
    std::sort(due.begin(), due.end());
    for (const auto& [time, what, id] : due) {
      if (!ok()) return;
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.phase == Phase::kPending) continue;  // already over
      Tracked& t = it->second;
      const double at = std::max(time, clock_);  // never back in time
      if (what == kFailStart) {
        if (!t.fail_start || t.phase != Phase::kRunning) continue;
        Call("StartFailed", [&] {
          t.fail_start = false;
          t.phase = Phase::kPending;
          s_->StartFailed(id, at, "image pull failed");
        });
      } else if (what == kEnd) {
        Call("Finish",
             [&] { End(id, at, rng_.Chance(0.1) ? JobEnd::kFailed : JobEnd::kSucceeded); });
      } else if (t.phase == Phase::kStopping) {
        Call("Stopped", [&] {
          t.phase = Phase::kPending;
          Apply(s_->Stopped(id, at), at);
        });
      }
    }
  }

  // One scheduling cycle, then: a victim past its grace deadline has been told to die.
  void Schedule() {
    Call("Schedule", [&] {
      clock_ = now_;
      Apply(s_->Schedule(now_), now_);
      for (const auto& [id, t] : jobs_)
        if (t.phase == Phase::kStopping && t.deadline < now_ && !t.killed)
          return Fail("job " + std::to_string(id) + " was preempted with a deadline at " +
                      Time(t.deadline) + " and is still stopping without a kill decision");
    });
  }

  // --- What the tests read -------------------------------------------------------------------

  // Jobs not ended, by id.
  std::vector<int> live() const {
    std::vector<int> out;
    for (const auto& [id, t] : jobs_) out.push_back(id);
    return out;
  }
  const JobSpec& spec(int id) const { return jobs_.at(id).spec; }
  // When the job first started (kNever: not yet).
  double first_start(int id) const { return started_.count(id) ? started_.at(id) : kNever; }
  // From now on, jobs do not end by themselves: steady demand.
  void Forever() {
    for (auto& [id, t] : jobs_) t.duration = t.ends = kNever;
  }
  // A new phase: stop counts and waiting preemptors start from zero.
  void StartPhase() {
    for (auto& [id, t] : jobs_) t.stops = 0;
    last_stop_step_ = -1;
    preemptors_.clear();
  }
  int last_stop_step() const { return last_stop_step_; }
  int step() const { return step_; }
  int stops(int id) const { return jobs_.at(id).stops; }
  // The job stopped most often since StartPhase, and how often.
  std::pair<int, int> most_stopped() const {
    std::pair<int, int> most{-1, 0};
    for (const auto& [id, t] : jobs_)
      if (t.stops > most.second) most = {id, t.stops};
    return most;
  }
  // Preemptors named by a preempt decision that have neither started since nor ended, with the
  // time of the decision.
  const std::map<int, double>& waiting_preemptors() const { return preemptors_; }
  // GPU-equivalents held (running and stopping jobs) per queue, from the job records.
  std::vector<double> Usage() const {
    std::vector<double> usage(queues_.size(), 0);
    for (const auto& [id, t] : jobs_) {
      const JobRecord* j = s_->job(id);
      if (j != nullptr && Holds(*j)) usage[static_cast<size_t>(j->queue)] += HeldGpus(*j);
    }
    return usage;
  }
  // Every live job's full size per queue: the demand of the water-fill.
  std::vector<double> Demand() const {
    std::vector<double> demand(queues_.size(), 0);
    for (const auto& [id, t] : jobs_) {
      const JobRecord* j = s_->job(id);
      if (j != nullptr) demand[static_cast<size_t>(j->queue)] += FullGpus(t.spec);
    }
    return demand;
  }

  void Fail(const std::string& what) {
    if (!failure_.empty()) return;
    std::ostringstream out;
    out << "seed " << seed_ << ", step " << step_ << " (t=" << now_ << " s), after " << call_name_
        << ": " << what;
    // The engine's own account of the call, to start a replay from.
    for (const EngineEvent& e : s_->EventsSince(call_first_event_))
      out << "\n  event " << e.seq << " t=" << e.time << " job " << e.job << " " << e.kind << ": "
          << e.reason;
    failure_ = out.str();
  }

 private:
  enum class Phase { kPending, kRunning, kStopping };  // as the adapter sees the job
  struct Tracked {
    JobSpec spec;
    double duration = kNever;  // of each run
    Phase phase = Phase::kPending;
    double started_at = kNever;
    double ends = kNever;      // when the current run ends by itself
    double stop_at = kNever;   // when the adapter reports it stopped
    double deadline = kNever;  // preempted: when the engine must kill it
    bool killed = false;
    bool fail_start = false;
    int started_call = -1;      // the engine call that started its current run
    double start_priority = 0;  // its priority with aging (since submit) when it started
    // Steps with a preempt, evict or shrink decision for it since StartPhase: one cycle's
    // reclaims that cut it in several pieces (shrinks, then a preemption) stop it once.
    int stops = 0;
    int stop_step = -1;  // the step of the last one
  };

  void CountStop(Tracked& t) {
    if (t.stop_step != step_) ++t.stops;
    t.stop_step = step_;
    last_stop_step_ = step_;
  }

  static std::string Time(double t) {
    std::ostringstream out;
    out << t << " s";
    return out.str();
  }
  static std::string Gpu(int node, int gpu) {
    return std::to_string(node) + "/" + std::to_string(gpu);
  }

  template <typename F>
  void Call(const char* name, F&& call) {
    if (!ok()) return;
    ++call_;
    call_name_ = name;
    call_first_event_ = s_->last_event();
    call();
    Check();
  }

  void End(int id, double at, JobEnd end) {
    clock_ = std::max(clock_, at);
    s_->Finish(id, at, end, end == JobEnd::kFailed ? 1 : 0);
    const JobRecord* j = s_->job(id);
    if (j == nullptr || j->state != JobState::kDone)
      return Fail("job " + std::to_string(id) + " did not end on Finish");
    jobs_.erase(id);
    preemptors_.erase(id);
  }

  // Carries out decisions made at `at`, checking each against the job's record and the health
  // the test has set.
  void Apply(const std::vector<Decision>& decisions, double at) {
    clock_ = std::max(clock_, at);
    for (const Decision& d : decisions) {
      const std::string job = "job " + std::to_string(d.job);
      auto it = jobs_.find(d.job);
      const JobRecord* j = s_->job(d.job);
      if (it == jobs_.end() || j == nullptr)
        return Fail(std::string(DecisionKindName(d.kind)) + " decision for " + job +
                    ", which the adapter does not run");
      Tracked& t = it->second;
      switch (d.kind) {
        case Decision::Kind::kStart: {
          if (t.phase != Phase::kPending) return Fail(job + " started while it runs");
          // A later decision of the same call may already have told it to stop.
          if (!Holds(*j)) return Fail(job + " started but holds nothing");
          if (d.placements.size() != j->placements.size())
            return Fail(job + " started at placements its record does not hold");
          for (size_t i = 0; i < d.placements.size(); ++i) {
            const ReplicaPlacement& r = d.placements[i];
            if (r.node != j->placements[i].node || r.gpus != j->placements[i].gpus)
              return Fail(job + " started at placements its record does not hold");
            if (cordoned(r.node))
              return Fail(job + " started on cordoned node " + std::to_string(r.node));
            for (int g : r.gpus)
              if (bad(r.node, g)) return Fail(job + " started on bad GPU " + Gpu(r.node, g));
          }
          t.phase = Phase::kRunning;
          t.started_at = at;
          t.ends = at + t.duration;
          t.stop_at = t.deadline = kNever;
          t.killed = false;
          t.fail_start = rng_.Chance(start_fails);
          t.started_call = call_;
          t.start_priority =
              j->spec.priority +
              std::min(aging_cap_, aging_per_hour_ * std::max(0.0, at - j->submit_time) / 3600);
          started_.emplace(d.job, at);
          preemptors_.erase(d.job);
          break;
        }
        case Decision::Kind::kPreempt: {
          if (t.phase != Phase::kRunning) return Fail(job + " preempted while not running");
          if (t.started_call == call_) return Fail(job + " was started and preempted in one call");
          if (j->state != JobState::kStopping) return Fail(job + " preempted but not stopping");
          if (!j->spec.preemptible) return Fail(job + " is not preemptible but was preempted");
          if (d.grace_period_s != j->spec.grace_period_s)
            return Fail(job + " preempted with another grace period than its own");
          const JobRecord* p = s_->job(d.preemptor);
          if (p == nullptr || p->state != JobState::kPending)
            return Fail(job + " preempted for job " + std::to_string(d.preemptor) +
                        ", which is not pending");
          t.phase = Phase::kStopping;
          t.deadline = at + d.grace_period_s;
          t.stop_at = rng_.Chance(never_stop) ? kNever : at + rng_.Uniform(0, d.grace_period_s);
          CountStop(t);
          preemptors_.emplace(d.preemptor, at);
          break;
        }
        case Decision::Kind::kEvict:
        case Decision::Kind::kKill: {
          if (t.phase == Phase::kPending) return Fail(job + " told to stop while pending");
          if (j->state != JobState::kStopping) return Fail(job + " told to stop but not stopping");
          if (d.kind == Decision::Kind::kKill) {
            if (t.phase != Phase::kStopping) return Fail(job + " killed but never told to stop");
            t.killed = true;
          } else {
            CountStop(t);
          }
          t.phase = Phase::kStopping;
          t.stop_at = std::min(t.stop_at, at + rng_.Uniform(0, 3));
          break;
        }
        case Decision::Kind::kGrow:
        case Decision::Kind::kShrink: {
          const bool grow = d.kind == Decision::Kind::kGrow;
          // (A later decision of the same call may already have told it to stop.)
          if (t.phase != Phase::kRunning || !Holds(*j))
            return Fail(job + (grow ? " grew" : " shrank") + " while not running");
          if (j->spec.min_replicas == 0) return Fail(job + " resized but is not elastic");
          if (j->replicas < j->spec.min_replicas || j->replicas > TotalReplicas(j->spec))
            return Fail(job + " resized to " + std::to_string(j->replicas) + " replicas");
          if (!grow && t.started_call == call_)
            return Fail(job + " was started and shrunk in one call");
          if (!grow) CountStop(t);  // a shrink stops replicas: it counts against thrash
          for (const ReplicaPlacement& r : d.placements) {
            bool held = false;
            for (const ReplicaPlacement& h : j->placements)
              held |= h.node == r.node && h.gpus == r.gpus && h.gpu_milli == r.gpu_milli;
            if (held != grow)
              return Fail(job + (grow ? " grew at a replica it does not hold"
                                      : " shrank but still holds the replica"));
            if (grow && cordoned(r.node)) return Fail(job + " grew on a cordoned node");
            for (int g : r.gpus)
              if (grow && bad(r.node, g)) return Fail(job + " grew on bad GPU " + Gpu(r.node, g));
          }
          break;
        }
      }
    }
  }

  // The per-call contract, from the job records and the test's own hardware model.
  void Check() {
    if (!ok()) return;
    std::string e = s_->CheckConsistency();
    if (!e.empty()) return Fail("Scheduler::CheckConsistency: " + e);
    e = s_->allocator().CheckConsistency();
    if (!e.empty()) return Fail("Allocator::CheckConsistency: " + e);
    // A reservation made in this call (a new one, or one re-planned after a preemptor's plan
    // took some of its GPUs and dropped it) reserves from then on, not before the call.
    std::set<int> reserved_in_call;
    for (const EngineEvent& ev : s_->EventsSince(last_event_)) {
      if (ev.seq != last_event_ + 1)
        return Fail("event " + std::to_string(ev.seq) + " follows " + std::to_string(last_event_));
      last_event_ = ev.seq;
      if (ev.kind == "reserved") reserved_in_call.insert(ev.job);
    }

    // Who holds each GPU: one whole holder, or shares summing to at most 1000 milli.
    const size_t n_nodes = cluster_.nodes.size();
    std::vector<std::vector<int>> whole(n_nodes, std::vector<int>(kGpusPerNode, -1));
    std::vector<std::vector<int>> milli(n_nodes, std::vector<int>(kGpusPerNode, 0));
    std::vector<std::vector<std::vector<int>>> sharers(n_nodes,
                                                       std::vector<std::vector<int>>(kGpusPerNode));
    std::vector<double> held(queues_.size(), 0), guaranteed(queues_.size(), 0);
    const Allocator& alloc = s_->allocator();
    size_t allocations = 0;
    for (const auto& [id, j] : s_->jobs()) {
      const std::string job = "job " + std::to_string(id);
      auto tracked = jobs_.find(id);
      const bool done = j.state == JobState::kDone;
      if (done != (tracked == jobs_.end()))
        return Fail(job + " is " + JobStateName(j.state) + " in the engine but " +
                    (done ? "live" : "ended") + " for the adapter");
      if (done) continue;
      const Phase phase = tracked->second.phase;
      if ((phase == Phase::kPending) != (j.state == JobState::kPending) ||
          (phase == Phase::kStopping) != (j.state == JobState::kStopping))
        return Fail(job + " is " + JobStateName(j.state) +
                    " in the engine but not for the adapter, which was told otherwise");
      if (!Holds(j)) continue;
      allocations += j.allocations.size();
      for (int a : j.allocations)
        if (alloc.Find(a) == nullptr) return Fail(job + " holds an allocation the allocator lacks");
      for (const ReplicaPlacement& r : j.placements) {
        const size_t n = static_cast<size_t>(r.node);
        if (j.state == JobState::kRunning && drained_[n])
          return Fail(job + " still runs on drained node " + std::to_string(r.node));
        for (int g : r.gpus) {
          const size_t gi = static_cast<size_t>(g);
          if (j.state == JobState::kRunning && bad_[n][gi])
            return Fail(job + " still runs on bad GPU " + Gpu(r.node, g) + " without an evict");
          const int other = whole[n][gi] >= 0        ? whole[n][gi]
                            : sharers[n][gi].empty() ? -1
                                                     : sharers[n][gi].front();
          if (r.gpu_milli > 0) {
            if (whole[n][gi] >= 0 || (milli[n][gi] += r.gpu_milli) > 1000)
              return Fail("GPU " + Gpu(r.node, g) + " is over-shared: job " + std::to_string(id) +
                          " and job " + std::to_string(other));
            sharers[n][gi].push_back(id);
          } else {
            if (other >= 0)
              return Fail("GPU " + Gpu(r.node, g) + " is held by job " + std::to_string(other) +
                          " and job " + std::to_string(id));
            whole[n][gi] = id;
          }
        }
      }
      const double gpus = HeldGpus(j);
      if (std::abs(gpus - j.gpu_equivalents) > kEps)
        return Fail(job + " holds " + std::to_string(gpus) + " GPUs, its record says " +
                    std::to_string(j.gpu_equivalents));
      if (j.spec.priority < 0 && !j.borrowed)
        return Fail(job + " has priority < 0 but does not borrow");
      held[static_cast<size_t>(j.queue)] += gpus;
      if (!j.borrowed) guaranteed[static_cast<size_t>(j.queue)] += gpus;
    }
    if (allocations != alloc.allocations().size())
      return Fail("the allocator holds " + std::to_string(alloc.allocations().size()) +
                  " allocations, the jobs " + std::to_string(allocations));
    for (size_t n = 0; n < n_nodes; ++n)
      for (size_t g = 0; g < kGpusPerNode; ++g) {
        const int node = static_cast<int>(n), gpu = static_cast<int>(g);
        const int used = whole[n][g] >= 0 ? 1000 : milli[n][g];
        if (alloc.gpu_used_milli(node, gpu) != used)
          return Fail("GPU " + Gpu(node, gpu) + ": the allocator has " +
                      std::to_string(alloc.gpu_used_milli(node, gpu)) + " milli in use, jobs " +
                      std::to_string(used));
        if (used == 0 && alloc.gpu_usable(node, gpu) && !alloc.gpu_free(node, gpu))
          return Fail("GPU " + Gpu(node, gpu) + " is held by no job but not free");
      }
    for (size_t q = 0; q < queues_.size(); ++q) {
      if (queues_[q].cap_gpus >= 0 && held[q] > queues_[q].cap_gpus + kEps)
        return Fail("queue " + queues_[q].name + " holds " + std::to_string(held[q]) +
                    " GPUs, above its cap " + std::to_string(queues_[q].cap_gpus));
      if (guaranteed[q] > GuaranteeGpus(queues_[q]) + kEps)
        return Fail("queue " + queues_[q].name + " runs " + std::to_string(guaranteed[q]) +
                    " GPUs inside a guarantee of " + std::to_string(GuaranteeGpus(queues_[q])));
    }

    // Reservations: no job is started on a GPU reserved for another job before the call
    // (guaranteed work may take a yielding one, and strictly higher priority work a starving
    // one's); a preemptor's plan holds only its victims; a moved job's destination is held
    // from its stop until it starts.
    int starving = 0;
    std::map<std::tuple<int, int, int>, Reserved> reserved;
    for (const auto& [owner, res] : s_->reservations().all()) {
      const std::string who = "job " + std::to_string(owner);
      const JobRecord* o = s_->job(owner);
      if (o == nullptr ||
          (o->state != JobState::kPending && !(res.for_move && o->state == JobState::kStopping)))
        return Fail("a reservation is kept for " + who + ", which is " +
                    (o == nullptr ? "gone" : JobStateName(o->state)));
      if (res.starving()) ++starving;
      for (const auto& [node, gpu] : res.gpus) {
        const std::tuple<int, int, int> key{owner, node, gpu};
        reserved[key] = {res.yields, res.starving(), res.priority};
        auto seen = reserved_.find(key);
        const bool fresh = seen == reserved_.end() || reserved_in_call.count(owner) > 0;
        const Reserved before = fresh ? reserved[key] : seen->second;
        // The call may have dropped and re-made the reservation: whatever let a job in before
        // or after counts.
        const bool yields = res.yields || before.yields;
        const bool starves = res.starving() || before.starving;
        const double priority = std::min(res.priority, before.priority);
        const size_t n = static_cast<size_t>(node), g = static_cast<size_t>(gpu);
        std::vector<int> holders = sharers[n][g];
        if (whole[n][g] >= 0) holders.push_back(whole[n][g]);
        for (int h : holders) {
          const JobRecord& hj = *s_->job(h);
          const bool share = whole[n][g] != h;
          // Guaranteed work may hold a borrower's plan (it yields); the plan stays whole.
          if (res.for_preemption && hj.preempted_by != owner && !(share && AsksShares(o->spec)) &&
              !(res.yields && !hj.borrowed))
            return Fail("GPU " + Gpu(node, gpu) + " of preemptor " + who +
                        "'s plan is held by job " + std::to_string(h) + ", not its victim");
          const Tracked& ht = jobs_.at(h);
          if (fresh || ht.started_call != call_ || (yields && !hj.borrowed) ||
              (starves && std::floor(ht.start_priority + kEps) > priority))
            continue;
          std::ostringstream out;
          out << "job " << h << " (priority " << ht.start_priority
              << (hj.borrowed ? ", borrowed" : ", guaranteed") << ", now " << JobStateName(hj.state)
              << ") started in this call on GPU " << Gpu(node, gpu) << ", reserved for " << who
              << " before the call ("
              << (res.for_preemption ? "preemptor"
                  : res.for_move     ? "moved"
                                     : "starving")
              << ", priority " << priority << (yields ? ", yields" : "") << ")";
          return Fail(out.str());
        }
      }
    }
    reserved_ = std::move(reserved);
    if (starving > max_reservations_)
      return Fail(std::to_string(starving) + " starving jobs hold reservations, more than " +
                  std::to_string(max_reservations_));
  }

  Rng rng_;
  uint64_t seed_;
  Cluster cluster_;
  std::vector<QueueSpec> queues_;
  int max_reservations_;
  double aging_per_hour_, aging_cap_;
  std::unique_ptr<Scheduler> s_;
  double now_ = 0;
  double clock_ = 0;  // the time of the latest engine call
  int step_ = 0;
  int call_ = 0;
  const char* call_name_ = "construction";
  std::string failure_;
  std::map<int, Tracked> jobs_;  // not ended
  std::map<int, double> started_;
  std::map<int, double> preemptors_;
  int last_stop_step_ = -1;
  uint64_t last_event_ = 0;
  uint64_t call_first_event_ = 0;  // the last event before the current call
  // A reservation of one GPU as the last call left it: what it let pass.
  struct Reserved {
    bool yields, starving;
    double priority;
  };
  std::map<std::tuple<int, int, int>, Reserved> reserved_;  // by (owner, node, gpu)
  std::vector<char> cordoned_, drained_;
  std::vector<std::vector<char>> bad_;
};

// Telemetry with some GPUs near full memory, which the memory-threshold filter refuses.
Telemetry RandomTelemetry(Rng& rng, int nodes) {
  Telemetry t;
  t.gpus.resize(static_cast<size_t>(nodes));
  t.node_images.resize(static_cast<size_t>(nodes));
  for (auto& node : t.gpus) {
    node.resize(kGpusPerNode);
    for (GpuTelemetry& g : node) {
      g.fb_used_mib = rng.Chance(0.1) ? rng.Uniform(75000, 81000) : rng.Uniform(0, 20000);
      g.util_percent = rng.Uniform(0, 100);
    }
  }
  return t;
}

double Duration(Rng& rng) {
  return rng.Chance(0.85) ? rng.Uniform(20, 300) : rng.Uniform(300, 1500);
}

// Hardware faults of the churn, each healed after a few minutes, so that most of the cluster
// serves at any time.
struct Faults {
  explicit Faults(int nodes)
      : node_until(static_cast<size_t>(nodes), 0),
        gpu_until(static_cast<size_t>(nodes), std::vector<double>(kGpusPerNode, 0)) {}
  std::vector<double> node_until;              // cordoned or drained until
  std::vector<std::vector<double>> gpu_until;  // bad until
};

// One cycle of churn: arrivals (about 0.9 of what the cluster serves: queues contend in bursts,
// without a backlog that outlives the test), cancellations, faults and repairs, telemetry, then
// a scheduling cycle.
void ChurnCycle(Driver& d, Rng& rng, Faults& f) {
  d.Advance(rng.Uniform(1, 5));
  for (int i = rng.Chance(0.09) ? rng.Int(1, 2) : 0; i > 0; --i)
    d.Submit(RandomJob(rng, d.queues(), d.capacity(), false), Duration(rng));
  if (rng.Chance(0.01)) {
    const std::vector<int> live = d.live();
    if (!live.empty()) d.Cancel(rng.Pick(live));
  }
  const int node = rng.Int(0, d.nodes() - 1), gpu = rng.Int(0, kGpusPerNode - 1);
  const size_t n = static_cast<size_t>(node), g = static_cast<size_t>(gpu);
  if (!d.cordoned(node) && rng.Chance(0.003)) {
    if (rng.Chance(0.3))
      d.Drain(node);
    else
      d.Cordon(node, true);
    f.node_until[n] = d.now() + rng.Uniform(60, 600);
  }
  if (!d.bad(node, gpu) && rng.Chance(0.005)) {
    d.GpuBad(node, gpu, true);
    f.gpu_until[n][g] = d.now() + rng.Uniform(60, 600);
  }
  if (rng.Chance(0.001)) {
    d.NodeBad(node, true);
    for (double& until : f.gpu_until[n]) until = d.now() + rng.Uniform(60, 600);
  }
  for (int i = 0; i < d.nodes(); ++i) {
    const std::vector<double>& until = f.gpu_until[static_cast<size_t>(i)];
    if (d.cordoned(i) && f.node_until[static_cast<size_t>(i)] <= d.now()) d.Cordon(i, false);
    // A node whose GPUs are all bad and due comes back whole.
    bool whole = true;
    for (int j = 0; j < kGpusPerNode; ++j)
      whole = whole && d.bad(i, j) && until[static_cast<size_t>(j)] <= d.now();
    if (whole) d.NodeBad(i, false);
    for (int j = 0; j < kGpusPerNode; ++j)
      if (d.bad(i, j) && until[static_cast<size_t>(j)] <= d.now()) d.GpuBad(i, j, false);
  }
  if (rng.Chance(0.02)) d.SetTelemetry(RandomTelemetry(rng, d.nodes()));
  d.Schedule();
}

// --- Every call, through churn, and every job ends ----------------------------------------

TEST(SchedulerDynamics, ChurnKeepsThePerCallContractAndEveryJobEnds) {
  for (uint64_t seed : Seeds()) {
    Rng rng(seed);
    const int nodes = 6;
    Driver d(seed, nodes, RandomQueues(rng, nodes, 16), BerthPolicy());
    Faults faults(nodes);
    for (int i = 0; i < 4000 && d.ok(); ++i) ChurnCycle(d, rng, faults);
    // Arrivals stop and the hardware heals: every job must end, and whenever the cluster is
    // idle a pending job that may be tried starts (nothing is lost between wake-ups).
    d.RestoreHealth();
    for (int i = 0; i < 5000 && d.ok() && !d.live().empty(); ++i) {
      d.Advance(rng.Uniform(1, 5));
      d.Schedule();
      const std::vector<double> usage = d.Usage();
      if (std::any_of(usage.begin(), usage.end(), [](double u) { return u > 0; })) continue;
      for (int id : d.live()) {
        const JobRecord& j = *d.s().job(id);
        if (j.state == JobState::kPending && j.next_try <= d.now())
          d.Fail("the cluster is idle, but job " + std::to_string(id) +
                 " stays pending: " + j.reason);
      }
    }
    for (int id : d.live())
      d.Fail("job " + std::to_string(id) + " is still " + JobStateName(d.s().job(id)->state) +
             " long after arrivals stopped, stopped " + std::to_string(d.stops(id)) +
             " times: " + d.s().job(id)->reason);
    EXPECT_EQ(d.failure(), "");
  }
}

// --- Shares settle, no thrash --------------------------------------------------------------

// Jobs are placed whole: a capped queue whose cap has no room left for its smallest waiting job
// holds all it can (it does not preempt its own work to repack), and what it leaves of its share
// goes to the others. Its demand for the water-fill is then what it holds.
std::vector<double> ReachableDemand(const Driver& d, const std::vector<double>& usage) {
  std::vector<double> demand = d.Demand(), smallest_waiting(demand.size(), kNever);
  for (const auto& [id, j] : d.s().jobs())
    if (j.state == JobState::kPending) {
      double& smallest = smallest_waiting[static_cast<size_t>(j.queue)];
      smallest = std::min(smallest, FullGpus(j.spec));
    }
  for (size_t q = 0; q < demand.size(); ++q) {
    const double cap = d.queues()[q].cap_gpus;
    if (cap >= 0 && usage[q] + smallest_waiting[q] > cap + kEps) demand[q] = usage[q];
  }
  return demand;
}

// The queues as set and asked for, and which queue's running jobs sit on each GPU (a digit per
// queue, '.' free, '+' several): what a reader of a share failure needs to see.
std::string GpuMap(const Driver& d) {
  std::string out;
  const std::vector<double> demand = d.Demand();
  for (size_t q = 0; q < d.queues().size(); ++q) {
    const QueueSpec& spec = d.queues()[q];
    out += "\n  queue " + spec.name + ": weight " + std::to_string(spec.weight).substr(0, 4) +
           " cap " + std::to_string(spec.cap_gpus).substr(0, 5) + " guarantee " +
           std::to_string(GuaranteeGpus(spec)).substr(0, 5) + " demand " +
           std::to_string(demand[q]).substr(0, 5);
  }
  std::vector<std::string> rows(static_cast<size_t>(d.nodes()), std::string(kGpusPerNode, '.'));
  for (const auto& [id, j] : d.s().jobs()) {
    if (j.state == JobState::kPending || j.state == JobState::kDone) continue;
    for (const ReplicaPlacement& p : j.placements)
      for (int g : p.gpus) {
        char& c = rows[static_cast<size_t>(p.node)][static_cast<size_t>(g)];
        const char mark = static_cast<char>('0' + j.queue);
        c = c == '.' || c == mark ? mark : '+';
      }
  }
  for (size_t n = 0; n < rows.size(); ++n) out += "\n  node " + std::to_string(n) + ": " + rows[n];
  return out;
}

// Random queues (guarantees, weights, caps) churn with health changes, then hold a steady
// demand (1.3 times the capacity, nothing ends) for kCycles cycles. Checked over the last
// kSettled: nothing is preempted, evicted or shrunk, the engine's fair shares are the
// water-fill's, and with `usage_near_share` each queue's usage is within one job's size (plus
// the hysteresis) of its share. Over the whole steady phase no job is stopped in more than
// kMaxStopsPerJob steps and every preemptor starts.
void SteadyDemandSettles(bool usage_near_share, const std::vector<uint64_t>& seeds = Seeds()) {
  constexpr int kCycles = 700, kSettled = 150;  // the last kSettled cycles must be still
  for (uint64_t seed : seeds) {
    Rng rng(seed);
    const int nodes = 6;
    Driver d(seed, nodes, RandomQueues(rng, nodes, 16), BerthPolicy());
    // A messy start: churn with health changes.
    Faults faults(nodes);
    for (int i = 0; i < 300 && d.ok(); ++i) ChurnCycle(d, rng, faults);
    // Steady demand: the hardware heals, jobs outside the steady mix go, nothing ends by itself
    // and nothing arrives after the queues were topped up past the capacity.
    d.RestoreHealth();
    for (int id : d.live()) {
      const JobSpec& spec = d.spec(id);
      if (!spec.preemptible || FullGpus(spec) > kGpusPerNode) d.Cancel(id);
    }
    d.start_fails = 0;
    // Demand per queue: a random fraction of the capacity, 1.3 times the capacity in all.
    std::vector<double> want(d.queues().size());
    double wanted = 0;
    for (double& w : want) wanted += w = rng.Uniform(0.2, 1.2) * d.capacity();
    for (double& w : want) w *= std::max(1.0, 1.3 * d.capacity() / wanted);
    for (size_t q = 0; q < want.size(); ++q)
      while (d.ok() && d.Demand()[q] < want[q]) {
        JobSpec spec = RandomJob(rng, d.queues(), d.capacity(), true);
        spec.queue = d.queues()[q].name;
        d.Submit(spec, kNever);
      }
    d.Forever();
    d.StartPhase();
    int settled_from = -1;  // the first step of the settled window
    for (int i = 0; i < kCycles && d.ok(); ++i) {
      d.Advance(rng.Uniform(2, 6));
      d.Schedule();
      if (i < kCycles - kSettled || !d.ok()) continue;
      if (settled_from < 0) settled_from = d.step();
      if (d.last_stop_step() >= settled_from)
        d.Fail("a job was preempted or evicted at step " + std::to_string(d.last_stop_step()) +
               ", in the last " + std::to_string(kSettled) + " cycles of steady demand");
      // Within one job's size (the largest job left) of the water-fill, plus the hysteresis.
      double largest = 0;
      for (int id : d.live()) largest = std::max(largest, FullGpus(d.spec(id)));
      const std::vector<double> share = OracleShares(d.capacity(), d.queues(), d.Demand());
      const std::vector<double> usage = d.Usage();
      const std::vector<double> reachable =
          OracleShares(d.capacity(), d.queues(), ReachableDemand(d, usage));
      const std::vector<QueueStatus> status = d.s().Queues();
      for (size_t q = 0; q < share.size(); ++q) {
        const double slack = largest + d.s().policy().reclaim_hysteresis * reachable[q] + kEps;
        if (usage_near_share && std::abs(usage[q] - reachable[q]) > slack) {
          // Why its pending jobs wait says which mechanism held the share back.
          std::string waiting;
          for (int id : d.s().pending(static_cast<int>(q))) {
            const JobRecord& j = *d.s().job(id);
            if (waiting.size() < 2000)
              waiting += "\n  pending job " + std::to_string(id) + " (" +
                         std::to_string(FullGpus(j.spec)) + " GPUs, priority " +
                         std::to_string(j.spec.priority) + ", next try " +
                         std::to_string(j.next_try) + "): " + j.reason;
          }
          for (size_t o = 0; o < share.size(); ++o) {
            waiting += "\n  queue " + d.queues()[o].name + ": holds " + std::to_string(usage[o]) +
                       " share " + std::to_string(share[o]) + " committed " +
                       std::to_string(status[o].committed_gpus) + " guarantee " +
                       std::to_string(status[o].guarantee_gpus) + ", running:";
            for (const auto& [id, j] : d.s().jobs())
              if (j.queue == static_cast<int>(o) && j.state != JobState::kPending &&
                  j.state != JobState::kDone)
                waiting += " " + std::to_string(j.gpu_equivalents).substr(0, 4) +
                           (j.borrowed ? "b" : "g") + (j.spec.preemptible ? "" : "!") + "p" +
                           std::to_string(j.spec.priority) + "@n" +
                           std::to_string(j.placements.front().node);
          }
          for (const auto& [id, r] : d.s().reservations().all())
            waiting += "\n  reservation of job " + std::to_string(id) + " (queue " +
                       d.queues()[r.queue].name + ", " + d.s().job(id)->reason +
                       "): " + std::to_string(r.gpus.size()) + " GPUs on node " +
                       std::to_string(r.gpus.front().first) +
                       (r.for_preemption ? " (preemptor)" : "") + (r.yields ? " (yields)" : "");
          d.Fail("queue " + d.queues()[q].name + " holds " + std::to_string(usage[q]) +
                 " GPUs, its water-fill share is " + std::to_string(reachable[q]) + " (slack " +
                 std::to_string(slack) + ")" + waiting + GpuMap(d));
        }
        if (std::abs(status[q].fair_share_gpus - share[q]) > kEps)
          d.Fail("queue " + d.queues()[q].name + ": the engine's fair share " +
                 std::to_string(status[q].fair_share_gpus) + " differs from the water-fill " +
                 std::to_string(share[q]));
      }
    }
    auto history = [&](int job) {  // what the engine said of a job, and why
      std::string lines;
      for (const EngineEvent& e : d.s().EventsSince(0))
        if (e.job == job && lines.size() < 4000)
          lines += "\n  t=" + std::to_string(e.time) + " " + e.kind + ": " + e.reason;
      return lines;
    };
    const auto [job, stops] = d.most_stopped();
    if (stops > kMaxStopsPerJob)
      d.Fail("job " + std::to_string(job) + " was stopped " + std::to_string(stops) +
             " times under steady demand" + history(job));
    // Every preemptor starts, but one whose plan guaranteed work took over (scheduler.h: a
    // guarantee does not wait for a borrower's plan), which the engine says.
    std::map<int, double> displaced;
    for (const EngineEvent& e : d.s().EventsSince(0))
      if (e.kind == "plan-displaced") displaced[e.job] = e.time;
    for (const auto& [preemptor, since] : d.waiting_preemptors())
      if (!displaced.count(preemptor) || displaced[preemptor] < since)
        d.Fail("preemptor job " + std::to_string(preemptor) + " (preempt decided at " +
               std::to_string(since) + " s) has not started (now: " + d.s().job(preemptor)->reason +
               ")" + history(preemptor));
    EXPECT_EQ(d.failure(), "");
  }
}

// Seeds 1-1000 pass; of 1-20000, three fail. 15458 and 17960: a queue whose borrowed work
// already fills its fair share reclaims its guarantee, which takes the victims' queues below
// their shares, and they take back from its newest borrower, one job 4 times (the shortfall
// rule of PlanAllowed holds fair-share reclaims only: holding guarantee reclaims to it would
// leave two queues that borrowed each other's cells without their guarantees). 19403: a
// starving job's reservation moves an occupant inside the last 150 cycles (nothing starves,
// so that late stop is owed), as 11949 did once. Earlier causes, since fixed: in the churn
// that opens the steady phase, an elastic borrower shrunk or reclaimed again, or a queue's
// lowest-priority job, which reclaims take first (FindVictimsLowestFirst) and which its
// queue's higher-priority jobs preempt as they come back (5639, 8620, 16175). A cause seen before,
// no longer failing here (14086): a borrowed share's planned GPU bound to its own queue while its
// victims stopped; a queue's borrowed shares never go into its own cells (allocator.h lends only
// whole GPUs, and never to their own VC), so the plan breaks and the victims stopped for nothing.
// The last three of 1-1000 to fail (588, 701, 944) had an elastic job start or grow past its
// queue's fair share into GPUs another queue's work left free while it waited out a back-off,
// then be cut again by the next reclaims (Scheduler::MostInShareBand).
TEST(SchedulerDynamics, SteadyDemandSettlesWithoutThrash) { SteadyDemandSettles(false); }

// Seeds past 1000 that failed, for causes since fixed. 6645, 12002: two guaranteed preemptors
// of one queue planned on more guarantee cells than the queue binds, and the second to start
// found its plan's cells bound elsewhere; it went back to pending for good, its victims stopped
// for nothing (Scheduler::StartPreemptor now runs it on its plan, borrowed). 7610: reclaims took
// a queue's one high-priority job, which came straight back by preempting the queue's
// low-priority ones, and was taken again by the next reclaim, five times (FindVictimsLowestFirst).
// 11368, 14271, 15649: a queue at its fair share went first by dominant share, took the last free
// GPUs, and lost them to the reclaim of a queue below its share in the next cycle, one job four
// or five times (CycleOrder now offers free GPUs to the queues below their share first).
// 12253, 14104, 17041: jobs moved aside for a plan started again wherever their guarantee
// placed them, on GPUs their fellow movers had not left yet or in the cells the plan's borrowed
// share needed, so the plan broke or more moves and reclaims followed; they now start on the
// destinations held for them, once those are free (Scheduler::StartMoved), and a plan is made
// only where the job still fits after its movers are back (Scheduler::FitsAfterMovers).
// 9578, 11728, 17352: a reclaim passed over a job its queue had started in the same cycle and
// took the queue's higher-priority job, which came straight back by shrinking or preempting it;
// now a job above one started in the cycle is no victim then, for one cycle of the wait
// (PreemptionPlans).
TEST(SchedulerDynamics, SteadyDemandSettlesOnSeedsThatOnceThrashed) {
  SteadyDemandSettles(
      false, {6645, 7610, 9578, 11368, 11728, 12002, 12253, 14104, 14271, 15649, 17041, 17352});
}

// Disabled: 10 seeds in 1000 (45, 144, 449, 452, 454, 469, 911, 951, 958, 963; 21 in 2000) end
// with a queue well under its water-fill share and no preemption left to make: its
// 8-GPU or gang jobs need whole nodes, while the GPUs left are fragmented by gangs of an over-share
// queue spread across nodes (a reclaim would take more than that queue's excess, or every node
// holds a GPU of a queue under its share), an over-share queue's guaranteed work takes the GPUs a
// borrower's plan freed, a job to move aside was moved once already, or the reservation slots are
// held by jobs of queues above their shares. Moving a reservation's occupants where they fit
// (MoveForReservations) fixed 58 and 93; planning a reservation anew where its occupants can move,
// and reclaims that move the queue's own small jobs aside, took the failures from 22 to 15, and
// fair-share reclaims that also take the queue's own borrowed lower-priority work to 14 (the test's
// water-fill counts a queue whose cap has no room for its smallest waiting job as full); taking
// each queue's lowest priority first moved them to 15 (other seeds, the same causes), and
// offering free GPUs to the queues below their share first to 12, and moved jobs starting on
// their destinations to 10 (312: a moved job came back onto the plan it was moved for). Lending
// the idle GPUs of guarantee cells fixed the seeds where borrowers found no cell at all. The fixed
// scenarios of scheduler_over_time_test.cc settle; this stays open in issue 9. Run it with
// --gtest_also_run_disabled_tests (BERTH_DYNAMICS_SEEDS for more seeds).
TEST(SchedulerDynamics, DISABLED_UsageSettlesAtTheWaterFill) { SteadyDemandSettles(true); }

// --- Nothing starves -------------------------------------------------------------------------

TEST(SchedulerDynamics, ABigJobStartsWithinTheReservationBoundAmongSmallOnes) {
  constexpr double kMaxSmall = 300, kMaxStep = 5;
  for (uint64_t seed : Seeds()) {
    Rng rng(seed);
    const int nodes = 4;
    const Policy policy = BerthPolicy();
    Driver d(seed, nodes, {Queue("a", 0, 1, -1)}, policy);
    d.start_fails = 0;
    // One or two (at most max_reservations) big jobs: a whole node, or a gang of two.
    std::vector<std::pair<double, JobSpec>> big;
    const int count = std::min(policy.max_reservations, rng.Int(1, 2));
    double at = rng.Uniform(300, 600);
    for (int i = 0; i < count; ++i) {
      JobSpec spec;
      spec.queue = "a";
      spec.user = "big";
      spec.groups = {rng.Chance(0.5) ? Group(1, 8) : Group(2, 8)};
      big.push_back({at, spec});
      at += rng.Uniform(0, 300);
    }
    // Each starts within reserve_after_s plus the longest job, plus a few cycles of slack; the
    // later one may also wait for the earlier one (oldest first).
    const double bound = policy.reserve_after_s + kMaxSmall + 3 * kMaxStep;
    std::vector<std::pair<int, double>> submitted;  // (job, submit time)
    std::set<int> small;
    while (d.ok() && d.now() < big.back().first + 2 * bound) {
      d.Advance(rng.Uniform(1, kMaxStep));
      // A stream of single-GPU jobs keeps a backlog, so a whole node never frees by chance.
      std::erase_if(small, [&](int id) { return d.s().job(id)->state == JobState::kDone; });
      int backlog = 0;
      for (int id : small) backlog += d.s().job(id)->state == JobState::kPending;
      for (; backlog < 12 && d.ok(); ++backlog) {
        JobSpec spec;
        spec.queue = "a";
        spec.user = "small-" + std::to_string(rng.Int(0, 2));
        spec.groups = {Group(1, 1)};
        small.insert(d.Submit(spec, rng.Uniform(60, kMaxSmall)));
      }
      while (submitted.size() < big.size() && big[submitted.size()].first <= d.now())
        submitted.push_back(
            {d.Submit(big[submitted.size()].second, rng.Uniform(60, kMaxSmall)), d.now()});
      d.Schedule();
    }
    double earlier = 0;  // when the earlier big job started
    for (const auto& [id, when] : submitted) {
      const double by = std::max(when + policy.reserve_after_s, earlier) + kMaxSmall + 3 * kMaxStep;
      if (d.first_start(id) > by)
        d.Fail("big job " + std::to_string(id) + " submitted at " + std::to_string(when) +
               " s has not started by " + std::to_string(by) + " s" +
               (d.first_start(id) < kNever
                    ? " (it did at " + std::to_string(d.first_start(id)) + " s)"
                    : ""));
      earlier = d.first_start(id);
    }
    EXPECT_EQ(d.failure(), "");
  }
}

// --- Users inside a queue ------------------------------------------------------------------

TEST(SchedulerDynamics, TwoUsersSplitFreeGpusEvenlyInOneCycle) {
  for (uint64_t seed : Seeds()) {
    Rng rng(seed);
    Driver d(seed, 1, {Queue("a", 0, 1, -1)}, BerthPolicy());
    d.start_fails = 0;
    // Ten single-GPU jobs each, in a random order (or one user's all first).
    std::vector<std::string> users(20, "alice");
    std::fill(users.begin() + 10, users.end(), "bob");
    if (rng.Chance(0.7)) std::shuffle(users.begin(), users.end(), rng.gen());
    for (const std::string& user : users) {
      d.Advance(rng.Uniform(0, 0.5));
      JobSpec spec;
      spec.queue = "a";
      spec.user = user;
      spec.groups = {Group(1, 1)};
      d.Submit(spec, kNever);
    }
    d.Schedule();
    std::map<std::string, int> running;
    for (int id : d.live())
      if (d.s().job(id)->state == JobState::kRunning) ++running[d.spec(id).user];
    EXPECT_EQ(running["alice"], 4) << "seed " << seed;
    EXPECT_EQ(running["bob"], 4) << "seed " << seed;
    EXPECT_EQ(d.failure(), "");
  }
}

}  // namespace
}  // namespace berth
