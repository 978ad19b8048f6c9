// A small harness for plugin tests: a cluster, an allocator holding some allocations, and the
// context a plugin reads, built through the registry as the pipeline builds plugins.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/plugins/plugin.h"
#include "core/synthetic_cluster.h"

namespace berth {

class PluginHarness {
 public:
  explicit PluginHarness(Cluster cluster) : cluster_(std::move(cluster)) {
    alloc_ = std::make_unique<Allocator>(&cluster_, std::vector<VirtualClusterSpec>{});
    EXPECT_EQ(alloc_->error(), "");
    job.name = "job";
    job.groups.resize(1);
    job.groups[0].name = "main";
  }
  PluginHarness(const PluginHarness&) = delete;
  PluginHarness& operator=(const PluginHarness&) = delete;

  Cluster& cluster() { return cluster_; }
  Allocator& alloc() { return *alloc_; }
  TaskGroup& group() { return job.groups[0]; }
  Demand& demand() { return job.groups[0].demand; }

  // Places one replica of `gpus` whole GPUs (or `milli` of one) on `node`; its GPUs.
  std::vector<int> Take(int node, int gpus, int milli = 0, int64_t cpu_milli = 0,
                        int64_t memory_mib = 0) {
    AllocationRequest r;
    r.demand.gpus = gpus;
    r.demand.gpu_milli = milli;
    r.demand.cpu_milli = cpu_milli;
    r.demand.memory_mib = memory_mib;
    r.only_node = node;
    std::string why;
    auto id = alloc_->Allocate(r, &why);
    EXPECT_TRUE(id.has_value()) << why;
    if (!id) return {};
    return alloc_->Find(*id)->replicas[0].gpus;
  }

  // Records a replica of this job on `node` (what ctx.placed holds).
  void Placed(int node) {
    ReplicaPlacement r;
    r.node = node;
    placed.push_back(r);
  }

  PlacementContext ctx() {
    PlacementContext c;
    c.alloc = alloc_.get();
    c.telemetry = has_telemetry ? &telemetry : nullptr;
    c.policy = &policy;
    c.job = &job;
    c.group = &job.groups[0];
    c.placed = &placed;
    return c;
  }

  // Telemetry sized to the cluster, every value unknown.
  Telemetry& Observe() {
    has_telemetry = true;
    telemetry.gpus.assign(cluster_.nodes.size(), {});
    for (size_t n = 0; n < cluster_.nodes.size(); ++n)
      telemetry.gpus[n].resize(cluster_.nodes[n].gpus.size());
    telemetry.node_images.assign(cluster_.nodes.size(), {});
    return telemetry;
  }

  JobSpec job;
  Policy policy;
  Telemetry telemetry;
  bool has_telemetry = false;
  std::vector<ReplicaPlacement> placed;

 private:
  Cluster cluster_;
  std::unique_ptr<Allocator> alloc_;
};

inline PluginConfig Config(const std::string& name, std::map<std::string, double> params = {}) {
  PluginConfig c;
  c.name = name;
  c.params = std::move(params);
  return c;
}

inline std::unique_ptr<FilterPlugin> Filter(const std::string& name,
                                            std::map<std::string, double> params = {}) {
  std::string error;
  auto f = MakeFilter(Config(name, std::move(params)), &error);
  EXPECT_NE(f, nullptr) << error;
  return f;
}

inline std::unique_ptr<ScorePlugin> Score(const std::string& name,
                                          std::map<std::string, double> params = {}) {
  std::string error;
  auto s = MakeScore(Config(name, std::move(params)), &error);
  EXPECT_NE(s, nullptr) << error;
  return s;
}

inline Candidate Cand(int node, std::vector<int> gpus, Level tightness = Level::kNode) {
  Candidate c;
  c.node = node;
  c.gpus = std::move(gpus);
  c.tightness = tightness;
  return c;
}

}  // namespace berth
