#include "sim/replay.h"

#include <gtest/gtest.h>

#include "core/synthetic_cluster.h"
#include "sim/synthetic_trace.h"

namespace berth {
namespace {

ReplayJob Job(const std::string& name, double submit, double duration, int gpus,
              const std::string& queue = "") {
  ReplayJob j;
  j.spec.name = name;
  j.spec.queue = queue;
  j.spec.priority = 100;
  TaskGroup g;
  g.demand.gpus = gpus;
  j.spec.groups.push_back(g);
  j.submit = submit;
  j.duration = duration;
  return j;
}

ReplayResult Replay(const Cluster& cluster, const std::vector<QueueSpec>& queues,
                    const std::vector<ReplayJob>& jobs, const std::vector<ReplayEvent>& events) {
  Policy policy;
  BuiltinPolicy("berth", &policy);
  ReplayResult r = RunReplay(cluster, queues, jobs, events, policy, ReplayOptions(), nullptr);
  EXPECT_EQ(r.error, "");
  return r;
}

TEST(ReplayTest, UtilizationFollowsTheSyntheticLoad) {
  const Cluster cluster = SyntheticDgxCluster(4, 4, 0);  // 32 GPUs: 64-GPU gangs are cut
  SyntheticOptions o;
  o.jobs = 3000;
  o.load = 0.5;
  const ReplayResult r = Replay(cluster, {}, SyntheticJobs(cluster, {}, o), {});
  EXPECT_NEAR(r.mean_utilization, 50, 5);
  EXPECT_EQ(r.utilization_from, r.jobs.front().submit);
  EXPECT_LT(r.utilization_to, r.makespan);  // the drain is left out
}

TEST(ReplayTest, CancelEndsPendingAndRunningJobs) {
  const Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  const std::vector<ReplayJob> jobs = {Job("big", 0, 3600, 8), Job("next", 10, 60, 8),
                                       Job("dropped", 20, 60, 8)};
  ReplayEvent cancel_pending{50, ReplayEvent::Kind::kCancel, -1, -1, 2};
  ReplayEvent cancel_running{100, ReplayEvent::Kind::kCancel, -1, -1, 0};
  const ReplayResult r = Replay(cluster, {}, jobs, {cancel_running, cancel_pending});
  EXPECT_EQ(r.jobs[2].end_kind, "cancelled");
  EXPECT_EQ(r.jobs[2].end, 50);
  EXPECT_TRUE(r.jobs[2].runs.empty());
  EXPECT_EQ(r.jobs[0].end_kind, "cancelled");
  ASSERT_EQ(r.jobs[0].runs.size(), 1u);
  EXPECT_EQ(r.jobs[0].runs[0].stop, 100);
  EXPECT_EQ(r.jobs[0].runs[0].stop_kind, "cancelled");
  EXPECT_EQ(r.jobs[1].first_start, 100);  // on the GPUs the cancel freed
  EXPECT_EQ(r.jobs[1].end_kind, "succeeded");
  EXPECT_EQ(r.cancelled, 2);
  EXPECT_EQ(r.makespan, 160);  // JCT and makespan count succeeded jobs only
}

TEST(ReplayTest, EvictedJobLosesWorkSinceItsCheckpoint) {
  const Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  const std::vector<ReplayJob> jobs = {Job("j", 0, 3000, 8)};
  const ReplayResult r =
      Replay(cluster, {}, jobs,
             {{2000, ReplayEvent::Kind::kFailNode, 0}, {2500, ReplayEvent::Kind::kRecoverNode, 0}});
  const JobOutcome& j = r.jobs[0];
  ASSERT_EQ(j.runs.size(), 2u);
  EXPECT_EQ(j.runs[0].stop, 2000);
  EXPECT_EQ(j.runs[0].stop_kind, "evict");
  EXPECT_EQ(j.runs[1].start, 2500);
  EXPECT_EQ(j.evictions, 1);
  EXPECT_EQ(r.evictions, 1);
  EXPECT_EQ(j.end, 2500 + (3000 - 1800));  // the work after the 1800 s checkpoint is redone
}

TEST(ReplayTest, ReclaimingAGuaranteeWithinTheGracePeriodIsNoAnomaly) {
  const Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  const std::vector<QueueSpec> queues = {{"a", 1, -1, {}}, {"b", 1, -1, {{"dgx-a100/node", 1}}}};
  std::vector<ReplayJob> jobs = {Job("a1", 0, 36000, 4, "a"), Job("b1", 600, 3600, 8, "b")};
  jobs[0].spec.grace_period_s = 300;
  const ReplayResult r = Replay(cluster, queues, jobs, {});
  EXPECT_EQ(r.jobs[1].first_start, 900);
  EXPECT_NEAR(r.jobs[1].guaranteed_wait_s, 300, 1e-6);
  EXPECT_FALSE(r.jobs[1].anomaly);
  EXPECT_EQ(r.anomaly_tolerance_s, 301);
  EXPECT_EQ(r.anomalies, 0);
  EXPECT_EQ(r.jobs[0].runs[0].told_to_stop, 600);
  EXPECT_EQ(r.jobs[0].runs[0].stop_kind, "preempt");
}

}  // namespace
}  // namespace berth
