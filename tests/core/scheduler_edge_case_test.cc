// Elastic jobs, lending limits, model caps and runtime cluster changes under attack: each test
// reproduces a way an outside review broke them (or tried to).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "config/vc_file.h"
#include "core/scheduler.h"
#include "core/synthetic_cluster.h"
#include "scheduler_driver.h"

namespace berth {
namespace {

using test::Driver;
using test::Elastic;
using test::Job;
using test::Queue;

// ---------------------------------------------------------------------------------------------
// Adoption (a restarted server)

// A guaranteed placement that spans several of its queue's guarantee cells (the example's
// inference: "any 4 L40S GPUs", one cell per GPU, plus a socket of them) is adopted where it
// runs: each of its GPUs' cells is bound again (review: a restart lost such a job).
TEST(SchedulerAdoptTest, AGuaranteedPlacementSpanningSeveralCellsIsAdoptedWhereItRuns) {
  const Cluster cluster = LoadClusterFile(BERTH_SOURCE_DIR "/examples/multi-rack.yaml");
  const std::vector<QueueSpec> queues = VcQueues(LoadVcFile(BERTH_SOURCE_DIR "/examples/vcs.yaml"));
  Scheduler before(&cluster, queues, Driver::Berth());
  std::string why;
  std::vector<int> ids;
  for (int gpus : {2, 1, 4}) {
    ids.push_back(before.Submit(Job("inference", gpus), 0, &why));
    ASSERT_GE(ids.back(), 0) << why;
  }
  before.Schedule(1);
  Scheduler after(&cluster, queues, Driver::Berth());
  for (int id : ids) {
    const JobRecord& job = *before.job(id);
    ASSERT_EQ(job.state, JobState::kRunning) << id;
    const int adopted = after.Adopt(job.spec, job.placements, job.borrowed, 0, 1, &why);
    ASSERT_GE(adopted, 0) << id << ": " << why;
    EXPECT_EQ(after.job(adopted)->placements[0].gpus, job.placements[0].gpus) << id;
    EXPECT_EQ(after.job(adopted)->borrowed, job.borrowed) << id;
  }
  EXPECT_FALSE(before.job(ids[0])->borrowed);  // the 2 GPUs of the review's restart
  EXPECT_EQ(after.allocator().CheckConsistency(), "");
  EXPECT_EQ(after.CheckConsistency(), "");
}

// ---------------------------------------------------------------------------------------------
// Model caps

// A higher-priority job of a queue at its model cap preempts the queue's own lower-priority job
// on that model: the trial placement no longer counts the victim's GPUs against the cap.
TEST(SchedulerEdgeCaseTest, ModelCapBlocksPriorityPreemptionInsideTheQueue) {
  for (bool capped : {false, true}) {
    QueueSpec a = Queue("a");
    if (capped) a.model_caps["A100-80GB"] = 8;
    Driver d(1, 1, {a});
    JobSpec lo = Job("a", 8);
    const int l = d.Submit(lo);
    d.Cycle();
    ASSERT_EQ(d.J(l).state, JobState::kRunning);
    JobSpec hi = Job("a", 8);
    hi.priority = 10;
    const int h = d.Submit(hi);
    for (int i = 0; i < 20; ++i) d.Cycle(10);
    EXPECT_EQ(d.J(h).state, JobState::kRunning)
        << (capped ? "with" : "without") << " a model cap: " << d.J(h).reason;
    EXPECT_EQ(d.preempted_[l], 1) << (capped ? "with" : "without") << " a model cap";
  }
}

// At its model cap, a queue's elastic job shrinks for a higher-priority job of the queue instead
// of being preempted whole (the GPUs a shrink gives back were not credited against the cap).
TEST(SchedulerEdgeCaseTest, ModelCapShrinksOwnElasticBeforePreemptingIt) {
  Driver d(2, 2, {Queue("a")});
  QueueSpec a = Queue("a");
  a.model_caps["A100-80GB"] = 8;
  ASSERT_EQ(d.s_.SetQueues({a}), "");
  const int e = d.Submit(Elastic("a", 8, 2));
  d.Cycle(10);
  ASSERT_EQ(d.J(e).replicas, 8);
  JobSpec hi = Job("a", 4);
  hi.priority = 10;
  const int h = d.Submit(hi);
  for (int i = 0; i < 20; ++i) d.Cycle(10);
  EXPECT_EQ(d.J(h).state, JobState::kRunning) << d.J(h).reason;
  EXPECT_EQ(d.preempted_[e], 0);
  EXPECT_EQ(d.J(e).replicas, 4);
}

// A big job of a queue whose own small jobs hold its model cap never gets a reservation: it
// starves under a steady stream of small jobs, where without the cap it starts within the bound.
TEST(SchedulerEdgeCaseTest, ModelCapStarvesABigJob) {
  for (bool capped : {false, true}) {
    QueueSpec a = Queue("a");
    if (capped) a.model_caps["A100-80GB"] = 8;
    Driver d(1, 1, {a});
    // Eight small jobs always queued; each runs 300 s.
    for (int i = 0; i < 8; ++i) d.Submit(Job("a", 1), 300);
    d.Cycle();
    const int big = d.Submit(Job("a", 8), 300);
    d.on_finish_ = [&](int id) {
      if (id != big) d.Submit(Job("a", 1), 300);
    };
    for (int i = 0; i < 400 && d.J(big).state == JobState::kPending; ++i) d.Cycle(10);
    EXPECT_EQ(d.J(big).state, JobState::kRunning)
        << (capped ? "with" : "without") << " a model cap, after " << d.now_
        << " s: " << d.J(big).reason;
  }
}

// SetQueues lowers a model cap below what runs: accepted, jobs keep running, new ones wait.
TEST(SchedulerEdgeCaseTest, ModelCapLoweredWhileJobsRun) {
  QueueSpec a = Queue("a");
  Driver d(2, 2, {a});
  const int j1 = d.Submit(Job("a", 8));
  const int j2 = d.Submit(Job("a", 8));
  d.Cycle();
  a.model_caps["A100-80GB"] = 8;
  ASSERT_EQ(d.s_.SetQueues({a}), "");
  d.Check();
  d.s_.Finish(j1, d.now_);
  const int j3 = d.Submit(Job("a", 4));
  for (int i = 0; i < 5; ++i) d.Cycle();
  EXPECT_EQ(d.J(j2).state, JobState::kRunning);
  EXPECT_EQ(d.J(j3).state, JobState::kPending);
  EXPECT_NE(d.J(j3).reason.find("modelCaps"), std::string::npos) << d.J(j3).reason;
}

// ---------------------------------------------------------------------------------------------
// Lending limits

// A shrink re-places the kept replicas of a borrowed elastic job exactly; with a lending limit
// and the other node unhealthy, the allocator refuses that (and the restore), so the job keeps
// "running" with no allocation, and its GPUs are handed to the preemptor: double booking.
TEST(SchedulerEdgeCaseTest, ShrinkUnderALendingLimitLosesTheVictimsAllocation) {
  for (bool use_bad_gpu : {true, false}) {
    QueueSpec b = Queue("b", 1);
    b.guarantees[0].lending_limit = 0;
    Driver d(2, 2, {Queue("a"), b});
    const int e = d.Submit(Elastic("a", 16, 1));
    d.Cycle();
    ASSERT_EQ(d.J(e).state, JobState::kRunning);
    ASSERT_EQ(d.J(e).replicas, 8);  // the other node is b's unlent guarantee
    const int other = 1 - d.NodeOf(e);
    if (use_bad_gpu)
      d.Handle(d.s_.SetGpuBad(other, 0, true, d.now_));
    else
      d.Handle(d.s_.SetNodeCordoned(other, true, d.now_));
    d.Check();
    const int b1 = d.Submit(Job("b", 8));
    for (int i = 0; i < 10; ++i) {
      d.Cycle(10);
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << (use_bad_gpu ? "bad GPU" : "cordon") << ": e has "
                      << d.J(e).allocations.size() << " allocations, " << d.J(e).replicas
                      << " replicas, state " << JobStateName(d.J(e).state) << "; b1 "
                      << JobStateName(d.J(b1).state);
        return;
      }
    }
  }
}

// A third queue's guaranteed job must not bind the free cell that backs b's unlent guarantee:
// it reclaims the borrower's cell instead, since lendingLimit 0 promises b's own work never
// waits for a reclaim there.
TEST(SchedulerEdgeCaseTest, AnotherGuaranteeTakesTheUnlentCell) {
  QueueSpec b = Queue("b", 1);
  b.guarantees[0].lending_limit = 0;
  Driver d(2, 2, {Queue("a"), b, Queue("c", 1)});
  const int a1 = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(a1).state, JobState::kRunning);
  const int c1 = d.Submit(Job("c", 8));
  d.Cycle();
  const int b1 = d.Submit(Job("b", 8));
  d.Cycle();
  EXPECT_EQ(d.J(b1).state, JobState::kRunning)
      << "c1 " << JobStateName(d.J(c1).state) << ", a1 " << JobStateName(d.J(a1).state)
      << "; b1: " << d.J(b1).reason;
  for (int i = 0; i < 10; ++i) d.Cycle(10);
  EXPECT_EQ(d.J(c1).state, JobState::kRunning);
  EXPECT_EQ(d.J(b1).state, JobState::kRunning);
}

