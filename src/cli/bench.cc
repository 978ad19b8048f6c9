// `berth bench alloc`: allocate+release timings of the core allocator.
//
// The cluster is first filled to about half with a random mix of 1-8 GPU jobs, so the free
// lists are fragmented as in a running cluster; then each scenario allocates and releases the
// same request in a loop. Figures are per allocate+release pair, from one run, side by side.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "config/config_error.h"
#include "config/limits.h"
#include "core/allocator.h"
#include "core/scheduler.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

struct Scenario {
  std::string name;
  AllocationRequest request;
  int iterations;
};

// The first MIG profile of a model whose GPUs have MIG enabled somewhere, or "".
std::string MigProfileToBench(const Cluster& cluster) {
  for (const Node& n : cluster.nodes)
    for (const Gpu& g : n.gpus)
      if (g.mig_enabled && g.mig_layout.empty())
        return cluster.FindModel(g.model)->mig_profiles[0].name;
  return "";
}

void RunBenchAlloc(const std::string& cluster_path, bool json, int iterations) {
  const Cluster cluster =
      cluster_path.empty() ? SyntheticDgxCluster(1250, 32, 10) : LoadClusterArgument(cluster_path);
  auto alloc = std::make_unique<Allocator>(&cluster, std::vector<VirtualClusterSpec>{});
  if (!alloc->error().empty()) throw ConfigError("cluster: " + alloc->error());

  std::mt19937 rng(42);
  const int target = cluster.gpu_count() / 2;
  int used = 0;
  // A cluster where these requests stop fitting (nodes without memory, say) would otherwise
  // cost 4 x target failed scans of every node: minutes on a large cluster.
  constexpr int kMostFailuresInARow = 64;
  for (int attempts = 0, failures = 0;
       used < target && attempts < 4 * target && failures < kMostFailuresInARow; ++attempts) {
    AllocationRequest fill;
    fill.demand.gpus = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
    fill.demand.cpu_milli = 1000 * fill.demand.gpus;
    fill.demand.memory_mib = 8192 * fill.demand.gpus;
    if (alloc->Allocate(fill)) {
      used += fill.demand.gpus;
      failures = 0;
    } else {
      ++failures;
    }
  }

  std::vector<Scenario> scenarios;
  auto whole = [&](const std::string& name, int gpus, int replicas, int n) {
    Scenario s{name, {}, n};
    s.request.replicas = replicas;
    s.request.demand.gpus = gpus;
    s.request.demand.cpu_milli = 4000 * gpus;
    s.request.demand.memory_mib = 16384 * gpus;
    scenarios.push_back(s);
  };
  whole("alloc-1gpu", 1, 1, iterations);
  whole("alloc-2gpu", 2, 1, iterations);
  whole("alloc-4gpu", 4, 1, iterations);
  whole("alloc-8gpu", 8, 1, iterations);
  whole("alloc-gang64", 8, 8, std::max(1, iterations / 10));
  Scenario share{"alloc-share", {}, iterations};
  share.request.demand.gpu_milli = 500;
  share.request.demand.gpu_memory_mib = 8192;
  share.request.demand.cpu_milli = 2000;
  scenarios.push_back(share);
  const std::string profile = MigProfileToBench(cluster);
  if (!profile.empty()) {
    Scenario mig{"alloc-mig", {}, iterations};
    mig.request.demand.mig_profile = profile;
    mig.request.demand.cpu_milli = 2000;
    scenarios.push_back(mig);
  }

  nlohmann::json results = nlohmann::json::array();
  if (!json)
    std::cout << "cluster: " << cluster.nodes.size() << " nodes, " << cluster.gpu_count()
              << " GPUs, " << used << " GPUs in use before timing\n"
              << std::left << std::setw(16) << "scenario" << std::right << std::setw(12) << "ns/op"
              << std::setw(12) << "ops"
              << "\n";
  for (const Scenario& s : scenarios) {
    int failures = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < s.iterations; ++i) {
      const auto id = alloc->Allocate(s.request);
      if (id)
        alloc->Release(*id);
      else
        ++failures;
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        s.iterations;
    results.push_back(
        {{"name", s.name}, {"ns_per_op", ns}, {"ops", s.iterations}, {"failed", failures}});
    if (!json)
      std::cout << std::left << std::setw(16) << s.name << std::right << std::setw(12) << std::fixed
                << std::setprecision(0) << ns << std::setw(12) << s.iterations
                << (failures ? "  (" + std::to_string(failures) + " did not fit)" : "") << "\n";
  }
  if (json) std::cout << JsonText(nlohmann::json{{"results", results}}) << "\n";
}

