#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include "core/fragmentation.h"

namespace berth {

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / values.size();
  auto at = [&](double p) { return values[static_cast<size_t>(p * (values.size() - 1))]; };
  d.p50 = at(0.5);
  d.p95 = at(0.95);
  d.p99 = at(0.99);
  return d;
}

double CommIntensity(const std::string& workload) {
  // Parameter-heavy models spend most of a step exchanging gradients.
  static const std::pair<const char*, double> kModels[] = {
      {"vgg", 1.0},       {"alexnet", 1.0},   {"bert", 0.8},   {"gpt", 0.8},
      {"inception", 0.3}, {"googlenet", 0.3}, {"resnet", 0.25}};
  for (const auto& [prefix, comm] : kModels)
    if (workload.rfind(prefix, 0) == 0) return comm;
  return 0.5;
}

std::vector<ReplayJob> ReplayJobsFromTrace(const Cluster& cluster,
                                           const std::vector<TracePod>& pods,
                                           const std::vector<QueueSpec>& queues) {
  int node_gpus = 1;
  for (const Node& n : cluster.nodes)
    node_gpus = std::max(node_gpus, static_cast<int>(n.gpus.size()));
  std::vector<ReplayJob> jobs;
  for (size_t i = 0; i < pods.size(); ++i) {
    TracePod p = pods[i];
    double duration = p.duration;
    if (duration < 0 && p.start_time >= 0 && p.end_time >= p.start_time)
      duration = p.end_time - p.start_time;
    if (duration < 0 || p.submit_time < 0) continue;  // a pod without times cannot be replayed
    TaskGroup group;
    if (p.gpus > node_gpus) {
      group.replicas = (p.gpus + node_gpus - 1) / node_gpus;
      p.gpus = node_gpus;
      p.cpu_milli /= group.replicas;
      p.memory_mib /= group.replicas;
    }
    group.demand = TraceDemand(p);
    ReplayJob job;
    job.spec.name = p.name;
    job.spec.queue = queues.empty() ? "" : queues[i % queues.size()].name;
    job.spec.user = p.qos;
    job.spec.priority = 100;
    job.spec.groups.push_back(std::move(group));
    job.submit = p.submit_time;
    job.duration = duration;
    job.comm = CommIntensity(p.workload);
    job.line = p.line;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

namespace {

constexpr size_t kMaxCyclesAtOneInstant = 100000;

// How much slower a placement runs than the tightest one the cluster could have offered.
double PlacementFactor(Level level, double comm, const ReplayOptions& o) {
  double f = 1;
  if (level >= Level::kSocket) f *= o.cross_switch;
  if (level >= Level::kNode) f *= o.cross_socket;
  if (level >= Level::kRack) f *= 1 + (o.cross_node - 1) * comm;
  return f;
}

// Whole GPUs a placement holds (shares and MIG slices run at no topology cost).
int WholeGpus(const std::vector<ReplicaPlacement>& placements) {
  int gpus = 0;
  for (const ReplicaPlacement& r : placements)
    if (r.gpu_milli == 0 && r.mig_profile < 0) gpus += static_cast<int>(r.gpus.size());
  return gpus;
}

Level PlacedLevel(const Allocator& alloc, const std::vector<ReplicaPlacement>& placements) {
  std::set<int> nodes;
  std::vector<int> cells;
  for (const ReplicaPlacement& r : placements) {
    nodes.insert(r.node);
    if (r.gpu_milli == 0 && r.mig_profile < 0)
      for (int g : r.gpus) cells.push_back(alloc.tree().gpu_cell(r.node, g));
  }
  if (nodes.size() > 1) return Level::kRack;
  if (cells.empty()) return Level::kGpu;
  const CellTree& tree = alloc.tree();
  int lca = cells[0];
  for (int c : cells)
    while (!tree.IsWithin(c, lca)) lca = tree.cells()[lca].parent;
  return tree.type_of(lca).tight_level;
}

Level IdealLevel(const Allocator& alloc, int gpus) {
  Level best = Level::kRack;
  for (const CellType& t : alloc.tree().types())
    if (t.level <= Level::kNode && t.leaf_count >= gpus) best = std::min(best, t.tight_level);
  return best;
}

// A job's size in GPU-equivalents, every replica of every group.
double JobGpus(const Cluster& cluster, const JobSpec& spec) {
  double gpus = 0;
  for (const TaskGroup& g : spec.groups) gpus += g.replicas * GpuEquivalents(cluster, g.demand);
  return gpus;
}

}  // namespace

ReplayResult RunReplay(const Cluster& cluster, const std::vector<QueueSpec>& queue_specs,
                       const std::vector<ReplayJob>& input,
                       const std::vector<ReplayEvent>& trace_events, const Policy& policy,
                       const ReplayOptions& options, const std::function<void(double)>& progress) {
  std::vector<QueueSpec> queues = queue_specs;
  if (queues.empty()) queues.push_back({"default", 1, -1, {}});
  Scheduler engine(&cluster, queues, policy);
  ReplayResult result;
  result.policy = policy.name;
  for (const QueueSpec& q : queues) result.queues.push_back(q.name);
  result.queue_timeline.resize(queues.size());
  result.error = engine.error();
  if (!result.error.empty()) return result;

  std::vector<PodShape> shapes;
  for (const ReplayJob& j : input)
    for (const TaskGroup& g : j.spec.groups) shapes.push_back(PodShapeOf(cluster, g.demand));
  const std::vector<TypicalPod> typical = TypicalPods(shapes, PaperTypicalPodsOptions());
  engine.SetWorkloadModel(typical);
  const FragmentationModel frag(&cluster, typical);

  std::vector<size_t> order(input.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return input[a].submit < input[b].submit; });
  std::vector<size_t> event_order(trace_events.size());
  for (size_t i = 0; i < event_order.size(); ++i) event_order[i] = i;
  std::stable_sort(event_order.begin(), event_order.end(),
                   [&](size_t a, size_t b) { return trace_events[a].time < trace_events[b].time; });
  // Shortest-first ranks known durations into priorities (and never preempts for them).
  std::vector<int> sjf_priority(input.size(), 0);
  if (options.shortest_first) {
    std::vector<size_t> by_length = order;
    std::stable_sort(by_length.begin(), by_length.end(),
                     [&](size_t a, size_t b) { return input[a].duration < input[b].duration; });
    for (size_t r = 0; r < by_length.size(); ++r)
      sjf_priority[by_length[r]] = 1000 * static_cast<int>(by_length.size() - r);
  }

  struct Run {
    size_t input = 0;
    double remaining = 0;  // ideal seconds of work left
    double run_start = 0;
    double slowdown = 1;
    int token = 0;  // events from an earlier run are stale
  };
  std::map<int, Run> runs;                 // by engine job id
  std::vector<int> ids(input.size(), -1);  // engine job id by input index
  // kWake: a cycle when a job's wait reaches reserve_after_s, as a server's periodic cycle
  // would run one, so that its reservation is made then and not at the next event.
  enum EventKind { kCompletion, kVictimStops, kWake };
  struct Event {
    double time;
    uint64_t seq;  // ties in the order they were scheduled
    EventKind kind;
    int job;
    int token;
    bool operator>(const Event& o) const { return std::tie(time, seq) > std::tie(o.time, o.seq); }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  uint64_t event_seq = 0;
  double longest_grace = 0;
  result.jobs.resize(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    JobOutcome& o = result.jobs[i];
    o.name = input[i].spec.name;
    o.queue = input[i].spec.queue.empty() ? queues[0].name : input[i].spec.queue;
    o.user = input[i].spec.user;
    o.submit = input[i].submit;
    longest_grace = std::max(longest_grace, input[i].spec.grace_period_s);
  }
  result.anomaly_tolerance_s = longest_grace + options.cycle_s;

  auto start_job = [&](const Decision& d, double now) {
    Run& run = runs.at(d.job);
    const JobRecord* rec = engine.job(d.job);
    const int gpus = WholeGpus(d.placements);
    run.slowdown = gpus > 1 ? PlacementFactor(PlacedLevel(engine.allocator(), d.placements),
                                              input[run.input].comm, options) /
                                  PlacementFactor(IdealLevel(engine.allocator(), gpus),
                                                  input[run.input].comm, options)
                            : 1;
    run.slowdown = std::max(1.0, run.slowdown);
    // An elastic job running fewer replicas does its work in proportion.
    if (rec && rec->replicas > 0)
      run.slowdown *= static_cast<double>(TotalReplicas(rec->spec)) / rec->replicas;
    run.run_start = now;
    ++run.token;
    JobOutcome& o = result.jobs[run.input];
    if (o.first_start < 0) o.first_start = now;
    o.slowdown = run.slowdown;
    JobRun r;
    r.start = now;
    r.placements = d.placements;
    o.runs.push_back(std::move(r));
    events.push({now + run.remaining * run.slowdown, event_seq++, kCompletion, d.job, run.token});
  };
  // The run ends now; a job that goes back to pending keeps its work up to its last checkpoint.
  auto end_run = [&](Run& run, double now, const std::string& kind, const std::string& reason) {
    ++run.token;
    JobOutcome& o = result.jobs[run.input];
    if (!o.runs.empty() && o.runs.back().stop < 0) {
      o.runs.back().stop = now;
      o.runs.back().stop_kind = kind;
      if (!reason.empty()) o.runs.back().reason = reason;
    }
    if (kind == "succeeded" || kind == "cancelled") return;
    const double done = (now - run.run_start) / run.slowdown;
    const double kept =
        options.checkpoint_interval_s > 0
            ? std::floor(done / options.checkpoint_interval_s) * options.checkpoint_interval_s
            : 0;
    run.remaining = std::max(0.0, run.remaining - kept);
  };
  auto wake_for_reservation = [&](int job, double now) {
    events.push({now + policy.reserve_after_s, event_seq++, kWake, job, 0});
  };
  auto handle = [&](const std::vector<Decision>& decisions, double now) {
    std::deque<Decision> work(decisions.begin(), decisions.end());
    while (!work.empty()) {
      const Decision d = std::move(work.front());
      work.pop_front();
      Run& run = runs.at(d.job);
      JobOutcome& o = result.jobs[run.input];
      switch (d.kind) {
        case Decision::Kind::kStart:
          start_job(d, now);
          break;
        case Decision::Kind::kPreempt:
          ++result.preemptions;
          ++o.preemptions;
          if (!o.runs.empty()) {
            o.runs.back().told_to_stop = now;
            o.runs.back().reason = d.reason;
          }
          events.push({now + d.grace_period_s, event_seq++, kVictimStops, d.job, run.token});
          break;
        case Decision::Kind::kGrow:
          ++result.grows;
          ++o.grows;
          break;
        case Decision::Kind::kShrink:
          ++result.shrinks;
          ++o.shrinks;
          break;
        case Decision::Kind::kEvict:
        case Decision::Kind::kKill: {
          const bool evict = d.kind == Decision::Kind::kEvict;
          ++(evict ? result.evictions : result.kills);
          if (evict) ++o.evictions;
          end_run(run, now, evict ? "evict" : "kill", d.reason);
          wake_for_reservation(d.job, now);
          for (Decision& next : engine.Stopped(d.job, now)) work.push_back(std::move(next));
          break;
        }
      }
    }
  };
  auto apply = [&](const ReplayEvent& e, double now) {
    switch (e.kind) {
      case ReplayEvent::Kind::kCordon:
      case ReplayEvent::Kind::kUncordon:
        return handle(engine.SetNodeCordoned(e.node, e.kind == ReplayEvent::Kind::kCordon, now),
                      now);
      case ReplayEvent::Kind::kDrain:
        return handle(engine.Drain(e.node, now), now);
      case ReplayEvent::Kind::kFailGpu:
      case ReplayEvent::Kind::kRecoverGpu:
        return handle(engine.SetGpuBad(e.node, e.gpu, e.kind == ReplayEvent::Kind::kFailGpu, now),
                      now);
      case ReplayEvent::Kind::kFailNode:
      case ReplayEvent::Kind::kRecoverNode:
        return handle(engine.SetNodeBad(e.node, e.kind == ReplayEvent::Kind::kFailNode, now), now);
      case ReplayEvent::Kind::kCancel: {
        const int id = ids[e.job];
        const JobRecord* rec = id >= 0 ? engine.job(id) : nullptr;
        if (!rec || rec->state == JobState::kDone) return;  // refused, or already ended
        engine.Finish(id, now, JobEnd::kCancelled);
        end_run(runs.at(id), now, "cancelled", "cancelled by the trace");
        JobOutcome& o = result.jobs[e.job];
        o.end = now;
        o.end_kind = "cancelled";
        ++result.cancelled;
        return;
      }
    }
  };

  // Sharing anomaly (HiveD): a job waits although it fits within its queue's guarantee, while
  // other queues borrow. Reclaiming the guarantee takes the victims' grace period, so only a
  // longer wait breaks the promise. Open stretches, by engine job id: since when.
  std::map<int, double> guaranteed_wait_since;
  auto track_anomalies = [&](const std::vector<QueueStatus>& status, double now) {
    double borrowed = 0;
    for (const QueueStatus& q : status) borrowed += q.borrowed_gpus;
    // The guarantee is in cells, not only in GPUs: a job fits it when its VC's cells could hold
    // it once the other queues' borrowers are gone (tried on a copy of the allocator per
    // queue, made only when needed).
    std::optional<Allocator> unborrowed;
    int unborrowed_for = -1;
    auto fits_cells = [&](const JobRecord& job) {
      if (unborrowed_for != job.queue) {
        unborrowed.emplace(engine.allocator());
        unborrowed_for = job.queue;
        for (const auto& [id, j] : engine.jobs())
          if (j.borrowed && j.queue != job.queue &&
              (j.state == JobState::kRunning || j.state == JobState::kStopping))
            for (int a : j.allocations) unborrowed->Release(a);
      }
      // A waiting preemptor's own plan promises it the cells it binds.
      unborrowed->Promise(job.queue, job.promised_cells, -1);
      std::vector<int> taken;
      for (const TaskGroup& g : job.spec.groups) {
        AllocationRequest req;
        req.replicas = g.replicas;
        req.demand = g.demand;
        req.gang_affinity = job.spec.gang_affinity;
        req.vc = job.queue;
        const std::optional<int> a = unborrowed->Allocate(req, nullptr);
        if (!a) break;
        taken.push_back(*a);
      }
      for (int a : taken) unborrowed->Release(a);
      unborrowed->Promise(job.queue, job.promised_cells, +1);
      return taken.size() == job.spec.groups.size();
    };
    std::set<int> waiting;
    for (size_t q = 0; q < status.size(); ++q) {
      if (status[q].pending == 0 || borrowed - status[q].borrowed_gpus <= 1e-9) continue;
      const double guaranteed_use = status[q].usage_gpus - status[q].borrowed_gpus;
      for (int id : engine.pending(static_cast<int>(q))) {
        const JobRecord& job = *engine.job(id);
        if (guaranteed_use + JobGpus(cluster, job.spec) <= status[q].guarantee_gpus + 1e-9 &&
            fits_cells(job))
          waiting.insert(id);
      }
    }
    for (auto it = guaranteed_wait_since.begin(); it != guaranteed_wait_since.end();) {
      JobOutcome& o = result.jobs[runs.at(it->first).input];
      o.guaranteed_wait_s = std::max(o.guaranteed_wait_s, now - it->second);
      it = waiting.count(it->first) ? std::next(it) : guaranteed_wait_since.erase(it);
    }
    for (int id : waiting) guaranteed_wait_since.emplace(id, now);
  };

  size_t next = 0, next_event = 0;
  size_t steps = 0, same_instant = 0;
  const size_t sample_every =
      std::max<size_t>(1, 2 * input.size() / std::max(1, options.timeline_points));
  const double capacity = cluster.gpu_count();
  const double first_arrival = order.empty() ? 0 : input[order.front()].submit;
  const double last_arrival = order.empty() ? 0 : input[order.back()].submit;
  double util_area = 0, last_t = first_arrival, last_util = 0, now = first_arrival;
  auto util_until = [&](double t) {
    // The utilization window: arrivals, or the whole run when they all come at once.
    const double to = last_arrival > first_arrival ? std::min(t, last_arrival) : t;
    if (to > last_t) util_area += last_util * (to - last_t);
    last_t = std::max(last_t, to);
  };
  while (true) {
    // A wake for a job that is no longer pending asks for nothing.
    while (!events.empty() && events.top().kind == kWake) {
      const JobRecord* rec = engine.job(events.top().job);
      if (rec && rec->state == JobState::kPending) break;
      events.pop();
    }
    const double t_arrival = next < order.size() ? input[order[next]].submit : 1e300;
    const double t_trace =
        next_event < event_order.size() ? trace_events[event_order[next_event]].time : 1e300;
    const double t_event = events.empty() ? 1e300 : events.top().time;
    const double t = std::min({t_arrival, t_trace, t_event});
    if (t >= 1e300) break;  // nothing left to happen
    // Decisions that undo each other at one instant (say, preempt and restart with no grace
    // period) would never let the clock move: stop rather than hang.
    same_instant = t == now ? same_instant + 1 : 0;
    if (same_instant > kMaxCyclesAtOneInstant) {
      result.error = "the engine made no progress at " + std::to_string(static_cast<int64_t>(now)) +
                     " s: " + std::to_string(same_instant) + " cycles at one instant";
      break;
    }
    now = t;
    util_until(now);
    while (!events.empty() && events.top().time <= now) {
      const Event e = events.top();
      events.pop();
      if (e.kind == kWake) continue;  // the cycle below is all it asks for
      Run& run = runs.at(e.job);
      if (e.token != run.token) continue;
      if (e.kind == kCompletion) {
        engine.Finish(e.job, now);
        end_run(run, now, "succeeded", "");
        result.jobs[run.input].end = now;
        result.jobs[run.input].end_kind = "succeeded";
      } else {
        end_run(run, now, "preempt", "");
        wake_for_reservation(e.job, now);
        handle(engine.Stopped(e.job, now), now);
      }
    }
    while (next < order.size() && input[order[next]].submit <= now) {
      const size_t i = order[next++];
      JobSpec spec = input[i].spec;
      spec.queue = result.jobs[i].queue;
      if (options.shortest_first) {
        spec.priority = sjf_priority[i];
        spec.priority_class.clear();
        spec.preemptible = false;
      }
      std::string why;
      const int id = engine.Submit(spec, now, &why);
      if (id < 0) {
        result.jobs[i].refused = why;
        result.jobs[i].end_kind = "refused";
        ++result.refused;
        continue;
      }
      ids[i] = id;
      runs[id] = {i, input[i].duration, 0, 1, 0};
      wake_for_reservation(id, now);
    }
    while (next_event < event_order.size() && trace_events[event_order[next_event]].time <= now)
      apply(trace_events[event_order[next_event++]], now);
    handle(engine.Schedule(now), now);

    const std::vector<QueueStatus> status = engine.Queues();
    track_anomalies(status, now);
    double used = 0;
    for (size_t q = 0; q < status.size(); ++q) {
      used += status[q].usage_gpus;
      const QueuePoint p{now, status[q].usage_gpus, status[q].fair_share_gpus, status[q].pending};
      std::vector<QueuePoint>& series = result.queue_timeline[q];
      if (!series.empty() && series.back().time == now) series.pop_back();
      if (series.empty() || series.back().usage_gpus != p.usage_gpus ||
          series.back().fair_share_gpus != p.fair_share_gpus || series.back().pending != p.pending)
        series.push_back(p);
    }
    last_util = 100.0 * used / std::max(1.0, capacity);
    const bool last = next == order.size() && next_event == event_order.size() && events.empty();
    if (++steps % sample_every == 0 || last) {
      TimelinePoint p;
      p.time = now;
      p.utilization = last_util;
      p.fragmentation = 100.0 * frag.ClusterFragmentation(engine.allocator()) / (1000.0 * capacity);
      result.timeline.push_back(p);
    }
    if (progress && steps % 256 == 0)
      progress(static_cast<double>(next) / std::max<size_t>(1, order.size()));
  }
  track_anomalies({}, now);  // closes the stretches still open

  std::vector<double> jct, wait;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_queue;
  for (JobOutcome& o : result.jobs) {
    o.anomaly = o.guaranteed_wait_s > result.anomaly_tolerance_s;
    result.anomalies += o.anomaly;
    if (o.end_kind.empty()) ++result.unfinished;
    if (o.end_kind != "succeeded") continue;
    jct.push_back(o.end - o.submit);
    wait.push_back(o.first_start - o.submit);
    by_queue[o.queue].first.push_back(o.end - o.submit);
    by_queue[o.queue].second.push_back(o.first_start - o.submit);
    result.makespan = std::max(result.makespan, o.end);
  }
  result.jct = Summarize(jct);
  result.wait = Summarize(wait);
  for (const auto& [q, v] : by_queue)
    result.per_queue[q] = {Summarize(v.first), Summarize(v.second)};
  result.utilization_from = first_arrival;
  result.utilization_to = last_t;
  result.mean_utilization = last_t > first_arrival ? util_area / (last_t - first_arrival) : 0;
  if (progress) progress(1);
  return result;
}

}  // namespace berth
