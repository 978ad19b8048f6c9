#include "sim/synthetic_trace.h"

#include <gtest/gtest.h>

#include "core/synthetic_cluster.h"

namespace berth {
namespace {

// GPU-seconds the jobs ask for over the cluster's GPU-seconds while they arrive.
double OfferedLoad(const Cluster& cluster, const std::vector<ReplayJob>& jobs) {
  double work = 0;
  for (const ReplayJob& j : jobs)
    for (const TaskGroup& g : j.spec.groups) work += g.replicas * g.demand.gpus * j.duration;
  const double window = jobs.back().submit - jobs.front().submit;
  return work / (cluster.gpu_count() * window);
}

TEST(SyntheticTraceTest, OffersTheLoadItSays) {
  SyntheticOptions o;
  o.jobs = 40000;
  o.load = 1.1;
  // On one 8-GPU node every gang is cut to the node; on 512 GPUs none is.
  for (const int nodes : {1, 64}) {
    const Cluster cluster = SyntheticDgxCluster(nodes, 8, 0);
    const std::vector<ReplayJob> jobs = SyntheticJobs(cluster, {}, o);
    EXPECT_NEAR(OfferedLoad(cluster, jobs), o.load, 0.05 * o.load) << nodes << " nodes";
    for (const ReplayJob& j : jobs) {
      const TaskGroup& g = j.spec.groups[0];
      EXPECT_LE(g.demand.gpus, 8);
      EXPECT_LE(g.replicas * g.demand.gpus, cluster.gpu_count());
    }
  }
}

}  // namespace
}  // namespace berth