// Adding a lending limit while borrowers run is refused whole, though no guarantee becomes
// unsafe (the borrowers are preemptible; the limit only restricts new borrowing).
TEST(SchedulerEdgeCaseTest, SetQueuesRefusesALendingLimitOnABusyCluster) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  d.Submit(Job("a", 8));
  d.Submit(Job("a", 8));
  d.Cycle();
  QueueSpec b = Queue("b", 1);
  b.guarantees[0].lending_limit = 0;
  EXPECT_EQ(d.s_.SetQueues({Queue("a"), b}), "");
  d.Check();
}

// Removing an idle node: a borrower on another node is "lost" because, placed again on the
// smaller cluster, it would hold b's unlent cell.
TEST(SchedulerEdgeCaseTest, SetClusterRemovingAnIdleNodeLosesARunningJob) {
  QueueSpec b = Queue("b", 1);
  b.guarantees[0].lending_limit = 0;
  Driver d(3, 3, {Queue("a"), b});
  const int a1 = d.Submit(Job("a", 8));
  const int a2 = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(a1).state, JobState::kRunning);
  ASSERT_EQ(d.J(a2).state, JobState::kRunning);
  std::set<int> busy = {d.NodeOf(a1), d.NodeOf(a2)};
  Cluster next = d.cluster_;
  next.nodes.clear();
  for (size_t n = 0; n < d.cluster_.nodes.size(); ++n)
    if (busy.count(static_cast<int>(n))) next.nodes.push_back(d.cluster_.nodes[n]);
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  EXPECT_EQ(d.J(a1).state, JobState::kRunning) << d.J(a1).reason;
  EXPECT_EQ(d.J(a2).state, JobState::kRunning) << d.J(a2).reason;
}

