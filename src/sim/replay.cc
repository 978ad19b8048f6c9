#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>

#include "core/fragmentation.h"
#include "sim/packing.h"

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
    const TracePod& p = pods[i];
    double duration = p.duration;
    if (duration < 0 && p.start_time >= 0 && p.end_time >= p.start_time)
      duration = p.end_time - p.start_time;
    if (duration < 0 || p.submit_time < 0) continue;  // a pod without times cannot be replayed
    ReplayJob job;
    job.pod = p;
    job.pod.duration = duration;
    if (p.gpus > node_gpus) {
      job.replicas = (p.gpus + node_gpus - 1) / node_gpus;
      job.pod.gpus = node_gpus;
      job.pod.cpu_milli = p.cpu_milli / job.replicas;
      job.pod.memory_mib = p.memory_mib / job.replicas;
    }
    job.queue = queues.empty() ? "" : queues[i % queues.size()].name;
    job.comm = CommIntensity(p.workload);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

namespace {

// How much slower a placement runs than the tightest one the cluster could have offered.
double PlacementFactor(Level level, double comm, const ReplayOptions& o) {
  double f = 1;
  if (level >= Level::kSocket) f *= o.cross_switch;
  if (level >= Level::kNode) f *= o.cross_socket;
  if (level >= Level::kRack) f *= 1 + (o.cross_node - 1) * comm;
  return f;
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

}  // namespace

ReplayResult RunReplay(const Cluster& cluster, const std::vector<QueueSpec>& queue_specs,
                       const std::vector<ReplayJob>& input, const Policy& policy,
                       const ReplayOptions& options, const std::function<void(double)>& progress) {
  std::vector<QueueSpec> queues = queue_specs;
  if (queues.empty()) queues.push_back({"default", 1, -1, {}});
  Scheduler engine(&cluster, queues, policy);
  ReplayResult result;
  result.policy = policy.name;
  for (const QueueSpec& q : queues) result.queues.push_back(q.name);
  if (!engine.error().empty()) return result;

  std::vector<TracePod> shapes;
  for (const ReplayJob& j : input) shapes.push_back(j.pod);
  const std::vector<TypicalPod> typical = WorkloadTypicalPods(shapes);
  engine.SetWorkloadModel(typical);
  const FragmentationModel frag(&cluster, typical);

  std::vector<size_t> order(input.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return input[a].pod.submit_time < input[b].pod.submit_time;
  });
  // Shortest-first ranks known durations into priorities (and never preempts for them).
  std::vector<int> sjf_priority(input.size(), 0);
  if (options.shortest_first) {
    std::vector<size_t> by_length = order;
    std::stable_sort(by_length.begin(), by_length.end(), [&](size_t a, size_t b) {
      return input[a].pod.duration < input[b].pod.duration;
    });
    for (size_t r = 0; r < by_length.size(); ++r)
      sjf_priority[by_length[r]] = 1000 * static_cast<int>(by_length.size() - r);
  }