// Cycle time by queue depth: a full cluster with `pending` jobs waiting, of many shapes (1-8
// GPUs, gangs of 8-GPU replicas, several CPU and memory sizes, 37 users, every
// queue). Each cycle a few running jobs end and as many new jobs arrive, then one Schedule call
// (one cycle) is timed. Decisions/s here counts the starts and preemptions those cycles make.
struct DeepQueueFigures {
  double cycle_ms_p50 = 0, cycle_ms_p99 = 0, decisions_per_sec = 0;
  size_t pending = 0;  // the fewest jobs waiting at the start of any timed cycle
  int cycles = 0, decisions = 0;
};

DeepQueueFigures RunDeepQueue(const Cluster& cluster, const std::vector<QueueSpec>& queues,
                              const Policy& policy, int pending_target, bool progress) {
  Scheduler engine(&cluster, queues, policy);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  int serial = 0;
  auto submit = [&](double now) {
    JobSpec spec;
    spec.name = "deep-" + std::to_string(serial);
    spec.queue = queues[serial % queues.size()].name;
    spec.user = "user-" + std::to_string(serial % 37);
    spec.priority = 100;
    ++serial;
    TaskGroup group;
    if (unit(rng) < 0.9) {
      group.demand.gpus = std::uniform_int_distribution<int>(1, 8)(rng);
    } else {
      group.demand.gpus = 8;
      group.replicas = std::uniform_int_distribution<int>(2, 4)(rng);
    }
    group.demand.cpu_milli =
        1000 * std::uniform_int_distribution<int>(2, 6)(rng) * group.demand.gpus;
    group.demand.memory_mib = 16384 * (1 << std::uniform_int_distribution<int>(0, 2)(rng));
    spec.groups.push_back(group);
    std::string why;
    engine.Submit(spec, now, &why);
  };
  std::vector<int> running;
  auto handle = [&](const std::vector<Decision>& decisions, double now) {
    for (const Decision& d : decisions)
      if (d.kind == Decision::Kind::kStart) {
        running.push_back(d.job);
      } else {
        std::erase(running, d.job);
        for (const Decision& s : engine.Stopped(d.job, now)) running.push_back(s.job);
      }
  };
  // Fill: enough jobs to fill the cluster and leave `pending_target` waiting.
  const int fill = pending_target + cluster.gpu_count() / 2;
  for (int i = 0; i < fill; ++i) submit(0);
  handle(engine.Schedule(0), 0);

  DeepQueueFigures f;
  std::vector<double> cycle_ms;
  double busy_s = 0;
  f.pending = SIZE_MAX;
  const int cycles = 200;
  for (int c = 1; c <= cycles; ++c) {
    const double now = c;  // seconds: well under any reservation threshold
    for (int k = 0; k < 8 && !running.empty(); ++k) {
      const size_t at = std::uniform_int_distribution<size_t>(0, running.size() - 1)(rng);
      engine.Finish(running[at], now);
      running[at] = running.back();
      running.pop_back();
      submit(now);
    }
    size_t pending = 0;
    for (size_t q = 0; q < queues.size(); ++q) pending += engine.pending_count(static_cast<int>(q));
    f.pending = std::min(f.pending, pending);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Decision> decisions = engine.Schedule(now);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    busy_s += s;
    cycle_ms.push_back(1000 * s);
    f.decisions += static_cast<int>(decisions.size());
    handle(decisions, now);
    if (progress && c % (cycles / 10) == 0)
      std::cerr << "\r  deep queue: " << (100 * c / cycles) << "% of " << cycles << " cycles"
                << std::flush;
  }
  if (progress) std::cerr << "\r";
  std::sort(cycle_ms.begin(), cycle_ms.end());
  f.cycles = cycles;
  f.cycle_ms_p50 = cycle_ms[cycle_ms.size() / 2];
  f.cycle_ms_p99 = cycle_ms[static_cast<size_t>(0.99 * (cycle_ms.size() - 1))];
  f.decisions_per_sec = busy_s > 0 ? f.decisions / busy_s : 0;
  return f;
}