// ---------------------------------------------------------------------------------------------
// SetCluster

// A node keeps its name but its GPUs are now another model: the running job stays, and the
// per-model accounting must follow.
TEST(SchedulerEdgeCaseTest, SetClusterChangingAGpuModelUnderARunningJob) {
  Driver d(2, 2, {Queue("a")});
  const int j = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(j).state, JobState::kRunning);
  Cluster next = d.cluster_;
  next.models.push_back(next.models[0]);
  next.models.back().name = "H100";
  for (Gpu& g : next.nodes[d.NodeOf(j)].gpus) g.model = "H100";
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  EXPECT_EQ(d.s_.CheckConsistency(), "");
  d.s_.Finish(j, d.now_);
  EXPECT_EQ(d.s_.CheckConsistency(), "");
}

// A node shrinks (same name, fewer GPUs) under a starving job's reservation: the reservation
// keeps GPU indices the node no longer has, and the next health change reads past the end.
TEST(SchedulerEdgeCaseTest, SetClusterShrinkingANodeUnderAReservation) {
  Driver d(1, 1, {Queue("a")});
  for (int i = 0; i < 8; ++i) d.Submit(Job("a", 1), 100 + 37 * i);
  d.Cycle();
  const int big = d.Submit(Job("a", 8), 300);
  d.on_finish_ = [&](int id) {
    if (id != big) d.Submit(Job("a", 1), 100 + 37 * (id % 8));
  };
  for (int i = 0; i < 200 && d.s_.reservations().size() == 0; ++i) d.Cycle(10);
  ASSERT_EQ(d.s_.reservations().size(), 1u);
  ASSERT_EQ(d.J(big).state, JobState::kPending);
  int max_gpu = -1;
  for (const auto& [n, g] : d.s_.reservations().Of(big)->gpus) max_gpu = std::max(max_gpu, g);
  ASSERT_EQ(max_gpu, 7);
  Cluster next = d.cluster_;
  next.nodes[0].gpus.resize(4);
  next.nodes[0].switches.resize(2);
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  for (const auto& [job, r] : d.s_.reservations().all())
    for (const auto& [n, g] : r.gpus)
      EXPECT_LT(g, static_cast<int>(next.nodes[n].gpus.size()))
          << "job " << job << " reserves GPU " << n << "/" << g << " the node no longer has";
  // A health change on the node (a GPU reported good again): HealthChanged reads every GPU the
  // reservation names on it, past the end of the node.
  d.Handle(d.s_.SetGpuBad(0, 2, false, d.now_));
  d.Cycle();
}

