#include "core/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/cluster_file.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

const char kNodeCell[] = "dgx-a100/node";

JobSpec Job(const std::string& queue, int gpus, int replicas = 1, int priority = 0) {
  JobSpec spec;
  spec.name = queue + "-job";
  spec.queue = queue;
  spec.user = "user";
  spec.priority = priority;
  TaskGroup g;
  g.name = "main";
  g.replicas = replicas;
  g.demand.gpus = gpus;
  spec.groups.push_back(g);
  return spec;
}

QueueSpec Queue(const std::string& name, int guaranteed_nodes = 0, double weight = 1,
                double cap_gpus = -1) {
  QueueSpec q{name, weight, cap_gpus, {}};
  if (guaranteed_nodes > 0) q.guarantees.push_back({kNodeCell, guaranteed_nodes});
  return q;
}

Policy BerthPolicy() {
  Policy p;
  EXPECT_TRUE(BuiltinPolicy("berth", &p));
  return p;
}

// Decisions of one kind, by job id.
std::vector<int> Jobs(const std::vector<Decision>& decisions, Decision::Kind kind) {
  std::vector<int> out;
  for (const Decision& d : decisions)
    if (d.kind == kind) out.push_back(d.job);
  std::sort(out.begin(), out.end());
  return out;
}
std::vector<int> Started(const std::vector<Decision>& d) { return Jobs(d, Decision::Kind::kStart); }
std::vector<int> Preempted(const std::vector<Decision>& d) {
  return Jobs(d, Decision::Kind::kPreempt);
}

// What the allocator holds: per allocation id, its replicas' nodes and GPUs.
std::vector<std::pair<int, std::vector<std::pair<int, std::vector<int>>>>> Holdings(
    const Allocator& a) {
  std::vector<std::pair<int, std::vector<std::pair<int, std::vector<int>>>>> out;
  for (const auto& [id, alloc] : a.allocations()) {
    std::vector<std::pair<int, std::vector<int>>> replicas;
    for (const ReplicaPlacement& r : alloc->replicas) replicas.push_back({r.node, r.gpus});
    out.push_back({id, replicas});
  }
  return out;
}

int FreeGpus(const Allocator& a) {
  int free = 0;
  for (size_t n = 0; n < a.cluster().nodes.size(); ++n)
    for (size_t g = 0; g < a.cluster().nodes[n].gpus.size(); ++g)
      free += a.gpu_free(static_cast<int>(n), static_cast<int>(g));
  return free;
}

class SchedulerTest : public ::testing::Test {
 protected:
  // `nodes` DGX nodes (8 GPUs each) in racks of `per_rack`.
  void Make(int nodes, int per_rack, const std::vector<QueueSpec>& queues,
            const Policy& policy = BerthPolicy()) {
    cluster_ = std::make_unique<Cluster>(SyntheticDgxCluster(nodes, per_rack, 0));
    s_ = std::make_unique<Scheduler>(cluster_.get(), queues, policy);
    ASSERT_EQ(s_->error(), "");
  }

  int Submit(const JobSpec& spec, double now = 0) {
    std::string why;
    const int id = s_->Submit(spec, now, &why);
    EXPECT_GE(id, 0) << why;
    return id;
  }

  const JobRecord& J(int id) {
    const JobRecord* j = s_->job(id);
    EXPECT_NE(j, nullptr) << id;
    return *j;
  }

  // Two whole-node jobs of queue a on two nodes; queue b, guaranteed a node, submits one
  // (returned) that reclaims one of them (*victim).
  int ReclaimOneOfTwoWholeNodes(int* victim) {
    Make(2, 2, {Queue("a"), Queue("b", 1)});
    Submit(Job("a", 8));
    Submit(Job("a", 8));
    s_->Schedule(0);
    const int b = Submit(Job("b", 8), 1);
    const std::vector<int> victims = Preempted(s_->Schedule(1));
    EXPECT_EQ(victims.size(), 1u);
    *victim = victims.empty() ? -1 : victims[0];
    return b;
  }

  void ExpectConsistent() {
    EXPECT_EQ(s_->allocator().CheckConsistency(), "");
    EXPECT_EQ(s_->CheckConsistency(), "");
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Scheduler> s_;
};

// --- Reclaim ---------------------------------------------------------------------------------

TEST_F(SchedulerTest, ReclaimsTheGuaranteeFromABorrower) {
  Make(2, 2, {Queue("a"), Queue("b", 1)});
  const int a1 = Submit(Job("a", 8));
  const int a2 = Submit(Job("a", 8));
  EXPECT_EQ(Started(s_->Schedule(0)), (std::vector<int>{a1, a2}));
  EXPECT_TRUE(J(a1).borrowed);
  EXPECT_TRUE(J(a2).borrowed);
  EXPECT_EQ(FreeGpus(s_->allocator()), 0);

  const int b = Submit(Job("b", 8), 10);
  const std::vector<Decision> d = s_->Schedule(10);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].preemptor, b);
  EXPECT_DOUBLE_EQ(d[0].grace_period_s, 30);
  const int victim = d[0].job;
  ASSERT_TRUE(victim == a1 || victim == a2);
  EXPECT_EQ(J(victim).state, JobState::kStopping);
  EXPECT_EQ(J(victim).preempted_by, b);
  EXPECT_EQ(J(b).state, JobState::kPending);
  EXPECT_EQ(J(b).waiting_for, std::vector<int>{victim});
  // Until the victim stops nothing changes: no second victim, no start.
  EXPECT_TRUE(s_->Schedule(11).empty());
  EXPECT_EQ(FreeGpus(s_->allocator()), 0);

  const std::vector<Decision> started = s_->Stopped(victim, 20);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].kind, Decision::Kind::kStart);
  EXPECT_EQ(started[0].job, b);
  ASSERT_EQ(started[0].placements.size(), 1u);
  EXPECT_EQ(started[0].placements[0].gpus.size(), 8u);
  EXPECT_EQ(J(b).state, JobState::kRunning);
  EXPECT_FALSE(J(b).borrowed);
  EXPECT_TRUE(J(b).waiting_for.empty());
  EXPECT_EQ(J(victim).state, JobState::kPending);
  EXPECT_EQ(J(victim).preemptions, 1);
  EXPECT_EQ(J(victim).preempted_by, -1);
  const std::vector<int>& pending = s_->pending(0);
  EXPECT_NE(std::find(pending.begin(), pending.end(), victim), pending.end());
  // The victim does not fight back: b is inside its guarantee, a is at its fair share.
  EXPECT_TRUE(s_->Schedule(21).empty());
  ExpectConsistent();
}