// `count` queues, each guaranteed an equal slice of 40% of the GPU nodes as whole-node cells:
// of every node shape, since a shape's node cell type holds only nodes of that shape. Nodes
// without a shape (openb lists, explicit cells) get no guarantee.
std::vector<QueueSpec> BenchQueues(const Cluster& cluster, int count) {
  std::map<std::string, int> nodes_by_shape;
  for (const Node& n : cluster.nodes)
    if (!n.gpus.empty() && !n.shape.empty()) ++nodes_by_shape[n.shape];
  std::vector<QueueSpec> queues;
  for (int q = 0; q < count; ++q) {
    QueueSpec spec;
    spec.name = "q" + std::to_string(q);
    for (const auto& [shape, nodes] : nodes_by_shape)
      if (const int per_queue = nodes * 2 / 5 / count; per_queue > 0)
        spec.guarantees.push_back({shape + "/node", per_queue});
    queues.push_back(spec);
  }
  return queues;
}

// A stream of mixed jobs through the engine with the default policy: 70% 1-GPU, 20% 2-8 GPUs,
// 10% gangs of 16-64 GPUs (8-GPU replicas), spread over the queues, with departures that keep
// the cluster between 85% and 90% allocated. One decision = one Schedule call for one job.
void RunBenchSchedule(const std::string& cluster_path, int queue_count, int job_count, int pending,
                      bool json) {
  const Cluster cluster =
      cluster_path.empty() ? SyntheticDgxCluster(1250, 32, 0) : LoadClusterArgument(cluster_path);
  const std::vector<QueueSpec> queues = BenchQueues(cluster, queue_count);
  Policy policy;
  BuiltinPolicy("berth", &policy);
  Scheduler engine(&cluster, queues, policy);
  if (!engine.error().empty()) throw ConfigError("bench schedule: " + engine.error());

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  const double capacity = cluster.gpu_count();
  double used = 0;
  std::vector<int> running;
  std::vector<double> latencies_us;
  // The same latencies by kind of job, to show where a tail comes from.
  const char* kinds[] = {"1 GPU", "2-8 GPUs", "gang"};
  std::vector<double> by_kind[3];
  int placed = 0, unplaced = 0, preemptions = 0;
  const auto begin = std::chrono::steady_clock::now();
  double busy_s = 0;
  for (int i = 0; i < job_count; ++i) {
    JobSpec spec;
    spec.name = "job-" + std::to_string(i);
    spec.queue = "q" + std::to_string(i % queue_count);
    spec.user = "user-" + std::to_string(i % 37);
    spec.priority = 100;
    TaskGroup group;
    const double r = unit(rng);
    int kind = 0;
    if (r < 0.7) {
      group.demand.gpus = 1;
    } else if (r < 0.9) {
      group.demand.gpus = std::uniform_int_distribution<int>(2, 8)(rng);
      kind = 1;
    } else {
      group.demand.gpus = 8;
      group.replicas = std::uniform_int_distribution<int>(2, 8)(rng);
      kind = 2;
    }
    group.demand.cpu_milli = 4000 * group.demand.gpus;
    group.demand.memory_mib = 32768 * group.demand.gpus;
    spec.groups.push_back(group);
    std::string why;
    const int id = engine.Submit(spec, i, &why);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Decision> decisions = engine.Schedule(i);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    latencies_us.push_back(us);
    by_kind[kind].push_back(us);
    busy_s += us / 1e6;
    for (const Decision& d : decisions) {
      if (d.kind == Decision::Kind::kPreempt) {
        ++preemptions;
        const JobRecord* victim = engine.job(d.job);
        used -= victim->gpu_equivalents;
        running.erase(std::remove(running.begin(), running.end(), d.job), running.end());
        for (const Decision& s : engine.Stopped(d.job, i)) {
          if (s.job == d.job) continue;  // a moved job started again: dropped below all the same
          running.push_back(s.job);
          used += engine.job(s.job)->gpu_equivalents;
          ++placed;
        }
        engine.Finish(d.job, i);  // the bench drops preempted jobs instead of requeueing them
      } else {
        running.push_back(d.job);
        used += engine.job(d.job)->gpu_equivalents;
        ++placed;
      }
    }
    if (engine.job(id)->state == JobState::kPending) {
      engine.Finish(id, i);
      ++unplaced;
    }
    while (used > 0.9 * capacity && !running.empty()) {
      const size_t k = std::uniform_int_distribution<size_t>(0, running.size() - 1)(rng);
      const int victim = running[k];
      used -= engine.job(victim)->gpu_equivalents;
      engine.Finish(victim, i);
      running[k] = running.back();
      running.pop_back();
    }
    if (!json && job_count >= 10 && i % (job_count / 10) == 0)
      std::cerr << "\r  " << (100 * i / job_count) << "% (" << i << " jobs)" << std::flush;
  }
  if (!json) std::cerr << "\r";
  DeepQueueFigures deep;
  if (pending > 0) deep = RunDeepQueue(cluster, queues, policy, pending, !json);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  auto pct_of = [](std::vector<double>& v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
  };
  auto pct = [&](double p) { return pct_of(latencies_us, p); };
  const double per_sec = busy_s > 0 ? job_count / busy_s : 0;
  if (json) {
    std::cout << nlohmann::json{{"decisions_per_sec", per_sec},
                                {"p50_us", pct(0.5)},
                                {"p99_us", pct(0.99)},
                                {"jobs", job_count},
                                {"placed", placed},
                                {"unplaced", unplaced},
                                {"preemptions", preemptions},
                                {"gpus", cluster.gpu_count()},
                                {"queues", queue_count},
                                {"pending", deep.pending},
                                {"cycle_ms_p50", deep.cycle_ms_p50},
                                {"cycle_ms_p99", deep.cycle_ms_p99},
                                {"deep_decisions_per_sec", deep.decisions_per_sec},
                                {"wall_s", wall_s}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "cluster: " << cluster.nodes.size() << " nodes, " << cluster.gpu_count() << " GPUs; "
            << queue_count << " queues; policy " << policy.name << "\n"
            << "jobs: " << job_count << " (" << placed << " placed, " << unplaced
            << " did not fit, " << preemptions << " preemptions)\n"
            << std::fixed << std::setprecision(1) << "decisions/s: " << per_sec
            << "   p50: " << pct(0.5) << " us   p99: " << pct(0.99) << " us\n";
  for (int k = 0; k < 3; ++k)
    std::cout << "  " << std::left << std::setw(9) << kinds[k] << std::right << std::setw(6)
              << by_kind[k].size() << " jobs   p50: " << std::setw(7) << pct_of(by_kind[k], 0.5)
              << " us   p99: " << std::setw(7) << pct_of(by_kind[k], 0.99) << " us\n";
  if (pending > 0)
    std::cout << "deep queue: " << std::setprecision(0) << deep.pending << " pending, "
              << deep.cycles << " cycles   cycle p50: " << std::setprecision(2) << deep.cycle_ms_p50
              << " ms   p99: " << deep.cycle_ms_p99 << " ms\n"
              << std::setprecision(1) << "  decisions/s at that depth: " << deep.decisions_per_sec
              << " (" << deep.decisions << " decisions), " << std::setprecision(2)
              << (per_sec > 0 ? deep.decisions_per_sec / per_sec : 0)
              << "x the empty-queue figure\n";
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks that print figures");
  bench->require_subcommand(1);
  auto* cmd = bench->add_subcommand(
      "alloc", "Allocate+release timings (default: 1,250 DGX-like nodes, 10,000 GPUs)");
  auto cluster = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto iterations = std::make_shared<int>(20000);
  cmd->add_option("--cluster", *cluster, "Cluster file or openb node list instead of the default")
      ->check(NonEmptyPath());
  cmd->add_option("--iterations", *iterations, "Allocate+release pairs per scenario, up to 10^7")
      ->check(IntegerIn(1, 10'000'000));
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([=] { RunBenchAlloc(*cluster, *json, *iterations); });

  auto* sched = bench->add_subcommand(
      "schedule", "Scheduling decisions per second and latency with the default policy");
  auto s_cluster = std::make_shared<std::string>();
  auto s_queues = std::make_shared<int>(10);
  auto s_jobs = std::make_shared<int>(20000);
  auto s_json = std::make_shared<bool>(false);
  auto s_pending = std::make_shared<int>(0);
  sched->add_option("--cluster", *s_cluster, "Cluster file instead of 1,250 DGX-like nodes")
      ->check(NonEmptyPath());
  sched
      ->add_option("--pending", *s_pending,
                   "Also time cycles with this many jobs waiting (deep queue), up to 100000")
      ->check(IntegerIn(0, 100000));
  sched->add_option("--queues", *s_queues, "Queues (virtual clusters), up to the queues bound")
      ->check(UpToLimit(1, &limits::Limits::queues));
  sched->add_option("--jobs", *s_jobs, "Jobs in the stream, up to the jobs bound (--limit)")
      ->check(UpToLimit(1, &limits::Limits::jobs));
  sched->add_flag("--json", *s_json, "Print JSON");
  sched->callback([=] { RunBenchSchedule(*s_cluster, *s_queues, *s_jobs, *s_pending, *s_json); });
}

}  // namespace berth