// A removed node hosts a stopping victim: the waiting preemptor is freed and starts.
TEST(SchedulerEdgeCaseTest, SetClusterRemovesAStoppingVictimsNode) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  const int a1 = d.Submit(Job("a", 8));
  const int a2 = d.Submit(Job("a", 8));
  d.Cycle();
  const int b1 = d.Submit(Job("b", 8));
  d.Cycle();
  ASSERT_EQ(d.J(b1).state, JobState::kPending);
  int victim = d.J(a1).state == JobState::kStopping ? a1 : a2;
  ASSERT_EQ(d.J(victim).state, JobState::kStopping);
  const std::string gone = d.cluster_.nodes[d.NodeOf(victim)].name;
  Cluster next = d.cluster_;
  next.nodes.erase(next.nodes.begin() + d.NodeOf(victim));
  Node fresh = d.cluster_.nodes[0];
  fresh.name = "fresh";
  next.nodes.push_back(fresh);
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  EXPECT_EQ(d.J(victim).state, JobState::kPending);
  d.Cycle();
  EXPECT_EQ(d.J(b1).state, JobState::kRunning) << d.J(b1).reason;
  for (int i = 0; i < 20; ++i) d.Cycle(10);
  d.Check();
}

// A removed node carries part of a waiting preemptor's plan; another its victim's; then
// SetQueues and Adopt on a fresh engine.
TEST(SchedulerEdgeCaseTest, SetClusterThenSetQueuesThenAdopt) {
  Driver d(3, 3, {Queue("a"), Queue("b", 2)});
  std::vector<int> as;
  for (int i = 0; i < 6; ++i) as.push_back(d.Submit(Job("a", 4)));
  d.Cycle();
  JobSpec b16 = Job("b", 8);
  b16.groups[0].replicas = 2;
  const int b1 = d.Submit(b16);
  d.Cycle();
  d.Check();
  // Remove node 0 whatever it holds; add two.
  Cluster next = d.cluster_;
  next.nodes.erase(next.nodes.begin());
  for (int k = 0; k < 2; ++k) {
    Node n = d.cluster_.nodes[1];
    n.name = "added-" + std::to_string(k);
    next.nodes.push_back(n);
  }
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  QueueSpec heavy = Queue("a", 0, 2);
  ASSERT_EQ(d.s_.SetQueues({heavy, Queue("b", 2), Queue("c", 1)}), "");
  d.Check();
  for (int i = 0; i < 30; ++i) d.Cycle(10);
  EXPECT_EQ(d.J(b1).state, JobState::kRunning) << d.J(b1).reason;
  // Rebuild a fresh engine from the running jobs.
  Scheduler fresh(&next, {heavy, Queue("b", 2), Queue("c", 1)}, Driver::Berth());
  const std::vector<const JobRecord*> running = test::RunningGuaranteedFirst(d.s_);
  for (const JobRecord* j : running) {
    std::string why;
    ASSERT_GE(fresh.Adopt(j->spec, j->placements, j->borrowed, j->submit_time, j->start_time, &why),
              0)
        << why;
  }
  EXPECT_EQ(fresh.CheckConsistency(), "");
  EXPECT_EQ(fresh.allocator().CheckConsistency(), "");
}

// An elastic job on a removed node is lost and restarts at its largest size.
TEST(SchedulerEdgeCaseTest, SetClusterLosesAnElasticJob) {
  Driver d(2, 2, {Queue("a")});
  const int e = d.Submit(Elastic("a", 16, 2));
  d.Cycle();
  ASSERT_EQ(d.J(e).replicas, 16);
  Cluster next = d.cluster_;
  next.nodes.pop_back();
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  EXPECT_EQ(d.J(e).state, JobState::kPending);
  d.Cycle();
  EXPECT_EQ(d.J(e).state, JobState::kRunning);
  EXPECT_EQ(d.J(e).replicas, 8);
}

// ---------------------------------------------------------------------------------------------
// Elastic

// An elastic gang with gang affinity "node" grows its added replicas onto another node.
TEST(SchedulerEdgeCaseTest, ElasticGangGrowsPastItsGangAffinity) {
  Driver d(2, 2, {Queue("a")});
  const int w0 = d.Submit(Job("a", 4));
  const int w1 = d.Submit(Job("a", 5));
  d.Cycle();
  ASSERT_NE(d.NodeOf(w0), d.NodeOf(w1));
  JobSpec e = Elastic("a", 8, 2);
  e.gang_affinity = Level::kNode;
  const int id = d.Submit(e);
  d.Cycle();
  ASSERT_EQ(d.J(id).state, JobState::kRunning);
  std::set<int> nodes;
  for (const ReplicaPlacement& r : d.J(id).placements) nodes.insert(r.node);
  EXPECT_EQ(nodes.size(), 1u);
  // Only the other node frees: a grow can only go there.
  d.s_.Finish(d.NodeOf(id) == d.NodeOf(w0) ? w1 : w0, d.now_);
  d.Cycle();
  nodes.clear();
  for (const ReplicaPlacement& r : d.J(id).placements) nodes.insert(r.node);
  std::printf("elastic gang: %d replicas over %zu nodes, grows %d\n", d.J(id).replicas,
              nodes.size(), d.count_[Decision::Kind::kGrow]);
  EXPECT_EQ(nodes.size(), 1u) << "replicas " << d.J(id).replicas << " over " << nodes.size()
                              << " nodes with gang affinity node";
}