TEST_F(SchedulerTest, BorrowersUseTheIdleGpusOfAGuaranteeCellAndGiveThemBack) {
  Make(2, 2, {Queue("a"), Queue("b", 1)});
  // b's one small job binds a whole node; a fills the other node, then borrows b's idle GPUs.
  const int b1 = Submit(Job("b", 1));
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{b1});
  const int bound = J(b1).placements[0].node;
  const int a1 = Submit(Job("a", 8), 1);
  const int a2 = Submit(Job("a", 4), 1);
  EXPECT_EQ(Started(s_->Schedule(1)), (std::vector<int>{a1, a2}));
  EXPECT_NE(J(a1).placements[0].node, bound);
  EXPECT_EQ(J(a2).placements[0].node, bound);
  EXPECT_TRUE(J(a2).borrowed);
  // A rebuild (the queues set again) and a restarted engine adopting the running jobs
  // (guaranteed first) both keep the borrower on b's cell.
  const std::vector<ReplicaPlacement> lent = J(a2).placements;
  ASSERT_EQ(s_->SetQueues({Queue("a"), Queue("b", 1)}), "");
  EXPECT_EQ(J(a2).placements[0].gpus, lent[0].gpus);
  ExpectConsistent();
  Scheduler fresh(cluster_.get(), {Queue("a"), Queue("b", 1)}, BerthPolicy());
  std::string why;
  for (int id : {b1, a1, a2})
    EXPECT_GE(fresh.Adopt(J(id).spec, J(id).placements, J(id).borrowed, 0, 1, &why), 0) << why;
  EXPECT_EQ(fresh.allocator().CheckConsistency(), "");
  EXPECT_EQ(fresh.CheckConsistency(), "");
  EXPECT_EQ(fresh.allocator().BoundVcOfGpu(bound, lent[0].gpus[0]), 1);
  // b wants its guarantee back: it reclaims the lent GPUs, and starts as the borrower stops.
  const int b2 = Submit(Job("b", 7), 10);
  EXPECT_EQ(Preempted(s_->Schedule(10)), std::vector<int>{a2});
  EXPECT_EQ(Started(s_->Stopped(a2, 20)), std::vector<int>{b2});
  EXPECT_FALSE(J(b2).borrowed);
  // Then nothing moves: b holds its guarantee, a its fair share (8 of 16).
  for (double t = 21; t < 400; t += 7) EXPECT_TRUE(s_->Schedule(t).empty()) << t;
  EXPECT_EQ(J(a2).state, JobState::kPending);
  ExpectConsistent();
}

TEST_F(SchedulerTest, AGuaranteeCellLeftToBorrowersStaysBoundForAPlanInsideIt) {
  // a is guaranteed one node: j1 binds it, b borrows the other node and two pairs of j1's
  // idle GPUs. p reclaims one pair; j1 ends while that borrower stops.
  Make(2, 2, {Queue("a", 1), Queue("b")});
  const int j1 = Submit(Job("a", 4));
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{j1});
  const int b1 = Submit(Job("b", 8), 1), b2 = Submit(Job("b", 2), 1), b3 = Submit(Job("b", 2), 1);
  EXPECT_EQ(Started(s_->Schedule(1)), (std::vector<int>{b1, b2, b3}));
  const int cell = J(j1).placements[0].node;
  ASSERT_EQ(J(b2).placements[0].node, cell);
  ASSERT_EQ(J(b3).placements[0].node, cell);
  const int p = Submit(Job("a", 2), 10);
  const std::vector<int> victims = Preempted(s_->Schedule(10));
  ASSERT_EQ(victims.size(), 1u);
  s_->Finish(j1, 20);
  // Its plan lies in a's cell: the cell stays a's, and p starts as its victim stops.
  EXPECT_EQ(s_->allocator().vcs()[0].bound_cells.size(), 1u);
  EXPECT_EQ(Started(s_->Stopped(victims[0], 30)), std::vector<int>{p});
  EXPECT_FALSE(J(p).borrowed);
  ExpectConsistent();
}

TEST_F(SchedulerTest, AWaitingPreemptorKeepsTheGuaranteeCellItsPlanBinds) {
  // b is guaranteed two of three nodes. b1 binds one; a fills the rest, a3 on b1's idle GPUs.
  Make(3, 3, {Queue("a"), Queue("b", 2)});
  const int b1 = Submit(Job("b", 4));
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{b1});
  const int a1 = Submit(Job("a", 8), 1), a2 = Submit(Job("a", 8), 1), a3 = Submit(Job("a", 4), 1);
  EXPECT_EQ(Started(s_->Schedule(1)), (std::vector<int>{a1, a2, a3}));
  // b2 reclaims a whole node: its plan binds b's second (last) cell there.
  const int b2 = Submit(Job("b", 8), 10);
  const std::vector<int> victims = Preempted(s_->Schedule(10));
  ASSERT_EQ(victims.size(), 1u);
  const int victim = victims[0], other = victim == a1 ? a2 : a1;
  ASSERT_TRUE(victim == a1 || victim == a2);
  // Another node frees up while b2 waits; b's next guaranteed job does not bind it.
  s_->Finish(other, 12);
  const int b3 = Submit(Job("b", 1), 13);
  s_->Schedule(13);
  EXPECT_EQ(s_->allocator().vcs()[1].bound_cells.size(), 1u);
  ExpectConsistent();
  // b2 starts as its victim stops, on the cell it was promised.
  EXPECT_EQ(Started(s_->Stopped(victim, 20)), std::vector<int>{b2});
  EXPECT_FALSE(J(b2).borrowed);
  EXPECT_NE(J(b3).state, JobState::kDone);
  ExpectConsistent();
}

TEST_F(SchedulerTest, NoReclaimFromJobsThatCannotBePreempted) {
  Make(2, 2, {Queue("a"), Queue("b", 1)});
  // Node-sized holes are what b needs: two 4-GPU jobs share a node, one not preemptible.
  JobSpec keep = Job("a", 4);
  keep.preemptible = false;
  JobSpec keep8 = Job("a", 8);
  keep8.preemptible = false;
  Submit(keep8);
  Submit(keep);
  Submit(Job("a", 4));
  EXPECT_EQ(Started(s_->Schedule(0)).size(), 3u);
  const auto before = Holdings(s_->allocator());
  // Preempting the one preemptible job would not make room for 8 GPUs on a node: no preemption.
  const int b = Submit(Job("b", 8), 1);
  EXPECT_TRUE(s_->Schedule(1).empty());
  EXPECT_EQ(J(b).state, JobState::kPending);
  EXPECT_TRUE(J(b).waiting_for.empty());
  EXPECT_FALSE(J(b).reason.empty());
  EXPECT_EQ(Holdings(s_->allocator()), before);
  for (const auto& [id, job] : s_->jobs()) {
    if (id != b) {
      EXPECT_EQ(job.state, JobState::kRunning) << id;
    }
  }
}

TEST_F(SchedulerTest, StoppedVictimsStayHeldForTheirPreemptor) {
  Make(2, 2, {Queue("a"), Queue("b", 1)});
  for (int i = 0; i < 4; ++i) Submit(Job("a", 4));
  EXPECT_EQ(Started(s_->Schedule(0)).size(), 4u);
  const int b = Submit(Job("b", 8), 1);
  const std::vector<int> victims = Preempted(s_->Schedule(1));
  ASSERT_EQ(victims.size(), 2u);  // the two jobs of one node: fewest victims
  EXPECT_EQ(J(victims[0]).placements[0].node, J(victims[1]).placements[0].node);
  // The first victim stops: its GPUs wait for b, even though the victim itself (pending again)
  // would fit there.
  EXPECT_TRUE(s_->Stopped(victims[0], 2).empty());
  EXPECT_EQ(J(victims[0]).state, JobState::kPending);
  EXPECT_TRUE(s_->Schedule(3).empty());
  EXPECT_EQ(J(victims[0]).state, JobState::kPending);
  EXPECT_EQ(FreeGpus(s_->allocator()), 4);
  ASSERT_NE(s_->reservations().Of(b), nullptr);
  EXPECT_EQ(s_->reservations().Of(b)->gpus.size(), 8u);
  // The last one stops: b is placed at once.
  EXPECT_EQ(Started(s_->Stopped(victims[1], 4)), std::vector<int>{b});
  EXPECT_FALSE(J(b).borrowed);
  EXPECT_EQ(s_->reservations().Of(b), nullptr);
  ExpectConsistent();
}

