// Small openb-like clusters for the fragmentation and benchmark-policy tests: flat nodes (one
// socket, one PCIe switch) of GPU models "A" and "B", and helpers to place shares, whole GPUs
// and CPU on chosen nodes and to score candidates.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/flat_node.h"
#include "core/allocator.h"
#include "core/cluster.h"
#include "core/fragmentation.h"
#include "core/plugins/plugin.h"

namespace berth {

struct TestNode {
  int64_t cpu_milli = 64000;
  int gpus = 4;
  std::string model = "A";
  int64_t memory_mib = 256 * 1024;
};

inline Cluster OpenbTestCluster(const std::vector<TestNode>& nodes) {
  Cluster cluster;
  cluster.name = "openb-test";
  cluster.models = {GpuModel{"A", 0, {}}, GpuModel{"B", 0, {}}};
  for (size_t i = 0; i < nodes.size(); ++i)
    cluster.nodes.push_back(MakeFlatNode("n" + std::to_string(i), nodes[i].cpu_milli,
                                         nodes[i].memory_mib, nodes[i].gpus, nodes[i].model));
  return cluster;
}

inline Demand ShareDemand(int milli, int64_t cpu_milli = 1000) {
  Demand d;
  d.gpu_milli = milli;
  d.cpu_milli = cpu_milli;
  return d;
}

inline Demand WholeDemand(int gpus, int64_t cpu_milli = 1000) {
  Demand d;
  d.gpus = gpus;
  d.cpu_milli = cpu_milli;
  return d;
}

inline Demand CpuDemand(int64_t cpu_milli) {
  Demand d;
  d.cpu_milli = cpu_milli;
  return d;
}

// Places one replica of `demand` on `node`; returns the allocation id (fails the test if it
// does not fit).
inline int Place(Allocator* alloc, int node, const Demand& demand) {
  AllocationRequest req;
  req.demand = demand;
  req.only_node = node;
  std::string why;
  const std::optional<int> id = alloc->Allocate(req, &why);
  EXPECT_TRUE(id.has_value()) << why;
  return id.value_or(-1);
}

// The GPU of `node` that holds allocation `id`'s first replica.
inline int GpuOf(const Allocator& alloc, int id) {
  const Allocation* a = alloc.Find(id);
  return a == nullptr || a->replicas.empty() || a->replicas[0].gpus.empty()
             ? -1
             : a->replicas[0].gpus[0];
}

inline std::vector<int> FreeMilli(const Allocator& alloc, int node) {
  std::vector<int> free;
  for (size_t g = 0; g < alloc.cluster().nodes[node].gpus.size(); ++g)
    free.push_back(1000 - alloc.gpu_used_milli(node, static_cast<int>(g)));
  return free;
}

inline Candidate GpuCandidate(int node, std::vector<int> gpus) {
  Candidate c;
  c.node = node;
  c.gpus = std::move(gpus);
  c.tightness = c.gpus.size() == 1 ? Level::kGpu : Level::kNode;
  return c;
}

// A context for one replica of `group` on `alloc`.
inline PlacementContext ContextFor(const Allocator& alloc, const TaskGroup& group) {
  PlacementContext ctx;
  ctx.alloc = &alloc;
  ctx.group = &group;
  return ctx;
}

inline std::unique_ptr<ScorePlugin> MakeScoreOrDie(const std::string& name) {
  PluginConfig config;
  config.name = name;
  std::string error;
  std::unique_ptr<ScorePlugin> plugin = MakeScore(config, &error);
  EXPECT_NE(plugin, nullptr) << error;
  return plugin;
}

// A typical pod of the workload model: 1 CPU, `gpus` x `milli`, at `frequency`.
inline TypicalPod Typical(int gpus, int milli, double frequency) {
  TypicalPod t;
  t.cpu_milli = 1000;
  t.gpus = gpus;
  t.gpu_milli = milli;
  t.frequency = frequency;
  return t;
}

}  // namespace berth