// Counts shrink/grow decisions of an elastic job under steady demand from another queue.
struct ThrashResult {
  int shrinks = 0, grows = 0, preempts = 0, e_replicas = 0;
  double a_usage = 0, b_usage = 0;
};
ThrashResult RunThrash(int b_gpus, int b_guarantee, double b_weight, int e_min, int e_gpus,
                       double b_duration, int cycles) {
  Driver d(2, 2, {Queue("a"), Queue("b", b_guarantee, b_weight)});
  const int e = d.Submit(Elastic("a", 16 / e_gpus, e_min, e_gpus));
  d.Cycle();
  // b keeps four jobs queued at all times.
  for (int i = 0; i < 4; ++i) d.Submit(Job("b", b_gpus), b_duration);
  d.on_finish_ = [&](int id) {
    if (d.J(id).spec.queue == "b") d.Submit(Job("b", b_gpus), b_duration);
  };
  for (int i = 0; i < 100; ++i) d.Cycle(1);  // warm up
  const auto before = d.by_job_[e];
  for (int i = 0; i < cycles; ++i) {
    d.Cycle(1);
    if (::testing::Test::HasFatalFailure()) return {};
  }
  ThrashResult r;
  r.shrinks = d.by_job_[e][Decision::Kind::kShrink] - before.at(Decision::Kind::kShrink);
  r.grows = d.by_job_[e][Decision::Kind::kGrow] -
            (before.count(Decision::Kind::kGrow) ? before.at(Decision::Kind::kGrow) : 0);
  r.preempts = d.count_[Decision::Kind::kPreempt];
  r.e_replicas = d.J(e).replicas;
  r.a_usage = d.s_.Queues()[0].usage_gpus;
  r.b_usage = d.s_.Queues()[1].usage_gpus;
  return r;
}

TEST(SchedulerEdgeCaseTest, ElasticThrashUnderSteadyDemand) {
  struct Case {
    int b_gpus, b_guarantee;
    double b_weight;
    int e_min, e_gpus;
    double b_duration;
  };
  for (const Case& c : std::vector<Case>{{1, 0, 1, 1, 1, 37},
                                         {4, 0, 1, 1, 1, 37},
                                         {8, 0, 1, 1, 1, 37},
                                         {3, 0, 1, 1, 1, 37},
                                         {1, 0, 3, 1, 1, 37},
                                         {4, 1, 1, 1, 1, 37},
                                         {2, 0, 1, 1, 2, 37},
                                         {3, 0, 1, 1, 2, 37},
                                         {8, 1, 1, 2, 4, 37}}) {
    ThrashResult r =
        RunThrash(c.b_gpus, c.b_guarantee, c.b_weight, c.e_min, c.e_gpus, c.b_duration, 1000);
    if (::testing::Test::HasFatalFailure()) return;
    std::printf(
        "b %d GPUs guar %d weight %g, e min %d x%d: shrinks %d grows %d preempts %d e=%d "
        "a=%g b=%g\n",
        c.b_gpus, c.b_guarantee, c.b_weight, c.e_min, c.e_gpus, r.shrinks, r.grows, r.preempts,
        r.e_replicas, r.a_usage, r.b_usage);
    EXPECT_LE(r.shrinks + r.grows, 4) << "b " << c.b_gpus << " GPUs";
  }
}

// ---------------------------------------------------------------------------------------------
// More: fairness for elastic jobs, model caps on grow and bind, lending to the owner itself.

// An elastic job whose full size exceeds its queue's fair share still reclaims toward its share
// (at least its minimum), and stops there.
TEST(SchedulerEdgeCaseTest, ElasticJobAboveItsShareReclaimsItsShare) {
  Driver d(2, 2, {Queue("a"), Queue("b")});
  std::vector<int> as;
  for (int i = 0; i < 16; ++i) as.push_back(d.Submit(Job("a", 1)));
  d.Cycle();
  const int e = d.Submit(Elastic("b", 16, 4));
  for (int i = 0; i < 50; ++i) d.Cycle(10);
  EXPECT_EQ(d.J(e).state, JobState::kRunning) << d.J(e).reason;
  EXPECT_GE(d.s_.Queues()[1].usage_gpus, 4);
  EXPECT_LE(d.s_.Queues()[1].usage_gpus, d.s_.Queues()[1].fair_share_gpus + 1e-9);
  EXPECT_GE(d.s_.Queues()[0].usage_gpus, 8 - 1e-9);
}