TEST_F(SchedulerTest, AVictimThatFinishesWhileStoppingReleasesItsPreemptor) {
  int victim = -1;
  const int b = ReclaimOneOfTwoWholeNodes(&victim);
  ASSERT_GE(victim, 0);
  // The victim completes during its grace period instead of stopping.
  s_->Finish(victim, 2);
  EXPECT_EQ(J(victim).state, JobState::kDone);
  EXPECT_TRUE(J(b).waiting_for.empty());
  // Nobody else takes its GPUs first: b starts in the next cycle.
  Submit(Job("a", 8), 3);
  EXPECT_EQ(Started(s_->Schedule(3)), std::vector<int>{b});
  EXPECT_FALSE(J(b).borrowed);
  ExpectConsistent();
}

// A victim told to stop for good during its grace period (a user's stop) is not killed at its
// deadline and never waits again; its preemptor starts once it has finished.
TEST_F(SchedulerTest, AVictimStoppedForGoodIsNotKilledAndReleasesItsPreemptorOnceDone) {
  int victim = -1;
  const int b = ReclaimOneOfTwoWholeNodes(&victim);
  ASSERT_GE(victim, 0);
  s_->Stopping(victim, 2, "stopped on request");
  EXPECT_EQ(J(victim).state, JobState::kStopping);
  // Long past its grace period: no kill, and b still waits for its GPUs.
  for (double t = 3; t < 200; t += 10)
    for (const Decision& d : s_->Schedule(t)) {
      EXPECT_NE(d.job, victim) << DecisionKindName(d.kind) << " at " << t;
      EXPECT_NE(d.job, b) << DecisionKindName(d.kind) << " at " << t;
    }
  s_->Finish(victim, 200, JobEnd::kCancelled);
  EXPECT_EQ(Started(s_->Schedule(201)), std::vector<int>{b});
  ExpectConsistent();
}

TEST_F(SchedulerTest, APreemptorThatGoesAwayFreesItsVictims) {
  Make(2, 2, {Queue("a"), Queue("b", 1)});
  for (int i = 0; i < 4; ++i) Submit(Job("a", 4));
  s_->Schedule(0);
  const int b = Submit(Job("b", 8), 1);
  const std::vector<int> victims = Preempted(s_->Schedule(1));
  ASSERT_EQ(victims.size(), 2u);
  EXPECT_TRUE(s_->Stopped(victims[0], 2).empty());
  s_->Finish(b, 3);  // cancelled while waiting
  EXPECT_EQ(J(victims[1]).preempted_by, -1);
  EXPECT_TRUE(s_->Stopped(victims[1], 4).empty());
  // Both victims get their GPUs back.
  EXPECT_EQ(Started(s_->Schedule(5)), victims);
  EXPECT_EQ(FreeGpus(s_->allocator()), 0);
  ExpectConsistent();
}

TEST_F(SchedulerTest, TwoReclaimersNeverShareVictims) {
  Make(2, 2, {Queue("a"), Queue("b", 1), Queue("c", 1)});
  for (int i = 0; i < 4; ++i) Submit(Job("a", 4));
  EXPECT_EQ(Started(s_->Schedule(0)).size(), 4u);
  // Both reclaim in the same cycle.
  const int b = Submit(Job("b", 8), 1);
  const int c = Submit(Job("c", 8), 1);
  const std::vector<Decision> d = s_->Schedule(1);
  std::set<int> by_b, by_c;
  for (const Decision& x : d) {
    ASSERT_EQ(x.kind, Decision::Kind::kPreempt);
    ASSERT_TRUE(x.preemptor == b || x.preemptor == c);
    const bool fresh = (x.preemptor == b ? by_b : by_c).insert(x.job).second;
    EXPECT_TRUE(fresh) << "job " << x.job << " preempted twice";
  }
  EXPECT_EQ(by_b.size(), 2u);
  EXPECT_EQ(by_c.size(), 2u);
  for (int v : by_b) EXPECT_EQ(by_c.count(v), 0u) << "victim " << v << " given to both";
  // Stopping victims are not chosen again.
  EXPECT_TRUE(s_->Schedule(2).empty());
  std::vector<Decision> starts;
  for (int v : by_b)
    for (const Decision& x : s_->Stopped(v, 3)) starts.push_back(x);
  for (int v : by_c)
    for (const Decision& x : s_->Stopped(v, 3)) starts.push_back(x);
  EXPECT_EQ(Started(starts), (std::vector<int>{b, c}));
  ExpectConsistent();
}

TEST_F(SchedulerTest, ALaterReclaimerSkipsVictimsAlreadyStopping) {
  Make(2, 2, {Queue("a"), Queue("b", 1), Queue("c", 1)});
  for (int i = 0; i < 4; ++i) Submit(Job("a", 4));
  s_->Schedule(0);
  const int b = Submit(Job("b", 8), 1);
  const std::vector<int> first = Preempted(s_->Schedule(1));
  ASSERT_EQ(first.size(), 2u);
  const int c = Submit(Job("c", 8), 2);
  const std::vector<Decision> d = s_->Schedule(2);
  const std::vector<int> second = Preempted(d);
  ASSERT_EQ(second.size(), 2u);
  for (const Decision& x : d) EXPECT_EQ(x.preemptor, c);
  for (int v : second) {
    EXPECT_EQ(std::count(first.begin(), first.end(), v), 0) << v;
    EXPECT_EQ(J(v).preempted_by, c);
  }
  for (int v : first) EXPECT_EQ(J(v).preempted_by, b);
  ExpectConsistent();
}

// --- Priority preemption ---------------------------------------------------------------------

TEST_F(SchedulerTest, PreemptsOnlyStrictlyLowerPriorityInsideAQueue) {
  Make(1, 1, {Queue("a")});
  const int lo = Submit(Job("a", 4, 1, 3));
  const int mid = Submit(Job("a", 4, 1, 5));
  EXPECT_EQ(Started(s_->Schedule(0)), (std::vector<int>{lo, mid}));
  // Equal priority never preempts.
  const int eq = Submit(Job("a", 4, 1, 3), 1);
  EXPECT_TRUE(s_->Schedule(1).empty());
  s_->Finish(eq, 1);
  // Above lo but not above mid, and it needs both: no preemption at all.
  const int big = Submit(Job("a", 8, 1, 4), 2);
  EXPECT_TRUE(s_->Schedule(2).empty());
  EXPECT_EQ(J(lo).state, JobState::kRunning);
  EXPECT_EQ(J(mid).state, JobState::kRunning);
  // Above both, and lo alone makes room: only lo goes.
  const int hi = Submit(Job("a", 4, 1, 6), 3);
  const std::vector<Decision> d = s_->Schedule(3);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, lo);
  EXPECT_EQ(d[0].preemptor, hi);
  EXPECT_EQ(Started(s_->Stopped(lo, 4)), std::vector<int>{hi});
  EXPECT_EQ(J(mid).state, JobState::kRunning);
  EXPECT_EQ(J(big).state, JobState::kPending);
  ExpectConsistent();
}

