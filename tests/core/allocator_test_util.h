// Helpers shared by the allocator tests: loading example clusters, building requests and taking
// snapshots of the buddy allocator's free lists.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "config/vc_file.h"
#include "core/allocator.h"

namespace berth {

inline Cluster ExampleCluster(const std::string& name) {
  return LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/" + name);
}

inline std::vector<VirtualClusterSpec> ExampleVcs() {
  return LoadVcFile(std::string(BERTH_SOURCE_DIR) + "/examples/vcs.yaml");
}

// [pool][type] -> the maximal free cells, sorted.
using FreeLists = std::vector<std::vector<std::vector<int>>>;

inline FreeLists Snapshot(const Allocator& a) {
  FreeLists out(a.vcs().size() + 1);
  for (size_t pool = 0; pool < out.size(); ++pool) {
    out[pool].resize(a.tree().types().size());
    for (size_t t = 0; t < out[pool].size(); ++t) {
      out[pool][t] = a.buddy().free_list(static_cast<int>(pool), static_cast<int>(t));
      std::sort(out[pool][t].begin(), out[pool][t].end());
    }
  }
  return out;
}

inline AllocationRequest WholeGpus(int gpus, std::optional<Level> affinity = std::nullopt) {
  AllocationRequest r;
  r.demand.gpus = gpus;
  r.demand.affinity = affinity;
  return r;
}

inline AllocationRequest Gang(int replicas, int gpus, std::optional<Level> gang_affinity) {
  AllocationRequest r = WholeGpus(gpus);
  r.replicas = replicas;
  r.gang_affinity = gang_affinity;
  return r;
}

inline AllocationRequest Share(int milli, int64_t gpu_memory_mib = 0) {
  AllocationRequest r;
  r.demand.gpu_milli = milli;
  r.demand.gpu_memory_mib = gpu_memory_mib;
  return r;
}

inline AllocationRequest Mig(const std::string& profile) {
  AllocationRequest r;
  r.demand.mig_profile = profile;
  return r;
}

inline AllocationRequest CpuOnly(int64_t cpu_milli, int64_t memory_mib) {
  AllocationRequest r;
  r.demand.cpu_milli = cpu_milli;
  r.demand.memory_mib = memory_mib;
  return r;
}

inline AllocationRequest ForVc(AllocationRequest r, int vc, bool opportunistic = false) {
  r.vc = vc;
  r.opportunistic = opportunistic;
  return r;
}

inline AllocationRequest OnNode(AllocationRequest r, int node) {
  r.only_node = node;
  return r;
}

inline int VcIndex(const Allocator& a, const std::string& name) {
  for (size_t v = 0; v < a.vcs().size(); ++v)
    if (a.vcs()[v].name == name) return static_cast<int>(v);
  ADD_FAILURE() << "no VC " << name;
  return -1;
}

}  // namespace berth
