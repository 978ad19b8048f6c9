// `berth bench alloc`: allocate+release timings of the core allocator.
//
// The cluster is first filled to about half with a random mix of 1-8 GPU jobs, so the free
// lists are fragmented as in a running cluster; then each scenario allocates and releases the
// same request in a loop. Figures are per allocate+release pair, from one run, side by side.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "config/config_error.h"
#include "core/allocator.h"
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
      if (g.mig_enabled && g.mig_layout.empty()) return cluster.FindModel(g.model)->mig_profiles[0].name;
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
  for (int attempts = 0; used < target && attempts < 4 * target; ++attempts) {
    AllocationRequest fill;
    fill.demand.gpus = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
    fill.demand.cpu_milli = 1000 * fill.demand.gpus;
    fill.demand.memory_mib = 8192 * fill.demand.gpus;
    if (alloc->Allocate(fill)) used += fill.demand.gpus;
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
              << std::left << std::setw(16) << "scenario" << std::right << std::setw(12)
              << "ns/op" << std::setw(12) << "ops" << "\n";
  for (const Scenario& s : scenarios) {
    int failures = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < s.iterations; ++i) {
      const auto id = alloc->Allocate(s.request);
      if (id) alloc->Release(*id);
      else ++failures;
    }
    const double ns = std::chrono::duration<double, std::nano>(
                          std::chrono::steady_clock::now() - start).count() / s.iterations;
    results.push_back({{"name", s.name}, {"ns_per_op", ns}, {"ops", s.iterations},
                       {"failed", failures}});
    if (!json)
      std::cout << std::left << std::setw(16) << s.name << std::right << std::setw(12)
                << std::fixed << std::setprecision(0) << ns << std::setw(12) << s.iterations
                << (failures ? "  (" + std::to_string(failures) + " did not fit)" : "") << "\n";
  }
  if (json) std::cout << nlohmann::json{{"results", results}}.dump(2) << "\n";
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
  cmd->add_option("--cluster", *cluster, "Cluster file or openb node list instead of the default");
  cmd->add_option("--iterations", *iterations, "Allocate+release pairs per scenario")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([=] { RunBenchAlloc(*cluster, *json, *iterations); });
}

}  // namespace berth