TEST_F(SchedulerTest, PriorityClassesNameTheirNumbers) {
  Policy policy = BerthPolicy();
  policy.priority_classes = {{"prod", 1000}, {"default", 100}};
  Make(1, 1, {Queue("a")}, policy);
  JobSpec batch = Job("a", 8);
  batch.priority_class = "default";
  const int lo = Submit(batch);
  EXPECT_EQ(J(lo).spec.priority, 100);
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{lo});
  // A prod job outranks it: it preempts inside the queue.
  JobSpec serving = Job("a", 8);
  serving.priority_class = "prod";
  const int hi = Submit(serving, 1);
  EXPECT_EQ(J(hi).spec.priority, 1000);
  EXPECT_EQ(Preempted(s_->Schedule(1)), std::vector<int>{lo});
  // An unknown class is refused, naming the classes the policy has.
  JobSpec typo = Job("a", 1);
  typo.priority_class = "prdo";
  std::string why;
  EXPECT_EQ(s_->Submit(typo, 2, &why), -1);
  EXPECT_EQ(why, "priorityClass: unknown class \"prdo\"; the policy defines: default, prod");
}

TEST_F(SchedulerTest, LowPriorityWorkPacksSoThatPreemptingItFreesWholeNodes) {
  Make(2, 2, {Queue("a")});
  // One-GPU jobs of two priorities, interleaved: each priority gathers on its own node.
  std::vector<int> lo, hi;
  for (int i = 0; i < 4; ++i) {
    lo.push_back(Submit(Job("a", 1, 1, 1), i));
    s_->Schedule(i);
    hi.push_back(Submit(Job("a", 1, 1, 5), i));
    s_->Schedule(i);
  }
  const int lo_node = J(lo[0]).placements[0].node;
  for (int id : lo) EXPECT_EQ(J(id).placements[0].node, lo_node);
  for (int id : hi) EXPECT_NE(J(id).placements[0].node, lo_node);
  // So a job that needs a whole node finds one by preempting the low-priority work alone.
  const int big = Submit(Job("a", 8, 1, 5), 10);
  std::vector<int> victims = Preempted(s_->Schedule(10));
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, lo);
  for (int v : victims) s_->Stopped(v, 11);
  EXPECT_EQ(J(big).state, JobState::kRunning);
  ExpectConsistent();
}

TEST_F(SchedulerTest, NonPreemptibleJobsAreNeverVictims) {
  Make(1, 1, {Queue("a")});
  JobSpec lo = Job("a", 8, 1, 0);
  lo.preemptible = false;
  const int id = Submit(lo);
  s_->Schedule(0);
  Submit(Job("a", 8, 1, 100), 1);
  EXPECT_TRUE(s_->Schedule(1).empty());
  EXPECT_EQ(J(id).state, JobState::kRunning);
}

TEST_F(SchedulerTest, PriorityPreemptionInsideTheGuaranteeStaysGuaranteed) {
  Make(2, 2, {Queue("a", 1), Queue("b")});
  const int lo = Submit(Job("a", 8, 1, 0));
  const int other = Submit(Job("b", 8));
  EXPECT_EQ(Started(s_->Schedule(0)), (std::vector<int>{lo, other}));
  EXPECT_FALSE(J(lo).borrowed);
  EXPECT_TRUE(J(other).borrowed);
  const int hi = Submit(Job("a", 8, 1, 10), 1);
  EXPECT_EQ(Preempted(s_->Schedule(1)), std::vector<int>{lo});
  EXPECT_EQ(Started(s_->Stopped(lo, 2)), std::vector<int>{hi});
  // hi took lo's place inside a's guarantee; it is not a borrower...
  EXPECT_FALSE(J(hi).borrowed);
  // ...so lo, pending again, has no guarantee left to reclaim from b.
  EXPECT_TRUE(s_->Schedule(3).empty());
  EXPECT_EQ(J(other).state, JobState::kRunning);
  ExpectConsistent();
}

// --- Gangs, spread, elastic ------------------------------------------------------------------

TEST_F(SchedulerTest, GangIsPlacedWholeOrNotAtAll) {
  Make(2, 2, {Queue("a")});
  const int small = Submit(Job("a", 4));
  s_->Schedule(0);
  const auto before = Holdings(s_->allocator());
  // Two full nodes: only one is free.
  const int gang = Submit(Job("a", 8, 2), 1);
  // Two groups, the first would fit alone.
  JobSpec groups = Job("a", 8);
  groups.groups.push_back(groups.groups[0]);
  groups.groups[1].name = "second";
  const int two_groups = Submit(groups, 2);
  EXPECT_TRUE(s_->Schedule(2).empty());
  EXPECT_EQ(Holdings(s_->allocator()), before);
  EXPECT_EQ(FreeGpus(s_->allocator()), 12);
  EXPECT_EQ(J(gang).replicas, 0);
  EXPECT_TRUE(J(gang).allocations.empty());
  EXPECT_TRUE(J(two_groups).allocations.empty());
  ExpectConsistent();
  // Room for the whole gang: every replica is placed at once.
  s_->Finish(small, 3);
  const std::vector<Decision> d = s_->Schedule(3);
  ASSERT_EQ(Started(d), std::vector<int>{gang});
  ASSERT_EQ(d[0].placements.size(), 2u);
  EXPECT_NE(d[0].placements[0].node, d[0].placements[1].node);
  EXPECT_EQ(J(gang).replicas, 2);
  EXPECT_DOUBLE_EQ(J(gang).gpu_equivalents, 16);
  s_->Finish(gang, 4);
  EXPECT_EQ(Started(s_->Schedule(4)), std::vector<int>{two_groups});
  EXPECT_EQ(J(two_groups).placements.size(), 2u);
  ExpectConsistent();
}

TEST_F(SchedulerTest, HardSpreadPutsOneReplicaPerRack) {
  Make(6, 2, {Queue("a")});  // 3 racks of 2 nodes
  JobSpec spec = Job("a", 1, 3);
  spec.spread.push_back({"rack", 1, true});
  const int id = Submit(spec);
  const std::vector<Decision> d = s_->Schedule(0);
  ASSERT_EQ(Started(d), std::vector<int>{id});
  std::map<std::string, int> per_rack;
  for (const ReplicaPlacement& r : J(id).placements) ++per_rack[cluster_->nodes[r.node].rack];
  EXPECT_EQ(per_rack.size(), 3u);
  for (const auto& [rack, n] : per_rack) EXPECT_EQ(n, 1) << rack;

  JobSpec six = Job("a", 1, 6);
  six.spread.push_back({"rack", 1, true});
  const int id6 = Submit(six, 1);
  ASSERT_EQ(Started(s_->Schedule(1)), std::vector<int>{id6});
  per_rack.clear();
  for (const ReplicaPlacement& r : J(id6).placements) ++per_rack[cluster_->nodes[r.node].rack];
  EXPECT_EQ(per_rack.size(), 3u);
  for (const auto& [rack, n] : per_rack) EXPECT_EQ(n, 2) << rack;
}

TEST_F(SchedulerTest, HardSpreadThatCannotBeMetLeavesTheJobPending) {
  Make(6, 2, {Queue("a")});
  // Rack 2 full: a second replica anywhere would make skew 2.
  JobSpec pin = Job("a", 8);
  pin.groups[0].node_selector["rack"] = "rack-2";
  Submit(pin);
  Submit(pin);
  EXPECT_EQ(Started(s_->Schedule(0)).size(), 2u);
  JobSpec spec = Job("a", 1, 3);
  spec.spread.push_back({"rack", 1, true});
  const int id = Submit(spec, 1);
  EXPECT_TRUE(s_->Schedule(1).empty());
  EXPECT_EQ(J(id).state, JobState::kPending);
  // Soft spread (a score) still places it.
  spec.spread[0].hard = false;
  EXPECT_EQ(Started(s_->Schedule(2)).size(), 0u);  // the hard one still waits
  const int soft = Submit(spec, 2);
  EXPECT_EQ(Started(s_->Schedule(2)), std::vector<int>{soft});
  ExpectConsistent();
}