// A real grow subtracts the job's own GPUs before the model-cap check (Resize's Account(-1)),
// so it may place the added replicas on a model the probe had ruled out.
TEST(SchedulerEdgeCaseTest, ElasticGrowPassesAModelCap) {
  for (int variant = 0; variant < 2; ++variant) {
    Driver d(3, 3, {Queue("a"), Queue("z")});
    d.cluster_.models.push_back(d.cluster_.models[0]);
    d.cluster_.models.back().name = "H100";
    const int h100 = variant == 0 ? 2 : 0;
    for (Gpu& g : d.cluster_.nodes[h100].gpus) g.model = "H100";
    ASSERT_EQ(d.s_.SetCluster(&d.cluster_, d.now_), "");
    QueueSpec a = Queue("a");
    a.model_caps["A100-80GB"] = 8;
    ASSERT_EQ(d.s_.SetQueues({a, Queue("z")}), "");
    // Block: the H100 node whole, one A100 node whole, 6 GPUs of the other A100 node.
    auto on = [&](const std::string& model, int gpus) {
      JobSpec j = Job("z", gpus);
      j.groups[0].demand.models = {model};
      return d.Submit(j);
    };
    const int wh = on("H100", 8);
    const int wa = on("A100-80GB", 8);
    const int wb = on("A100-80GB", 6);
    d.Cycle();
    for (int id : {wh, wa, wb}) ASSERT_EQ(d.J(id).state, JobState::kRunning);
    const int e = d.Submit(Elastic("a", 24, 1));
    d.Cycle();
    ASSERT_EQ(d.J(e).state, JobState::kRunning);
    ASSERT_EQ(d.J(e).replicas, 2);
    d.s_.Finish(wh, d.now_);
    d.s_.Finish(wa, d.now_);
    d.Cycle();
    std::map<std::string, int> by_model;
    for (const ReplicaPlacement& r : d.J(e).placements)
      by_model[d.cluster_.nodes[r.node].gpus[r.gpus[0]].model] += 1;
    std::printf("variant %d: e has %d replicas: A100 %d, H100 %d\n", variant, d.J(e).replicas,
                by_model["A100-80GB"], by_model["H100"]);
    EXPECT_LE(by_model["A100-80GB"], 8) << "queue a's A100 cap is 8";
  }
}

// The extender's bind (StartAt) keeps the model caps that Evaluate keeps.
TEST(SchedulerEdgeCaseTest, StartAtKeepsModelCaps) {
  QueueSpec a = Queue("a");
  a.model_caps["A100-80GB"] = 8;
  Driver d(2, 2, {a});
  const int j1 = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(j1).state, JobState::kRunning);
  const int j2 = d.Submit(Job("a", 8));
  d.Cycle();
  ASSERT_EQ(d.J(j2).state, JobState::kPending);
  const int free_node = 1 - d.NodeOf(j1);
  const std::vector<NodeVerdict> v = d.s_.Evaluate(d.J(j2).spec, {free_node});
  EXPECT_FALSE(v[0].feasible) << "Evaluate: " << v[0].reason;
  ReplicaPlacement r;
  r.node = free_node;
  r.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  std::string why;
  EXPECT_FALSE(d.s_.StartAt(j2, {r}, d.now_, &why)) << "StartAt committed past the model cap";
  EXPECT_LE(d.s_.Queues()[0].usage_gpus, 8);
}

// A queue's own always-borrowing work (priority < 0) may not use the queue's own idle
// guarantee when that guarantee has a lending limit: on an idle one-node cluster it never runs.
TEST(SchedulerEdgeCaseTest, LendingLimitKeepsTheOwnersBorrowedWorkOff) {
  QueueSpec b = Queue("b", 1);
  b.guarantees[0].lending_limit = 0;
  Driver d(1, 1, {b});
  JobSpec low = Job("b", 4);
  low.priority = -1;
  const int id = d.Submit(low);
  for (int i = 0; i < 10; ++i) d.Cycle(10);
  EXPECT_EQ(d.J(id).state, JobState::kRunning) << d.J(id).reason;
}