  struct Run {
    size_t input = 0;
    double remaining = 0;  // ideal seconds of work left
    double run_start = 0;
    double slowdown = 1;
    int token = 0;  // completions from an earlier run are stale
  };
  std::map<int, Run> runs;  // by engine job id
  struct Event {
    double time;
    int kind;  // 0: completion, 1: a preempted victim stops
    int job;
    int token;
    bool operator>(const Event& o) const { return time > o.time; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  result.jobs.resize(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    JobOutcome& o = result.jobs[i];
    o.name = input[i].pod.name;
    o.queue = input[i].queue.empty() ? queues[0].name : input[i].queue;
    o.submit = input[i].pod.submit_time;
  }

  const double capacity = cluster.gpu_count();
  auto start_job = [&](const Decision& d, double now) {
    Run& run = runs.at(d.job);
    const ReplayJob& job = input[run.input];
    const JobRecord* rec = engine.job(d.job);
    const int gpus = job.pod.gpu_milli == 1000 ? job.pod.gpus * rec->replicas : 0;
    run.slowdown =
        gpus > 1
            ? PlacementFactor(PlacedLevel(engine.allocator(), d.placements), job.comm, options) /
                  PlacementFactor(IdealLevel(engine.allocator(), gpus), job.comm, options)
            : 1;
    run.slowdown = std::max(1.0, run.slowdown);
    run.run_start = now;
    ++run.token;
    JobOutcome& o = result.jobs[run.input];
    if (o.first_start < 0) o.first_start = now;
    o.slowdown = run.slowdown;
    events.push({now + run.remaining * run.slowdown, 0, d.job, run.token});
  };
  auto handle = [&](const std::vector<Decision>& decisions, double now) {
    for (const Decision& d : decisions) {
      if (d.kind == Decision::Kind::kStart) {
        start_job(d, now);
      } else {
        ++result.preemptions;
        events.push({now + d.grace_period_s, 1, d.job, runs.at(d.job).token});
      }
    }
  };

  size_t next = 0;
  size_t steps = 0;
  const size_t sample_every =
      std::max<size_t>(1, 2 * input.size() / std::max(1, options.timeline_points));
  double util_time = 0, util_area = 0, last_t = 0, last_util = 0;
  while (next < order.size() || !events.empty()) {
    const double t_arrival = next < order.size() ? input[order[next]].pod.submit_time : 1e300;
    const double t_event = events.empty() ? 1e300 : events.top().time;
    const double now = std::min(t_arrival, t_event);
    while (next < order.size() && input[order[next]].pod.submit_time <= now) {
      const size_t i = order[next++];
      const ReplayJob& job = input[i];
      JobSpec spec;
      spec.name = job.pod.name;
      spec.queue = result.jobs[i].queue;
      spec.user = job.pod.qos;
      spec.priority = options.shortest_first ? sjf_priority[i] : job.priority;
      spec.preemptible = !options.shortest_first;
      TaskGroup g;
      g.replicas = job.replicas;
      if (job.pod.gpus == 1 && job.pod.gpu_milli < 1000)
        g.demand.gpu_milli = job.pod.gpu_milli;
      else
        g.demand.gpus = job.pod.gpus;
      g.demand.models = job.pod.models;
      g.demand.cpu_milli = job.pod.cpu_milli;
      g.demand.memory_mib = job.pod.memory_mib;
      spec.groups.push_back(g);
      std::string why;
      const int id = engine.Submit(spec, now, &why);
      if (id >= 0) runs[id] = {i, job.pod.duration, 0, 1, 0};
    }
    while (!events.empty() && events.top().time <= now) {
      const Event e = events.top();
      events.pop();
      Run& run = runs.at(e.job);
      if (e.token != run.token) continue;
      if (e.kind == 0) {
        engine.Finish(e.job, now);
        result.jobs[run.input].end = now;
      } else {
        // The victim loses the work since its last checkpoint.
        const double done = (now - run.run_start) / run.slowdown;
        const double kept =
            options.checkpoint_interval_s > 0
                ? std::floor(done / options.checkpoint_interval_s) * options.checkpoint_interval_s
                : 0;
        run.remaining = std::max(0.0, run.remaining - kept);
        ++run.token;
        ++result.jobs[run.input].preemptions;
        handle(engine.Stopped(e.job, now), now);
      }
    }
    handle(engine.Schedule(now), now);

    // Sharing anomaly: a job within its VC's guarantee waits while other VCs borrow.
    const std::vector<QueueStatus> status = engine.Queues();
    double borrowed = 0, used = 0;
    for (const QueueStatus& q : status) borrowed += q.borrowed_gpus, used += q.usage_gpus;
    for (size_t q = 0; q < status.size() && borrowed > 0; ++q) {
      const double guaranteed_use = status[q].usage_gpus - status[q].borrowed_gpus;
      if (status[q].pending == 0 || status[q].borrowed_gpus >= borrowed) continue;
      for (int id : engine.pending(static_cast<int>(q))) {
        const JobRecord& rec = *engine.job(id);
        const double need =
            rec.spec.groups[0].replicas * GpuEquivalents(cluster, rec.spec.groups[0].demand);
        if (guaranteed_use + need <= status[q].guarantee_gpus + 1e-9)
          result.jobs[runs.at(id).input].anomaly = true;
      }
    }
    const double util = 100.0 * used / std::max(1.0, capacity);
    util_area += last_util * (now - last_t);
    util_time += now - last_t;
    last_t = now;
    last_util = util;
    if (++steps % sample_every == 0 || (next == order.size() && events.empty())) {
      TimelinePoint p;
      p.time = now;
      p.utilization = util;
      p.fragmentation = 100.0 * frag.ClusterFragmentation(engine.allocator()) / (1000.0 * capacity);
      for (const QueueStatus& q : status) {
        p.queue_usage.push_back(q.usage_gpus);
        p.queue_fair_share.push_back(q.fair_share_gpus);
      }
      result.timeline.push_back(std::move(p));
    }
    if (progress && steps % 256 == 0)
      progress(static_cast<double>(next) / std::max<size_t>(1, order.size()));
    // Nothing left to happen: the remaining jobs can never fit.
    if (next == order.size() && events.empty()) break;
  }

  std::vector<double> jct, wait;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_queue;
  for (const JobOutcome& o : result.jobs) {
    if (o.end < 0) {
      ++result.unfinished;
      continue;
    }
    jct.push_back(o.end - o.submit);
    wait.push_back(o.first_start - o.submit);
    by_queue[o.queue].first.push_back(o.end - o.submit);
    by_queue[o.queue].second.push_back(o.first_start - o.submit);
    result.makespan = std::max(result.makespan, o.end);
    result.anomalies += o.anomaly;
  }
  result.jct = Summarize(jct);
  result.wait = Summarize(wait);
  for (const auto& [q, v] : by_queue)
    result.per_queue[q] = {Summarize(v.first), Summarize(v.second)};
  result.mean_utilization = util_time > 0 ? util_area / util_time : 0;
  if (progress) progress(1);
  return result;
}

}  // namespace berth