// Replicas per rack, by rack name.
std::map<std::string, int> PerRack(const Cluster& cluster, const JobRecord& job) {
  std::map<std::string, int> out;
  for (const ReplicaPlacement& r : job.placements) ++out[cluster.nodes[r.node].rack];
  return out;
}

TEST_F(SchedulerTest, HardSpreadCountsTheReplicasOfEveryGroup) {
  Make(6, 2, {Queue("a")});  // 3 racks of 2 nodes
  JobSpec spec = Job("a", 1, 2);
  spec.groups.push_back(spec.groups[0]);
  spec.groups[1].name = "second";
  spec.groups[1].replicas = 1;
  spec.spread.push_back({"rack", 1, true});
  const int id = Submit(spec);
  ASSERT_EQ(Started(s_->Schedule(0)), std::vector<int>{id});
  const std::map<std::string, int> per_rack = PerRack(*cluster_, J(id));
  EXPECT_EQ(per_rack.size(), 3u);
  for (const auto& [rack, n] : per_rack) EXPECT_EQ(n, 1) << rack;
}

TEST_F(SchedulerTest, GangTakesTheFewestRacksThatHoldIt) {
  Make(8, 2, {Queue("a")});  // 4 racks of 2 nodes
  const int busy = Submit(Job("a", 8));
  ASSERT_EQ(Started(s_->Schedule(0)), std::vector<int>{busy});
  // Four whole nodes: two whole racks are free, and the gang should leave the half-used rack
  // alone rather than span three racks.
  const int gang = Submit(Job("a", 8, 4), 1);
  ASSERT_EQ(Started(s_->Schedule(1)), std::vector<int>{gang});
  const std::map<std::string, int> per_rack = PerRack(*cluster_, J(gang));
  EXPECT_EQ(per_rack.size(), 2u);
  EXPECT_EQ(per_rack.count(cluster_->nodes[J(busy).placements[0].node].rack), 0u);
  ExpectConsistent();
}

TEST_F(SchedulerTest, GangOfPartNodesTakesTheFewestRacksAndNodes) {
  Make(8, 2, {Queue("a")});
  const int busy = Submit(Job("a", 4));
  ASSERT_EQ(Started(s_->Schedule(0)), std::vector<int>{busy});
  // 4 x 4 GPUs: the busy node's free half would be the best fit for one replica, but its rack
  // holds only three; an empty rack holds all four on two nodes.
  const int gang = Submit(Job("a", 4, 4), 1);
  ASSERT_EQ(Started(s_->Schedule(1)), std::vector<int>{gang});
  EXPECT_EQ(PerRack(*cluster_, J(gang)).size(), 1u);
  std::set<int> nodes;
  for (const ReplicaPlacement& r : J(gang).placements) nodes.insert(r.node);
  EXPECT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes.count(J(busy).placements[0].node), 0u);
  ExpectConsistent();
}

TEST_F(SchedulerTest, GangWithRackAffinityFindsTheRackThatHoldsIt) {
  Make(8, 2, {Queue("a")});
  const int busy = Submit(Job("a", 8));
  ASSERT_EQ(Started(s_->Schedule(0)), std::vector<int>{busy});
  // The half-used rack is the best fit for the first replica, but cannot hold the second.
  JobSpec spec = Job("a", 8, 2);
  spec.gang_affinity = Level::kRack;
  const int gang = Submit(spec, 1);
  ASSERT_EQ(Started(s_->Schedule(1)), std::vector<int>{gang}) << J(gang).reason;
  EXPECT_EQ(PerRack(*cluster_, J(gang)).size(), 1u);
}

TEST_F(SchedulerTest, ElasticJobStartsWithMinReplicas) {
  Make(1, 1, {Queue("a")});
  const int rigid = Submit(Job("a", 8, 2));
  JobSpec elastic = Job("a", 8, 2);
  elastic.min_replicas = 1;
  const int id = Submit(elastic, 1);
  const std::vector<Decision> d = s_->Schedule(1);
  ASSERT_EQ(Started(d), std::vector<int>{id});
  EXPECT_EQ(d[0].placements.size(), 1u);
  EXPECT_EQ(J(id).replicas, 1);
  EXPECT_DOUBLE_EQ(J(id).gpu_equivalents, 8);
  EXPECT_DOUBLE_EQ(s_->Queues()[0].usage_gpus, 8);
  EXPECT_EQ(J(rigid).state, JobState::kPending);
}

TEST_F(SchedulerTest, ElasticJobStartsWholeWhenItFits) {
  Make(2, 2, {Queue("a")});
  JobSpec elastic = Job("a", 8, 2);
  elastic.min_replicas = 1;
  const int id = Submit(elastic);
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{id});
  EXPECT_EQ(J(id).replicas, 2);
}

// --- Order, fairness, caps -------------------------------------------------------------------

// GPUs no job may take (a cordoned node's idle ones) are nobody's fair share: two equal queues
// on a half-cordoned cluster share the half that is left, and the second reclaims its half.
TEST_F(SchedulerTest, FairSharesCountOnlyTheGpusJobsMayUse) {
  Make(2, 2, {Queue("a"), Queue("b")});
  s_->SetNodeCordoned(1, true, 0);
  for (int i = 0; i < 8; ++i) Submit(Job("a", 1));
  ASSERT_EQ(Started(s_->Schedule(0)).size(), 8u);
  for (int i = 0; i < 8; ++i) Submit(Job("b", 1), 1);
  EXPECT_NEAR(s_->Queues()[0].fair_share_gpus, 4, 1e-9);
  EXPECT_NEAR(s_->Queues()[1].fair_share_gpus, 4, 1e-9);
  for (int t = 1; t < 120; ++t)
    for (const Decision& d : s_->Schedule(t))
      if (d.kind == Decision::Kind::kPreempt) s_->Stopped(d.job, t);
  EXPECT_DOUBLE_EQ(s_->Queues()[0].usage_gpus, 4);
  EXPECT_DOUBLE_EQ(s_->Queues()[1].usage_gpus, 4);
  // A job running on the cordoned node still counts: its GPU is shared out, as its usage.
  s_->SetNodeCordoned(1, false, 120);
  for (int i = 0; i < 8; ++i) Submit(Job("a", 1), 120);
  ASSERT_FALSE(Started(s_->Schedule(120)).empty());
  s_->SetNodeCordoned(1, true, 121);
  const double a = s_->Queues()[0].usage_gpus, b = s_->Queues()[1].usage_gpus;
  EXPECT_GT(a + b, 8);
  EXPECT_NEAR(s_->Queues()[0].fair_share_gpus + s_->Queues()[1].fair_share_gpus, a + b, 1e-9);
  ExpectConsistent();
}