// Lending limits with nested cell types and two owners: borrowers fill the rest and each
// owner's unlent cells stay free; each owner then starts at once.
TEST(SchedulerEdgeCaseTest, LendingLimitsWithNestedCellTypes) {
  QueueSpec b{"b", 1, -1, {{"dgx-a100/socket", 2, 1}}};  // 2 sockets, one never lent
  QueueSpec c{"c", 1, -1, {{"dgx-a100/switch", 2, 0}}};  // 2 switches, none lent
  Driver d(2, 2, {Queue("a"), b, c});
  std::vector<int> as;
  for (int i = 0; i < 16; ++i) as.push_back(d.Submit(Job("a", 1)));
  d.Cycle();
  int running = 0;
  for (int id : as) running += d.J(id).state == JobState::kRunning;
  EXPECT_EQ(running, 16 - 4 - 4);
  const int b1 = d.Submit(Job("b", 4));
  const int c1 = d.Submit(Job("c", 2));
  const int c2 = d.Submit(Job("c", 2));
  d.Cycle();
  EXPECT_EQ(d.J(b1).state, JobState::kRunning) << d.J(b1).reason;
  EXPECT_EQ(d.J(c1).state, JobState::kRunning) << d.J(c1).reason;
  EXPECT_EQ(d.J(c2).state, JobState::kRunning) << d.J(c2).reason;
  EXPECT_EQ(d.count_[Decision::Kind::kPreempt], 0);
  for (int i = 0; i < 50; ++i) d.Cycle(10);
}

// A gang with gang affinity "node" bigger than any node never fits, and says so; one that fits
// a node, or may start at a size that does, is not flagged.
TEST(SchedulerEdgeCaseTest, GangLargerThanAnyNodeWithNodeAffinity) {
  Driver d(2, 2, {Queue("a")});
  JobSpec g = Job("a", 8);
  g.groups[0].replicas = 2;
  g.gang_affinity = Level::kNode;
  const int id = d.Submit(g);
  JobSpec fits = Job("a", 4);
  fits.groups[0].replicas = 2;
  fits.gang_affinity = Level::kNode;
  const int fits_id = d.Submit(fits);
  JobSpec elastic = g;
  elastic.min_replicas = 1;
  const int elastic_id = d.Submit(elastic);
  for (int i = 0; i < 5; ++i) d.Cycle(60);
  EXPECT_NE(d.J(id).reason.find("no node of the cluster can ever hold"), std::string::npos)
      << d.J(id).reason;
  EXPECT_NE(d.J(id).reason.find("16 GPUs on one node"), std::string::npos) << d.J(id).reason;
  EXPECT_EQ(d.J(fits_id).state, JobState::kRunning) << d.J(fits_id).reason;
  EXPECT_EQ(d.J(elastic_id).never_fits, "");
  EXPECT_EQ(d.J(elastic_id).state, JobState::kRunning) << d.J(elastic_id).reason;
}

// The starvation check again, with staggered small jobs (so the 8 GPUs never free at once on
// their own): with a model cap equal to the node, the big job still gets its reservation (the
// jobs it waits for no longer count against the cap in the plan).
TEST(SchedulerEdgeCaseTest, ModelCapStarvationStaggered) {
  double uncapped_start = 0;
  for (bool capped : {false, true}) {
    QueueSpec a = Queue("a");
    if (capped) a.model_caps["A100-80GB"] = 8;
    Driver d(1, 1, {a});
    for (int i = 0; i < 8; ++i) d.Submit(Job("a", 1), 100 + 37 * i);
    d.Cycle();
    const int big = d.Submit(Job("a", 8), 300);
    d.on_finish_ = [&](int id) {
      if (id != big) d.Submit(Job("a", 1), 100 + 37 * (id % 8));
    };
    for (int i = 0; i < 2000 && d.J(big).state == JobState::kPending; ++i) d.Cycle(10);
    EXPECT_EQ(d.J(big).state, JobState::kRunning)
        << (capped ? "with" : "without") << " a model cap, after " << d.now_
        << " s: " << d.J(big).reason;
    // The cap changes nothing for this job: it reaches its reservation at the same time.
    if (capped)
      EXPECT_LE(d.J(big).start_time, uncapped_start + 1e-9);
    else
      uncapped_start = d.J(big).start_time;
  }
}

// A gang of more replicas than the whole cluster holds says so at once (each node holds one).
TEST(SchedulerEdgeCaseTest, GangLargerThanTheClusterNeverFits) {
  Driver d(2, 2, {Queue("a")});
  JobSpec g = Job("a", 8);
  g.groups[0].replicas = 3;
  const int id = d.Submit(g);
  JobSpec fits = Job("a", 8);
  fits.groups[0].replicas = 2;
  const int fits_id = d.Submit(fits);
  for (int i = 0; i < 3; ++i) d.Cycle(60);
  EXPECT_NE(d.J(id).reason.find("can never hold all 3 replicas of group main at once (2 at most"),
            std::string::npos)
      << d.J(id).reason;
  EXPECT_EQ(d.J(fits_id).state, JobState::kRunning) << d.J(fits_id).reason;
  JobSpec elastic = g;
  elastic.min_replicas = 2;  // may start at 2 of its 3
  EXPECT_EQ(d.J(d.Submit(elastic)).never_fits, "");
  // With two groups, the minimum is the first replicas in group order: 1 + 1 of 1 + 3.
  JobSpec two = Job("a", 8);
  two.groups[0].replicas = 1;
  two.groups.push_back(two.groups[0]);
  two.groups[1].name = "workers";
  two.groups[1].replicas = 3;
  two.min_replicas = 2;
  EXPECT_EQ(d.J(d.Submit(two)).never_fits, "");
  two.min_replicas = 0;
  EXPECT_NE(d.J(d.Submit(two)).never_fits.find("all 3 replicas of group workers"),
            std::string::npos);
}