TEST_F(SchedulerTest, FairSharesFollowWaterFilling) {
  Make(4, 4, {Queue("a", 0, 1), Queue("b", 0, 1), Queue("c", 0, 2)});
  Submit(Job("a", 2));
  for (int i = 0; i < 2; ++i) Submit(Job("b", 8));
  for (int i = 0; i < 4; ++i) Submit(Job("c", 8));
  // Demands 2, 16, 32 on 32 GPUs, weights 1, 1, 2: 8 per unit of weight would give a 8, so a
  // stops at 2 (b 2, c 4); the other 24 go 1:2 to b and c: 10 and 20.
  std::vector<QueueStatus> q = s_->Queues();
  ASSERT_EQ(q.size(), 3u);
  EXPECT_NEAR(q[0].fair_share_gpus, 2, 1e-9);
  EXPECT_NEAR(q[1].fair_share_gpus, 10, 1e-9);
  EXPECT_NEAR(q[2].fair_share_gpus, 20, 1e-9);
  EXPECT_DOUBLE_EQ(q[1].pending_gpus, 16);
  EXPECT_EQ(q[2].pending, 4);
  EXPECT_DOUBLE_EQ(q[2].weight, 2);
  // The smallest weighted dominant share goes next: a (2), b (8), c (8), c (16, share 0.25 on
  // weight 2); then no whole node is left.
  s_->Schedule(0);
  q = s_->Queues();
  EXPECT_DOUBLE_EQ(q[0].usage_gpus, 2);
  EXPECT_DOUBLE_EQ(q[1].usage_gpus, 8);
  EXPECT_DOUBLE_EQ(q[2].usage_gpus, 16);
  EXPECT_EQ(q[2].running, 2);
  EXPECT_EQ(q[2].pending, 2);
  // Demand is running plus pending: the shares do not move.
  EXPECT_NEAR(q[1].fair_share_gpus, 10, 1e-9);
  EXPECT_NEAR(q[2].fair_share_gpus, 20, 1e-9);
}

TEST_F(SchedulerTest, FairSharesHonourGuaranteesFirst) {
  Make(4, 4, {Queue("a", 0, 1), Queue("b", 1, 1), Queue("c", 0, 2)});
  Submit(Job("a", 2));
  for (int i = 0; i < 2; ++i) Submit(Job("b", 8));
  for (int i = 0; i < 4; ++i) Submit(Job("c", 8));
  // b's 8 first; then 24 at 6 per unit of weight stops a at 2 (b 10, c 4); the last 16 go 1:2.
  const std::vector<QueueStatus> q = s_->Queues();
  EXPECT_DOUBLE_EQ(q[1].guarantee_gpus, 8);
  EXPECT_NEAR(q[0].fair_share_gpus, 2, 1e-9);
  EXPECT_NEAR(q[1].fair_share_gpus, 10 + 16.0 / 3, 1e-9);
  EXPECT_NEAR(q[2].fair_share_gpus, 4 + 32.0 / 3, 1e-9);
}

TEST_F(SchedulerTest, BackfillLetsASmallJobPassABigOne) {
  Make(2, 2, {Queue("a")});
  Submit(Job("a", 4));
  s_->Schedule(0);
  const int big = Submit(Job("a", 8, 2), 1);
  const int small = Submit(Job("a", 2), 2);
  EXPECT_EQ(Started(s_->Schedule(2)), std::vector<int>{small});
  EXPECT_EQ(J(big).state, JobState::kPending);
  EXPECT_FALSE(J(big).reason.empty());
}

TEST_F(SchedulerTest, HigherPriorityGoesFirstInsideAQueue) {
  Make(1, 1, {Queue("a")});
  const int lo = Submit(Job("a", 8, 1, 1));
  const int hi = Submit(Job("a", 8, 1, 2), 1);
  EXPECT_EQ(Started(s_->Schedule(1)), std::vector<int>{hi});
  EXPECT_EQ(J(lo).state, JobState::kPending);
}

// Which of an old priority-0 job (submitted at 0) and a fresh priority-5 job (submitted at
// `now`) gets the one free node at `now`.
int AgingWinner(double now, double per_hour, double cap) {
  Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  Policy policy = BerthPolicy();
  policy.aging_per_hour = per_hour;
  policy.aging_cap = cap;
  Scheduler s(&cluster, {Queue("a")}, policy);
  std::string why;
  const int blocker = s.Submit(Job("a", 8, 1, 100), 0, &why);
  s.Schedule(0);
  JobSpec old_spec = Job("a", 8, 1, 0);
  old_spec.preemptible = false;  // ordering only: the fresh job must not preempt it after
  const int old_job = s.Submit(old_spec, 0, &why);
  const int fresh = s.Submit(Job("a", 8, 1, 5), now, &why);
  s.Schedule(now / 2);
  s.Finish(blocker, now);
  const std::vector<int> started = Started(s.Schedule(now));
  EXPECT_EQ(started.size(), 1u);
  if (started.empty()) return -1;
  return started[0] == old_job ? 0 : started[0] == fresh ? 1 : -1;
}

TEST_F(SchedulerTest, AgingLiftsAnOldLowPriorityJobAheadEventually) {
  // 10 points per hour: after 30 minutes the old job has caught up 5 points.
  EXPECT_EQ(AgingWinner(1000, 10, 100), 1);  // 2.8 < 5: the fresh, higher priority job
  EXPECT_EQ(AgingWinner(3600, 10, 100), 0);  // 10 > 5: the old one
  EXPECT_EQ(AgingWinner(36000, 0, 100), 1);  // no aging
  EXPECT_EQ(AgingWinner(36000, 10, 3), 1);   // aging capped below the gap
}

TEST_F(SchedulerTest, CapIsRespected) {
  Make(2, 2, {Queue("a", 0, 1, 8)});
  const int first = Submit(Job("a", 8));
  const int second = Submit(Job("a", 8), 1);
  EXPECT_EQ(Started(s_->Schedule(1)), std::vector<int>{first});
  EXPECT_EQ(J(second).state, JobState::kPending);
  EXPECT_DOUBLE_EQ(s_->Queues()[0].usage_gpus, 8);
  EXPECT_DOUBLE_EQ(s_->Queues()[0].fair_share_gpus, 8);
  EXPECT_EQ(FreeGpus(s_->allocator()), 8);
}

TEST_F(SchedulerTest, PreemptionNeverTakesAQueuePastItsCap) {
  Make(2, 2, {Queue("a", 0, 1, 12)});
  const int eight = Submit(Job("a", 8));
  s_->Schedule(0);
  const int four = Submit(Job("a", 4), 50);
  EXPECT_EQ(Started(s_->Schedule(50)), std::vector<int>{four});
  // The cheapest victim (four: least GPU-time lost) makes room on its node, but 8 + 8 > 12:
  // only preempting `eight` keeps the queue within its cap.
  const int hi = Submit(Job("a", 8, 1, 10), 100);
  const std::vector<int> victims = Preempted(s_->Schedule(100));
  ASSERT_FALSE(victims.empty());
  EXPECT_NE(std::find(victims.begin(), victims.end(), eight), victims.end());
  std::vector<int> started;
  for (int v : victims)
    for (const Decision& d : s_->Stopped(v, 101)) started.push_back(d.job);
  EXPECT_EQ(started, std::vector<int>{hi});
  EXPECT_LE(s_->Queues()[0].usage_gpus, 12);
  s_->Schedule(102);
  EXPECT_LE(s_->Queues()[0].usage_gpus, 12);
  ExpectConsistent();
}

// --- Telemetry back-off ----------------------------------------------------------------------

Telemetry FullMemory(const Cluster& cluster, double fb_used_mib) {
  Telemetry t;
  t.gpus.resize(cluster.nodes.size());
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    t.gpus[n].resize(cluster.nodes[n].gpus.size());
    for (GpuTelemetry& g : t.gpus[n]) g.fb_used_mib = fb_used_mib;
  }
  t.node_images.resize(cluster.nodes.size());
  return t;
}

// One GPU observed full on an idle node is gone around, whichever GPU the packing would pick
// first: the node is refused only when every GPU that fits is full.
TEST_F(SchedulerTest, AGpuObservedFullIsGoneAroundOnItsNode) {
  Make(1, 1, {Queue("a")});
  for (int hot = 0; hot < 8; ++hot) {
    Make(1, 1, {Queue("a")});
    Telemetry t = FullMemory(*cluster_, 0);
    t.gpus[0][hot].fb_used_mib = 80000;  // of 81920: past 90%
    s_->SetTelemetry(t);
    const int id = Submit(Job("a", 1));
    ASSERT_EQ(Started(s_->Schedule(0)), std::vector<int>{id})
        << "hot GPU " << hot << ": " << J(id).reason;
    EXPECT_NE(J(id).placements[0].gpus[0], hot);
    // A pair goes around it too, and so do single GPUs until only the hot one is left.
    const int pair = Submit(Job("a", 2), 1);
    ASSERT_EQ(Started(s_->Schedule(1)), std::vector<int>{pair}) << J(pair).reason;
    for (int g : J(pair).placements[0].gpus) EXPECT_NE(g, hot);
    for (int i = 0; i < 4; ++i) Submit(Job("a", 1), 2);
    EXPECT_EQ(Started(s_->Schedule(2)).size(), 4u);
    const int more = Submit(Job("a", 1), 3);
    EXPECT_TRUE(Started(s_->Schedule(3)).empty());
    EXPECT_NE(J(more).reason.find("gpu-memory-threshold"), std::string::npos) << J(more).reason;
    ExpectConsistent();
  }
}

// A job larger than any cell the hot GPU is not in still goes around it: the GPUs it takes
// inside one cell are chosen among that cell's clean ones (3, 5, 6 or 7 of a DGX's 8, whichever
// GPU is hot), not refused as a whole because the first ones the packing would take hold it.
TEST_F(SchedulerTest, AJobGoesAroundAGpuObservedFullInsideTheCellItTakes) {
  for (int size : {3, 5, 6, 7})
    for (int hot = 0; hot < 8; ++hot) {
      Make(1, 1, {Queue("a")});
      Telemetry t = FullMemory(*cluster_, 0);
      t.gpus[0][hot].fb_used_mib = 80000;  // of 81920: past 90%
      s_->SetTelemetry(t);
      const int id = Submit(Job("a", size));
      ASSERT_EQ(Started(s_->Schedule(0)), std::vector<int>{id})
          << size << " GPUs, hot GPU " << hot << ": " << J(id).reason;
      const std::vector<int>& gpus = J(id).placements[0].gpus;
      EXPECT_EQ(std::count(gpus.begin(), gpus.end(), hot), 0) << size << " GPUs, hot " << hot;
      ExpectConsistent();
    }
}

// A cell declared around each GPU (childCellNumber: 1) hides no crowded GPU: a pair goes to the
// clean pair.
TEST_F(SchedulerTest, AJobGoesAroundAGpuObservedFullInsideACellDeclaredAroundIt) {
  cluster_ = std::make_unique<Cluster>(ParseClusterYaml(R"(name: wrap
gpuModels: [{name: A100, memoryMiB: 81920}]
skuTypes: {A100: {gpu: 1, cpu: 4, memory: 32Gi}}
cellTypes:
  SLOT: {childCellType: A100, childCellNumber: 1}
  PAIR: {childCellType: SLOT, childCellNumber: 2}
  NODE: {childCellType: PAIR, childCellNumber: 2, isNodeLevel: true}
physicalCells:
  - {cellType: NODE, cellAddress: n0}
)",
                                                        "wrap.yaml"));
  s_ = std::make_unique<Scheduler>(cluster_.get(), std::vector<QueueSpec>{Queue("a")},
                                   BerthPolicy());
  ASSERT_EQ(s_->error(), "");
  for (int hot = 0; hot < 4; ++hot) {
    Telemetry t = FullMemory(*cluster_, 0);
    t.gpus[0][hot].fb_used_mib = 80000;
    s_->SetTelemetry(t);
    const int id = Submit(Job("a", 2), hot);
    ASSERT_EQ(Started(s_->Schedule(hot)), std::vector<int>{id})
        << "hot " << hot << ": " << J(id).reason;
    const std::vector<int>& gpus = J(id).placements[0].gpus;
    EXPECT_EQ(std::count(gpus.begin(), gpus.end(), hot), 0) << "hot " << hot;
    s_->Finish(id, hot + 0.5);
    ExpectConsistent();
  }
  // Every GPU crowded: a GPU share is offered them as they are, by their own cells (the cell
  // declared around one is no GPU), and the filter refuses it.
  s_->SetTelemetry(FullMemory(*cluster_, 80000));
  JobSpec share = Job("a", 0);
  share.groups[0].demand.gpu_milli = 500;
  const int id = Submit(share, 10);
  EXPECT_TRUE(Started(s_->Schedule(10)).empty());
  EXPECT_NE(J(id).reason.find("gpu-memory-threshold"), std::string::npos) << J(id).reason;
  ExpectConsistent();
}

TEST_F(SchedulerTest, TelemetryRefusalBacksOff) {
  Make(1, 1, {Queue("a")});
  s_->SetTelemetry(FullMemory(*cluster_, 80000));  // above 0.9 of 80 GiB everywhere
  const int id = Submit(Job("a", 1));
  EXPECT_TRUE(s_->Schedule(0).empty());
  EXPECT_DOUBLE_EQ(J(id).backoff, 10);
  EXPECT_DOUBLE_EQ(J(id).next_try, 10);
  EXPECT_NE(J(id).reason.find("gpu-memory-threshold filter"), std::string::npos) << J(id).reason;
  // Not retried before next_try, even when capacity changes.
  s_->SetTelemetry(FullMemory(*cluster_, 80000));
  EXPECT_TRUE(s_->Schedule(5).empty());
  EXPECT_DOUBLE_EQ(J(id).next_try, 10);
  // Each refusal doubles the back-off, up to max_backoff_s.
  double now = 10;
  for (double want : {20, 40, 80, 160, 300, 300}) {
    EXPECT_TRUE(s_->Schedule(now).empty());
    EXPECT_DOUBLE_EQ(J(id).backoff, want);
    EXPECT_DOUBLE_EQ(J(id).next_try, now + want);
    now += want;
  }
  // Memory frees up: the job starts on its next try, and the back-off resets.
  s_->SetTelemetry(FullMemory(*cluster_, 1000));
  EXPECT_TRUE(s_->Schedule(now - 1).empty());
  EXPECT_EQ(Started(s_->Schedule(now)), std::vector<int>{id});
  EXPECT_DOUBLE_EQ(J(id).backoff, 0);
}

TEST_F(SchedulerTest, CapacityRefusalDoesNotBackOff) {
  Make(1, 1, {Queue("a")});
  Submit(Job("a", 8));
  s_->Schedule(0);
  const int id = Submit(Job("a", 8), 1);
  EXPECT_TRUE(s_->Schedule(1).empty());
  EXPECT_DOUBLE_EQ(J(id).next_try, 0);
  EXPECT_DOUBLE_EQ(J(id).backoff, 0);
}