// A gang that grew past its gang affinity can no longer be placed again exactly: SetQueues (no
// change at all) is refused, and a shrink loses the job's allocation.
TEST(SchedulerEdgeCaseTest, GrownGangAffinityJobBreaksRebuildAndShrink) {
  Driver d(2, 2, {Queue("a"), Queue("b", 1)});
  const int w0 = d.Submit(Job("a", 4));
  const int w1 = d.Submit(Job("a", 5));
  d.Cycle();
  JobSpec e = Elastic("a", 8, 2);
  e.gang_affinity = Level::kNode;
  const int id = d.Submit(e);
  d.Cycle();
  ASSERT_EQ(d.J(id).state, JobState::kRunning);
  d.s_.Finish(d.NodeOf(id) == d.NodeOf(w0) ? w1 : w0, d.now_);
  d.Cycle();
  // A job kept inside one node does not grow onto another.
  std::set<int> nodes;
  for (const ReplicaPlacement& r : d.J(id).placements) nodes.insert(r.node);
  EXPECT_EQ(nodes.size(), 1u);
  EXPECT_EQ(d.s_.SetQueues({Queue("a"), Queue("b", 1)}), "") << "the same queues, refused";
  // b reclaims its guarantee: e shrinks.
  const int b1 = d.Submit(Job("b", 4));
  for (int i = 0; i < 5; ++i) {
    d.Cycle(10);
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "e: " << d.J(id).allocations.size() << " allocations, " << d.J(id).replicas
                    << " replicas; b1 " << JobStateName(d.J(b1).state);
      return;
    }
  }
}

// Gangs are all-or-nothing: StartAt and Adopt refuse a non-elastic gang with fewer replicas
// than it asks, and nothing grows a non-elastic job.
TEST(SchedulerEdgeCaseTest, PartialNonElasticGangViaStartAtAndAdopt) {
  for (bool adopt : {false, true}) {
    Driver d(2, 2, {Queue("a")});
    JobSpec g = Job("a", 8);
    g.groups[0].replicas = 2;  // min_replicas 0: not elastic, all or nothing
    ReplicaPlacement r;
    r.node = 0;
    r.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
    std::string why;
    if (adopt) {
      EXPECT_EQ(d.s_.Adopt(g, {r}, true, 0, 0, &why), -1);
      EXPECT_NE(why.find("placements"), std::string::npos) << why;
    } else {
      const int id = d.Submit(g);
      EXPECT_FALSE(d.s_.StartAt(id, {r}, d.now_, &why));
      EXPECT_EQ(d.J(id).state, JobState::kPending);
    }
    for (int i = 0; i < 3; ++i) d.Cycle();
    EXPECT_EQ(d.count_[Decision::Kind::kGrow], 0);
    d.Check();
  }
}

// A node keeps its name with fewer GPUs: the job on the GPUs that are gone is lost, the other
// keeps running.
TEST(SchedulerEdgeCaseTest, SetClusterShrinksANodesGpus) {
  Driver d(1, 1, {Queue("a")});
  const int j1 = d.Submit(Job("a", 4));
  const int j2 = d.Submit(Job("a", 4));
  d.Cycle();
  const int low = d.J(j1).placements[0].gpus[0] < 4 ? j1 : j2;
  const int high = low == j1 ? j2 : j1;
  Cluster next = d.cluster_;
  next.nodes[0].gpus.resize(4);
  next.nodes[0].switches.resize(2);
  ASSERT_EQ(d.s_.SetCluster(&next, d.now_), "");
  d.Check();
  EXPECT_EQ(d.J(low).state, JobState::kRunning);
  EXPECT_EQ(d.J(high).state, JobState::kPending);
  bool lost = false;  // how it came back is the event's; its reason is why it waits
  for (const EngineEvent& e : d.s_.EventsSince(0))
    lost |= e.job == high && e.kind == "pending" && e.reason.find("lost") != std::string::npos;
  EXPECT_TRUE(lost);
  d.Cycle();
  EXPECT_EQ(d.J(high).state, JobState::kPending);
}

}  // namespace
}  // namespace berth