TEST_F(SchedulerTest, ATelemetryRefusalDoesNotLeakIntoTheNextJob) {
  // No guarantees: both jobs below go through the same (borrowing) pass, x right before y. With
  // weights 1:3, a's fair share is 7, so y may reclaim a's 8-GPU job (the cheaper: it started
  // later) and a keeps its 7.
  Make(2, 2, {Queue("a"), Queue("b", 0, 3)});
  Submit(Job("a", 7));
  EXPECT_EQ(Started(s_->Schedule(0)).size(), 1u);
  Submit(Job("a", 8), 0.99);
  EXPECT_EQ(Started(s_->Schedule(0.99)).size(), 1u);
  // The one free GPU is observed full; everything else is fine.
  Telemetry t = FullMemory(*cluster_, 1000);
  int free_node = -1, free_gpu = -1;
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 8; ++g)
      if (s_->allocator().gpu_free(n, g)) free_node = n, free_gpu = g;
  ASSERT_GE(free_node, 0);
  t.gpus[free_node][free_gpu].fb_used_mib = 80000;
  s_->SetTelemetry(t);
  // x is refused by the telemetry filter only; y, right behind it, by capacity only (no
  // candidate at all), and y is within b's fair share: it must reclaim, not back off.
  const int x = Submit(Job("b", 1, 1, 10), 1);
  const int y = Submit(Job("b", 8, 1, 0), 1);
  const std::vector<Decision> d = s_->Schedule(1);
  EXPECT_GT(J(x).next_try, 1);
  EXPECT_EQ(J(x).reason,
            "refused by the gpu-memory-threshold filter (what the GPUs are observed doing); "
            "retrying with back-off");
  EXPECT_DOUBLE_EQ(J(y).next_try, 0) << J(y).reason;
  EXPECT_EQ(Preempted(d).size(), 1u);
  EXPECT_EQ(J(y).waiting_for.size(), 1u);
}

// --- Bounded candidate scans ------------------------------------------------------------------

// The berth policy scores 64 nodes per replica; nodes the filters refuse must not count.
TEST_F(SchedulerTest, ABoundedScanGoesOnPastNodesTheSelectorRefuses) {
  Make(200, 20, {Queue("a")});
  ASSERT_EQ(s_->policy().candidates, 64);
  std::vector<int> ids;
  for (int i = 0; i < 20; ++i) {
    JobSpec spec = Job("a", 1);
    spec.groups[0].node_selector["rack"] = "rack-9";  // nodes 180..199
    ids.push_back(Submit(spec));
  }
  ASSERT_EQ(Started(s_->Schedule(0)), ids);
  for (int id : ids) EXPECT_EQ(cluster_->nodes[J(id).placements[0].node].rack, "rack-9");
  ExpectConsistent();
}

TEST_F(SchedulerTest, ABoundedScanGoesOnPastNodesASpreadConstraintRefuses) {
  Make(200, 100, {Queue("a")});  // 2 racks: the first 64 nodes scanned lie in one
  JobSpec spec = Job("a", 8, 2);
  spec.spread.push_back({"rack", 1, true});
  const int id = Submit(spec);
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{id});
  EXPECT_EQ(PerRack(*cluster_, J(id)).size(), 2u);
}

TEST_F(SchedulerTest, ABoundedScanGoesOnPastGpusTelemetryRefuses) {
  Make(200, 20, {Queue("a")});
  Telemetry t = FullMemory(*cluster_, 80000);
  for (int n = 150; n < 200; ++n)
    for (GpuTelemetry& g : t.gpus[n]) g.fb_used_mib = 1000;
  s_->SetTelemetry(t);
  std::vector<int> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Submit(Job("a", 1)));
  ASSERT_EQ(Started(s_->Schedule(0)), ids);
  for (int id : ids) EXPECT_GE(J(id).placements[0].node, 150);
}

// --- Policy and submission errors ------------------------------------------------------------

TEST_F(SchedulerTest, SetPolicyKeepsTheOldPolicyWhenInvalid) {
  Make(1, 1, {Queue("a")});
  Policy bad = BerthPolicy();
  bad.name = "bad";
  bad.scores[0].weight = -1;
  bad.filters.push_back({"no-such-filter", 1, {}});
  const std::vector<std::string> errors = s_->SetPolicy(bad);
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(s_->policy().name, "berth");
  EXPECT_DOUBLE_EQ(s_->policy().scores[0].weight, BerthPolicy().scores[0].weight);
  // Still schedules with the old one.
  const int id = Submit(Job("a", 1));
  EXPECT_EQ(Started(s_->Schedule(0)), std::vector<int>{id});
  Policy good;
  ASSERT_TRUE(BuiltinPolicy("bestfit", &good));
  EXPECT_TRUE(s_->SetPolicy(good).empty());
  EXPECT_EQ(s_->policy().name, "bestfit");
}

TEST_F(SchedulerTest, InvalidPolicyAtConstructionIsAnError) {
  Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  Policy bad = BerthPolicy();
  bad.candidates = -1;
  Scheduler s(&cluster, {Queue("a")}, bad);
  EXPECT_EQ(s.error().rfind("policy: candidates", 0), 0u) << s.error();
}

TEST_F(SchedulerTest, BadQueuesAreErrors) {
  Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  EXPECT_NE(Scheduler(&cluster, {Queue("a"), Queue("a")}, BerthPolicy()).error(), "");
  EXPECT_NE(Scheduler(&cluster, {Queue("a", 0, 0)}, BerthPolicy()).error(), "");
  EXPECT_NE(Scheduler(&cluster, {Queue("a", 2)}, BerthPolicy()).error(), "");  // 2 of 1 node
}

TEST_F(SchedulerTest, SubmitErrorsNameTheField) {
  Make(1, 1, {Queue("a"), Queue("b")});
  std::string why;
  EXPECT_EQ(s_->Submit(Job("nope", 1), 0, &why), -1);
  EXPECT_EQ(why.rfind("queue: ", 0), 0u) << why;
  EXPECT_NE(why.find("\"nope\""), std::string::npos) << why;
  EXPECT_NE(why.find("known queues: a, b"), std::string::npos) << why;

  JobSpec empty = Job("a", 1);
  empty.groups.clear();
  EXPECT_EQ(s_->Submit(empty, 0, &why), -1);
  EXPECT_EQ(why.rfind("groups: ", 0), 0u) << why;

  JobSpec elastic = Job("a", 1, 2);
  elastic.min_replicas = 3;
  EXPECT_EQ(s_->Submit(elastic, 0, &why), -1);
  EXPECT_EQ(why.rfind("minReplicas: ", 0), 0u) << why;
  elastic.min_replicas = -1;
  EXPECT_EQ(s_->Submit(elastic, 0, &why), -1);
  EXPECT_EQ(why.rfind("minReplicas: ", 0), 0u) << why;

  JobSpec zero = Job("a", 1, 2);
  zero.groups.push_back(zero.groups[0]);
  zero.groups[1].name = "workers";
  zero.groups[1].replicas = 0;
  EXPECT_EQ(s_->Submit(zero, 0, &why), -1);
  EXPECT_EQ(why.rfind("groups.workers.replicas: ", 0), 0u) << why;

  EXPECT_TRUE(s_->jobs().empty());
  EXPECT_GE(Submit(Job("b", 1)), 0);
}

}  // namespace
}  // namespace berth
