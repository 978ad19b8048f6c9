#include "server/control_plane.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "config/cluster_file.h"
#include "config/policy_file.h"
#include "config/vc_file.h"
#include "server_test_util.h"

namespace berth {
namespace {

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "berth_plane_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    Open(2);
  }

  // A server over the state directory, as a restart makes one.
  void Open(int nodes, std::vector<QueueSpec> queues = {},
            std::vector<std::string> allowed_mounts = {}) {
    plane_.reset();
    store_.reset();
    store_ = std::make_unique<StateStore>(dir_);
    ControlPlaneConfig config;
    config.cluster = Dgx(nodes);
    config.queues = std::move(queues);
    config.allowed_mounts = std::move(allowed_mounts);
    EXPECT_TRUE(BuiltinPolicy("berth", &config.policy));
    if (reserve_after_s_ >= 0) config.policy.reserve_after_s = reserve_after_s_;
    plane_ = std::make_unique<ControlPlane>(std::move(config), store_.get(),
                                            [this] { return now_ += 1; });
  }

  int ApiStatus(const std::string& body, std::string* message) {
    return Status([&] { plane_->Submit(body); }, message, 201);
  }

  // The ApiError's status that `call` throws, with its message; `ok` when it throws none.
  template <typename Call>
  int Status(Call call, std::string* message, int ok = 200) {
    try {
      call();
    } catch (const ApiError& e) {
      *message = e.what();
      return e.status;
    }
    return ok;
  }

  std::string dir_;
  double now_ = 1000;
  double reserve_after_s_ = -1;  // < 0: the built-in policy's
  std::vector<int> FreeGpus() const {
    std::vector<int> free;
    for (const ControlPlane::NodeStatus& n : plane_->Nodes()) free.push_back(n.free_gpus);
    return free;
  }

  std::unique_ptr<StateStore> store_;
  std::unique_ptr<ControlPlane> plane_;
};

// Readers answer only what a restart keeps: while another connection holds the database's
// write lock, a submission waits for its commit, and so does a reader that would see the job
// (or a placement an agent would start). Once the lock goes, both answer.
TEST_F(ControlPlaneTest, ReadersSeeOnlyWhatIsCommitted) {
  NodeRegistration agent;  // assignments go to a registered agent only
  for (int g = 0; g < 8; ++g) agent.gpu_uuids.push_back("GPU-" + std::to_string(g));
  plane_->RegisterAgent("dgx-0", agent);
  const int64_t placed = plane_->Submit(R"({"gpus": 8, "image": "busybox"})");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/berth.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  // Each step waits until the one before has queued its write, so readers start only once
  // memory holds what is not yet committed.
  const uint64_t before = store_->Enqueued();
  const auto await_enqueued = [&](uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (store_->Enqueued() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_GE(store_->Enqueued(), n);
  };
  auto submitted = std::async(std::launch::async,
                              [&] { return plane_->Submit(R"({"gpus": 1, "image": "busybox"})"); });
  await_enqueued(before + 1);
  auto cycled = std::async(std::launch::async, [&] { plane_->Cycle(); });
  await_enqueued(before + 2);
  // The submission is in memory (a listing will find it) but not committed: nothing answers.
  auto listed = std::async(std::launch::async, [&] { return plane_->List(JobFilter()).size(); });
  auto got = std::async(std::launch::async, [&] { return plane_->Get(placed).state; });
  auto assigned = std::async(std::launch::async,
                             [&] { return plane_->Assignments("dgx-0", 0, 0).assignments.size(); });
  for (auto* waiting : std::initializer_list<std::future<size_t>*>{&listed, &assigned})
    EXPECT_EQ(waiting->wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(got.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(submitted.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  ASSERT_EQ(sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const int64_t second = submitted.get();
  cycled.get();
  EXPECT_GE(listed.get(), 1u);
  got.get();
  assigned.get();
  EXPECT_EQ(plane_->Get(second).state, plane_->List(JobFilter())[1].state);
}

// A cordon keeps new work off a node, not what runs there: across a restart too.
TEST_F(ControlPlaneTest, AJobOnACordonedNodeIsAdoptedAfterARestart) {
  const int64_t a = plane_->Submit(R"({"gpus": 8, "image": "busybox"})");
  const int64_t b = plane_->Submit(R"({"gpus": 8, "image": "busybox"})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(a).state, "scheduled");
  ASSERT_EQ(plane_->Get(b).state, "scheduled");
  plane_->NodeAction("dgx-1", "cordon");
  Open(2);
  EXPECT_NE(plane_->recovery_summary().find("2 placed jobs adopted, 0 lost"), std::string::npos)
      << plane_->recovery_summary();
  EXPECT_EQ(plane_->Get(a).state, "scheduled");
  EXPECT_EQ(plane_->Get(b).state, "scheduled");
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);  // and still cordoned
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
}

TEST_F(ControlPlaneTest, ASubmittedJobIsPlacedAndKeptAcrossARestart) {
  const int64_t a = plane_->Submit(R"({"name": "train", "gpus": 8, "image": "busybox"})");
  const int64_t b = plane_->Submit("image: x\ngpus: 2\nreplicas: 2\nuser: ann\n");  // YAML too
  EXPECT_EQ(plane_->Get(a).state, "pending");
  plane_->Cycle();
  const StoredJob placed = plane_->Get(a);
  EXPECT_EQ(placed.state, "scheduled");
  EXPECT_NE(placed.placements.find("gpuIds"), std::string::npos);
  EXPECT_EQ(plane_->Get(b).name, "job-2");
  EXPECT_EQ(plane_->Get(b).user, "ann");
  EXPECT_EQ(plane_->Get(b).state, "scheduled");
  const std::vector<int> free_before = FreeGpus();
  EXPECT_EQ(free_before[0] + free_before[1], 4);

  Open(2);  // a restart: the engine is rebuilt from the state
  EXPECT_NE(plane_->recovery_summary().find("2 placed jobs adopted"), std::string::npos)
      << plane_->recovery_summary();
  EXPECT_EQ(plane_->Get(a).state, "scheduled");
  EXPECT_EQ(plane_->Get(a).placements, placed.placements);
  EXPECT_EQ(FreeGpus(), free_before);  // the same GPUs are held, not placed again
  // Ids go on after the highest kept one.
  EXPECT_EQ(plane_->Submit(R"({"image": "x", "gpus": 1})"), 3);
  const std::vector<StoredEvent> events = plane_->Events(a).events;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].state, "pending");
  EXPECT_EQ(events[1].state, "scheduled");
}

TEST_F(ControlPlaneTest, PendingJobsKeepTheirAgeAcrossARestart) {
  Open(1);
  const int64_t busy = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1000})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(busy).state, "scheduled");
  const int64_t old = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 0})");
  now_ += 10 * 3600;  // ten hours of aging: 100 points, the cap
  const int64_t young = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 50})");
  plane_->Cycle();
  Open(1);  // a restart
  plane_->Stop(busy);
  plane_->Cycle();
  // Aged, the old job outranks the young one's 50 points; with its age reset it would not.
  EXPECT_EQ(plane_->Get(old).state, "scheduled");
  EXPECT_EQ(plane_->Get(young).state, "pending");
}

// A pending job says why it waits, as the engine last found (berth inspect's "waiting").
TEST_F(ControlPlaneTest, APendingJobSaysWhyItWaits) {
  const int64_t placed = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Submit(R"({"image": "x", "gpus": 8})");
  const int64_t waiting = plane_->Submit(R"({"image": "x", "gpus": 8})");
  const auto listed_reason = [&](int64_t id) {
    for (const StoredJob& j : plane_->List(JobFilter()))
      if (j.id == id) return j.reason;
    return std::string("not listed");
  };
  EXPECT_EQ(plane_->WhyWaiting(waiting), "");  // not tried yet
  EXPECT_EQ(listed_reason(waiting), "submitted");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(waiting).state, "pending");
  EXPECT_NE(plane_->WhyWaiting(waiting).find("no capacity fits the job"), std::string::npos)
      << plane_->WhyWaiting(waiting);
  EXPECT_EQ(plane_->WhyWaiting(placed), "");
  // A listing (berth ps) says why a pending job waits now; the job itself keeps how it came to.
  EXPECT_EQ(listed_reason(waiting), plane_->WhyWaiting(waiting));
  EXPECT_EQ(plane_->Get(waiting).reason, "submitted");
  EXPECT_EQ(listed_reason(placed).rfind("placed on ", 0), 0u) << listed_reason(placed);
  // Once it starts, the listing shows its transition's reason again.
  plane_->Stop(placed);
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(waiting).state, "scheduled");
  EXPECT_EQ(listed_reason(waiting).rfind("placed on ", 0), 0u) << listed_reason(waiting);
}

// A job accepted before images were required keeps its place at a restart: the rule is for
// new submissions.
TEST_F(ControlPlaneTest, AStoredJobWithoutAnImageIsKeptAtARestart) {
  const int64_t placed = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Submit(R"({"image": "x", "gpus": 8})");
  const int64_t waiting = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(placed).state, "scheduled");
  ASSERT_EQ(plane_->Get(waiting).state, "pending");
  std::vector<StoreWrite> writes;
  for (const int64_t id : {placed, waiting}) {
    StoredJob old = plane_->Get(id);
    old.spec = R"({"gpus": 8})";
    writes.push_back(StoreWrite::Put(old));
  }
  plane_.reset();
  store_->Wait(store_->Enqueue(std::move(writes)));
  Open(2);
  EXPECT_EQ(plane_->Get(placed).state, "scheduled") << plane_->Get(placed).reason;
  EXPECT_EQ(plane_->Get(waiting).state, "pending") << plane_->Get(waiting).reason;
}

TEST_F(ControlPlaneTest, AJobWhoseNodeIsGoneAfterARestartIsLostAndQueuedAgain) {
  const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 8})");
  const int64_t b = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(a).state, "scheduled");
  ASSERT_EQ(plane_->Get(b).state, "scheduled");
  Open(1);  // dgx-1 is gone
  int pending = 0, scheduled = 0;
  for (int64_t id : {a, b}) {
    const std::string state = plane_->Get(id).state;
    pending += state == "pending";
    scheduled += state == "scheduled";
    if (state == "pending") {
      const std::vector<StoredEvent> events = plane_->Events(id).events;
      ASSERT_GE(events.size(), 2u);
      EXPECT_EQ(events[events.size() - 2].state, "lost");
      EXPECT_NE(events[events.size() - 2].reason.find("could not be taken again"),
                std::string::npos);
    }
  }
  EXPECT_EQ(pending, 1);
  EXPECT_EQ(scheduled, 1);
}

TEST_F(ControlPlaneTest, BadSpecsAreRefusedNamingTheField) {
  std::string message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 0})", &message), 400);
  EXPECT_NE(message.find("gpus: expected an integer from 1"), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "colour": "red"})", &message), 400);
  EXPECT_NE(message.find("unknown field \"colour\""), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "queue": "nope"})", &message), 400);
  EXPECT_NE(message.find("unknown queue \"nope\""), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 9})", &message), 400);
  EXPECT_NE(message.find("no node of this cluster can ever hold it"), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "submit": 5})", &message),
            400);  // a trace's field
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "command": "sleep 1"})", &message), 400);
  EXPECT_NE(message.find("command: expected a list"), std::string::npos) << message;
  EXPECT_EQ(ApiStatus("{", &message), 400);
  // A submitted job runs a container: without an image it could only fail on its node.
  EXPECT_EQ(ApiStatus(R"({"gpus": 1})", &message), 400);
  EXPECT_NE(message.find("missing required field \"image\": the container image the job runs"),
            std::string::npos)
      << message;
  EXPECT_EQ(ApiStatus(R"({"groups": [{"gpus": 1, "image": "x"}, {"gpus": 1}]})", &message), 400);
  EXPECT_NE(message.find("groups[1]"), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "command": ["sleep", "1"], "env": {"A": "1"}})",
                      &message),
            201);
  // Review: a YAML alias of a large env, named by every group, stood for 100 MB of spec from
  // an 805 KB body. 250 KB of env once, named by 8 groups: refused; by 2: taken.
  const auto aliased = [](int groups) {
    std::string env = "{";
    for (int i = 0; i < 60; ++i)
      env += (i ? ", V" : "V") + std::to_string(i) + ": " + std::string(4000, 'v');
    std::string yaml = "groups:\n  - {cpuMilli: 100, image: x, env: &e " + env + "}}\n";
    for (int g = 1; g < groups; ++g) yaml += "  - {cpuMilli: 100, image: x, env: *e}\n";
    return yaml;
  };
  ASSERT_LT(aliased(8).size(), size_t{1} << 20);
  EXPECT_EQ(ApiStatus(aliased(8), &message), 400);
  EXPECT_NE(message.find("with its YAML aliases expanded the spec holds 192"), std::string::npos)
      << message.substr(0, 300);
  EXPECT_EQ(ApiStatus(aliased(2), &message), 201) << message.substr(0, 300);
  // The NVIDIA runtime would expose every GPU to a job naming "all" (review).
  EXPECT_EQ(ApiStatus(R"({"image": "x", "env": {"NVIDIA_VISIBLE_DEVICES": "all"}})", &message),
            400);
  EXPECT_NE(message.find("env.NVIDIA_VISIBLE_DEVICES: berth sets it"), std::string::npos)
      << message;
  // Nothing refused was kept.
  EXPECT_EQ(plane_->List({}).size(), 2u);
}

// A job that takes no GPU says where it was placed (review: "placed on ").
TEST_F(ControlPlaneTest, ACpuOnlyJobSaysWhichNodeItIsPlacedOn) {
  const int64_t id = plane_->Submit(R"({"image": "x", "cpuMilli": 1000})");
  plane_->Cycle();
  const std::string reason = plane_->Get(id).reason;
  EXPECT_EQ(plane_->Get(id).state, "scheduled") << reason;
  EXPECT_EQ(reason.rfind("placed on ", 0), 0u) << reason;
  EXPECT_NE(reason.find(" (no GPU)"), std::string::npos) << reason;
  EXPECT_GT(reason.size(), std::string("placed on  (no GPU)").size()) << reason;
}

// What the engine would refuse is refused at once, not accepted and failed a cycle later.
TEST_F(ControlPlaneTest, WhatTheEngineRefusesIsA400) {
  Open(1, {{"small", 1, 4, {}}});
  std::string message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 8, "queue": "small"})", &message), 400);
  EXPECT_NE(message.find("cap: queue small may hold at most 4 GPUs"), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "priorityClass": "gold"})", &message), 400);
  EXPECT_NE(message.find("priorityClass: unknown class \"gold\""), std::string::npos) << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 4, "queue": "small"})", &message), 201);
}

TEST_F(ControlPlaneTest, StopAndRemove) {
  const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  try {
    plane_->Remove(a);
    FAIL() << "a placed job was removed";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
  }
  EXPECT_EQ(plane_->Stop(a).state, "stopped");
  EXPECT_EQ(FreeGpus()[0] + FreeGpus()[1], 16);  // its GPUs are free again
  EXPECT_THROW(plane_->Stop(a), ApiError);
  plane_->Remove(a);
  try {
    plane_->Get(a);
    FAIL() << "a removed job is still there";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
  }
  Open(2);
  EXPECT_TRUE(plane_->List({}).empty());
}

TEST_F(ControlPlaneTest, AGuaranteeReclaimsFromABorrowerAndTheBorrowerWaitsAgain) {
  VcGuarantee node;
  node.cell_type = "s/node";
  node.count = 1;
  Open(1, {{"owner", 1, -1, {node}}, {"other", 1, -1, {}}});
  const int64_t borrower = plane_->Submit(R"({"image": "x", "gpus": 8, "queue": "other"})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(borrower).state, "scheduled");
  const int64_t owner = plane_->Submit(R"({"image": "x", "gpus": 8, "queue": "owner"})");
  for (int i = 0; i < 3; ++i) plane_->Cycle();
  EXPECT_EQ(plane_->Get(owner).state, "scheduled");
  EXPECT_EQ(plane_->Get(borrower).state, "pending");
  bool preempted = false;
  for (const StoredEvent& t : plane_->Events(borrower).events) preempted |= t.state == "preempted";
  EXPECT_TRUE(preempted);
  // Why it waits now (nothing fits), not how it came to wait (the preemption: its events say).
  plane_->Cycle();
  EXPECT_EQ(plane_->WhyWaiting(borrower), "no capacity fits the job");
  for (const StoredJob& j : plane_->List(JobFilter()))
    if (j.id == borrower) {
      EXPECT_EQ(j.reason, "no capacity fits the job");
    }
}

// A job is moved at most once in its life to make room for a starving job: a restart
// remembers the move (review: the rebuilt engine forgot it and moved the job again).
TEST_F(ControlPlaneTest, AMovedJobIsNotMovedAgainAfterARestart) {
  reserve_after_s_ = 30;
  Open(2);
  const auto pinned = [](int gpus, const std::string& node) {
    return R"({"image": "x", "gpus": )" + std::to_string(gpus) +
           R"(, "preemptible": false, "nodeSelector": {"node": ")" + node + R"("}})";
  };
  const int64_t six = plane_->Submit(pinned(6, "dgx-0"));
  const int64_t two = plane_->Submit(pinned(2, "dgx-0"));
  plane_->Cycle();
  const int64_t movable = plane_->Submit(R"({"image": "x", "gpus": 2})");  // dgx-1: nowhere else
  plane_->Cycle();
  plane_->Stop(two);  // room for it on dgx-0
  const int64_t big = plane_->Submit(R"({"image": "x", "gpus": 8})");
  for (int i = 0; i < 200 && plane_->Get(big).state != "scheduled"; ++i) plane_->Cycle();
  ASSERT_EQ(plane_->Get(big).state, "scheduled") << plane_->WhyWaiting(big);
  for (int i = 0; i < 5; ++i) plane_->Cycle();
  ASSERT_EQ(plane_->Get(movable).state, "scheduled");
  const auto preemptions = [&] {
    int n = 0;
    for (const StoredEvent& e : plane_->Events(movable).events) n += e.state == "preempted";
    return n;
  };
  ASSERT_EQ(preemptions(), 1);  // moved to dgx-0, where it runs now beside `six`

  Open(2);  // a restart
  // The same layout again, mirrored: only dgx-0 can be freed for another 8-GPU job, and the
  // moved job would fit in the 2 GPUs left on dgx-1.
  plane_->Stop(big);
  plane_->Stop(six);
  const int64_t stays = plane_->Submit(pinned(6, "dgx-1"));
  plane_->Cycle();
  const int64_t again = plane_->Submit(R"({"image": "x", "gpus": 8})");
  for (int i = 0; i < 300; ++i) plane_->Cycle();
  EXPECT_EQ(plane_->Get(stays).state, "scheduled");
  EXPECT_EQ(plane_->Get(movable).state, "scheduled");
  EXPECT_EQ(preemptions(), 1);
  EXPECT_EQ(plane_->Get(again).state, "pending");
}

TEST_F(ControlPlaneTest, ACallersJobIsItsOwnAndGoesOnlyToItsQueues) {
  Open(2, {{"research", 1, -1, {}}, {"other", 1, -1, {}}});
  const Caller alice{"alice", false, false, {"research"}, ""};
  // The token names the user; the spec need not.
  const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 1, "queue": "research"})", alice);
  EXPECT_EQ(plane_->Get(a).user, "alice");
  EXPECT_EQ(
      plane_->Submit(R"({"image": "x", "gpus": 1, "queue": "research", "user": "alice"})", alice),
      a + 1);
  const auto status = [&](const std::string& body, std::string* message) {
    try {
      plane_->Submit(body, alice);
    } catch (const ApiError& e) {
      *message = e.what();
      return e.status;
    }
    return 201;
  };
  std::string message;
  EXPECT_EQ(status(R"({"image": "x", "gpus": 1, "queue": "other"})", &message), 403);
  EXPECT_NE(message.find("alice may not submit to queue \"other\"; the tokens file allows: "
                         "research"),
            std::string::npos)
      << message;
  EXPECT_EQ(status(R"({"image": "x", "gpus": 1, "queue": "research", "user": "bob"})", &message),
            403);
  EXPECT_NE(message.find("cannot be submitted as \"bob\""), std::string::npos) << message;
  EXPECT_EQ(plane_->List(JobFilter()).size(), 2u);  // nothing kept of the refusals
  // A restart keeps the user, though the stored spec never named it.
  Open(2, {{"research", 1, -1, {}}, {"other", 1, -1, {}}});
  EXPECT_EQ(plane_->Get(a).user, "alice");
  EXPECT_EQ(plane_->Get(a).state, "pending");
}

// A drained node's job waits again and lands on the other node; the cordon outlives a restart
// and is in the event log; uncordon opens the node again.
TEST_F(ControlPlaneTest, ADrainEvictsAndTheCordonIsKept) {
  const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const std::string first = plane_->Get(a).placements;
  const std::string node = first.find("dgx-0") != std::string::npos ? "dgx-0" : "dgx-1";
  const std::string other = node == "dgx-0" ? "dgx-1" : "dgx-0";
  plane_->NodeAction(node, "drain");
  EXPECT_EQ(plane_->Get(a).state, "pending");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(a).state, "scheduled");
  EXPECT_NE(plane_->Get(a).placements.find(other), std::string::npos);
  Open(2);
  const int n = node == "dgx-0" ? 0 : 1;
  EXPECT_TRUE(plane_->Nodes()[n].cordoned);
  EXPECT_FALSE(plane_->Nodes()[1 - n].cordoned);
  const int64_t b = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(b).state, "pending");  // the only free node is cordoned
  plane_->NodeAction(node, "uncordon");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(b).state, "scheduled");
  std::vector<std::string> node_events;
  for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
    if (!e.node.empty()) node_events.push_back(e.node + " " + e.state);
  EXPECT_EQ(node_events, (std::vector<std::string>{node + " drained", node + " uncordoned"}));
  bool evicted = false;
  for (const StoredEvent& e : plane_->Events(a).events) evicted |= e.state == "preempted";
  EXPECT_TRUE(evicted);
  for (const auto& [target, action, status] :
       std::vector<std::tuple<std::string, std::string, int>>{{"nope", "cordon", 404},
                                                              {node, "reboot", 400}}) {
    try {
      plane_->NodeAction(target, action);
      ADD_FAILURE() << action << " " << target << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, status) << e.what();
    }
  }
}

TEST_F(ControlPlaneTest, ListFiltersAndPages) {
  for (int i = 0; i < 5; ++i)
    plane_->Submit(R"({"image": "x", "gpus": 1, "user": "u)" + std::to_string(i % 2) + "\"}");
  JobFilter filter;
  filter.user = "u1";
  EXPECT_EQ(plane_->List(filter).size(), 2u);
  filter = {};
  filter.limit = 2;
  filter.after = 2;
  const std::vector<StoredJob> page = plane_->List(filter);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].id, 3);
  EXPECT_EQ(page[1].id, 4);
}

// A volume's host path must lie under a directory the admin allowed (berth server
// --allow-mount), component by component.
TEST_F(ControlPlaneTest, VolumesMountOnlyWhatTheAdminAllows) {
  std::string message;
  EXPECT_EQ(ApiStatus(R"({"gpus": 1, "image": "x", "volumes": ["/data/x:/x"]})", &message), 403);
  EXPECT_NE(message.find("volumes: \"/data/x:/x\": this server allows no host paths (its admin "
                         "allows directories with --allow-mount DIR, on berth server or berth up)"),
            std::string::npos)
      << message;

  Open(2, {}, {"/data", "/scratch/shared"});
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "volumes": ["/data/x:/x:ro", "/data:/all",
                                                  "/scratch/shared/a/b:/s"]})",
                      &message),
            201)
      << message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "volumes": ["/database:/x"]})", &message), 403);
  EXPECT_NE(message.find("volumes: \"/database:/x\": the host path /database is not under a "
                         "directory this server allows (--allow-mount): /data, "
                         "/scratch/shared; mount from under one of them"),
            std::string::npos)
      << message;
  for (const std::string refused :
       {"/etc:/etc", "/scratch:/s", "/scratch/sharedx:/s", "/:/host", "/dat:/d"}) {
    EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "volumes": [")" + refused + "\"]}", &message),
              403)
        << refused;
    EXPECT_NE(message.find("is not under a directory this server allows"), std::string::npos)
        << message;
  }
  // Every group's volumes are checked, the read-only ones too.
  EXPECT_EQ(ApiStatus(R"({"groups": [{"gpus": 1, "image": "x", "volumes": ["/data:/d"]},
                                     {"gpus": 1, "image": "x", "volumes": ["/home/u:/h:ro"]}]})",
                      &message),
            403);
  EXPECT_NE(message.find("\"/home/u:/h:ro\""), std::string::npos) << message;
  EXPECT_EQ(plane_->List({}).size(), 1u);  // nothing refused was kept
}

// What a submission is refused for, a restart checks again: a job whose volume the narrower
// list no longer allows is failed with the reason, never run with it.
TEST_F(ControlPlaneTest, ARestartWithANarrowerAllowListFailsTheJobWithTheReason) {
  Open(2, {}, {"/data", "/models"});
  const int64_t a =
      plane_->Submit(R"({"image": "x", "gpus": 8, "volumes": ["/models/llama:/m:ro"]})");
  const int64_t b = plane_->Submit(R"({"image": "x", "gpus": 8, "volumes": ["/data/b:/b"]})");
  const int64_t c = plane_->Submit(R"({"image": "x", "gpus": 8, "volumes": ["/models:/m"]})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(a).state, "scheduled");
  ASSERT_EQ(plane_->Get(b).state, "scheduled");
  ASSERT_EQ(plane_->Get(c).state, "pending");

  Open(2, {}, {"/data"});
  EXPECT_NE(plane_->recovery_summary().find("1 placed job adopted"), std::string::npos)
      << plane_->recovery_summary();
  EXPECT_NE(plane_->recovery_summary().find("2 failed"), std::string::npos)
      << plane_->recovery_summary();
  for (int64_t id : {a, c}) {
    const StoredJob job = plane_->Get(id);
    EXPECT_EQ(job.state, "failed");
    EXPECT_NE(job.reason.find("after a restart its spec no longer suits this server's cluster, "
                              "queues, policy or allowed mounts: volumes: "),
              std::string::npos)
        << job.reason;
    EXPECT_NE(job.reason.find("is not under a directory this server allows (--allow-mount): /data"),
              std::string::npos)
        << job.reason;
  }
  EXPECT_EQ(plane_->Get(b).state, "scheduled");
  const std::vector<int> free = FreeGpus();
  EXPECT_EQ(free[0] + free[1], 8);  // the failed job's GPUs are free again
  // Ended for good: with the wider list back, a restart does not take it for one still
  // stopping, holding its old GPUs (review).
  EXPECT_TRUE(plane_->Get(a).placements.empty());
  Open(2, {}, {"/data", "/models"});
  EXPECT_EQ(plane_->Get(a).state, "failed");
  EXPECT_FALSE(plane_->Stopping(a));
  EXPECT_EQ(plane_->recovery_summary().find("still holding GPUs"), std::string::npos)
      << plane_->recovery_summary();
}

// A policy that adds the class "gold" to berth's.
constexpr const char* kGoldPolicy =
    "name: gold\n"
    "priorityClasses: {prod: 1000, default: 100, opportunistic: -1, gold: 500}\n";

// A reload keeps every job as it is: the placed one at exactly its GPUs, the pending one
// pending (and in the new engine: it starts once the GPUs are free); what the new policy
// defines is usable at once, and the event log says who applied what.
TEST_F(ControlPlaneTest, AReloadKeepsPlacedJobsAtTheirGpusAndPendingJobsPending) {
  Open(1);
  const int64_t placed = plane_->Submit(R"({"image": "x", "gpus": 4})");
  plane_->Cycle();
  const int64_t waiting = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const StoredJob before = plane_->Get(placed);
  ASSERT_EQ(before.state, "scheduled");
  ASSERT_EQ(plane_->Get(waiting).state, "pending");
  std::string message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "priorityClass": "gold"})", &message), 400);

  const std::string reason = plane_->ApplyPolicy(kGoldPolicy, "root");
  EXPECT_EQ(reason,
            "policy \"gold\" applied by root: 1 placed jobs kept at their GPUs, 1 pending jobs "
            "queued again");
  EXPECT_EQ(plane_->Get(placed).state, "scheduled");
  EXPECT_EQ(plane_->Get(placed).placements, before.placements);
  EXPECT_EQ(plane_->Get(placed).updated, before.updated);  // no transition recorded
  EXPECT_EQ(FreeGpus(), std::vector<int>{4});
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(waiting).state, "pending");  // 8 do not fit beside the 4 held
  const int64_t gold = plane_->Submit(R"({"image": "x", "gpus": 1, "priorityClass": "gold"})");
  plane_->Stop(gold);
  plane_->Stop(placed);
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(waiting).state, "scheduled");
  std::vector<std::string> server_events;
  for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
    if (e.job == 0 && e.node.empty()) server_events.push_back(e.state + ": " + e.reason);
  EXPECT_EQ(server_events, std::vector<std::string>{"policy-applied: " + reason});
}

// A file with a mistake, or a policy that would drop what a job needs, changes nothing: the
// jobs, the policy in force and the stored one stay as they were.
TEST_F(ControlPlaneTest, ABadPolicyChangesNothing) {
  plane_->ApplyPolicy(kGoldPolicy, "root");
  const int64_t gold = plane_->Submit(R"({"image": "x", "gpus": 8, "priorityClass": "gold"})");
  plane_->Cycle();
  const StoredJob before = plane_->Get(gold);
  ASSERT_EQ(before.state, "scheduled");
  std::string message;
  EXPECT_EQ(
      Status([&] { plane_->ApplyPolicy("name: x\nagingCap: -1\ncolour: red\n", ""); }, &message),
      400);
  EXPECT_NE(message.find("policy:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("colour"), std::string::npos) << message;
  EXPECT_EQ(Status([&] { plane_->ApplyPolicy("name: plain\n", "root"); }, &message), 409);
  EXPECT_NE(message.find("would not keep 1 jobs as they are, so nothing was changed; job " +
                         std::to_string(gold) + " (default): would be failed"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("priorityClass: unknown class \"gold\""), std::string::npos) << message;
  EXPECT_EQ(plane_->Get(gold).state, "scheduled");
  EXPECT_EQ(plane_->Get(gold).updated, before.updated);
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "priorityClass": "gold"})", &message), 201)
      << message;
  Open(2);  // the stored policy is still the one applied last
  EXPECT_EQ(plane_->Get(gold).state, "scheduled");
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "priorityClass": "gold"})", &message), 201)
      << message;
}

TEST_F(ControlPlaneTest, TheAppliedPolicyAndQueuesSurviveARestart) {
  plane_->ApplyPolicy(kGoldPolicy, "root");
  plane_->ApplyQueues("virtualClusters:\n  research: {guarantees: {s/node: 1}}\n", "root");
  Open(2);  // the flags say berth and no queues: the applied ones win
  EXPECT_NE(plane_->recovery_summary().find(
                "policy \"gold\" applied through the API (kept in the state; --policy not used); "
                "queues applied through the API (kept in the state; --vcs not used)"),
            std::string::npos)
      << plane_->recovery_summary();
  std::string message;
  EXPECT_EQ(ApiStatus(R"({"image": "x", "gpus": 1, "priorityClass": "gold", "queue": "research"})",
                      &message),
            201)
      << message;
  std::vector<std::string> queues;
  for (const QueueStatus& q : plane_->Queues())
    queues.push_back(q.name + " " + std::to_string(q.guarantee_gpus));
  EXPECT_EQ(queues, (std::vector<std::string>{"research 8.000000", "default 0.000000"}));
}

TEST_F(ControlPlaneTest, TheRulesInForceAreFilesThatApplyTakesBack) {
  RulesText text = plane_->InForce();
  EXPECT_EQ(text.policy_name, "berth");
  EXPECT_EQ(text.policy_from, "built in");
  EXPECT_EQ(text.queues_from, "none given");
  // The built-in policy reads back as itself, and the empty queues file as no queue.
  Policy builtin, shown = ParsePolicyYaml(text.policy_yaml, "shown");
  ASSERT_TRUE(BuiltinPolicy("berth", &builtin));
  EXPECT_EQ(shown.name, "berth");
  EXPECT_EQ(shown.candidates, builtin.candidates);
  EXPECT_EQ(shown.scores.size(), builtin.scores.size());
  EXPECT_TRUE(ParseVcYaml(text.queues_yaml, "shown").empty());
  EXPECT_NE(plane_->ApplyPolicy(text.policy_yaml, "root").find("applied"), std::string::npos);
  EXPECT_NE(plane_->ApplyQueues(text.queues_yaml, "root").find("applied"), std::string::npos);

  const std::string queues = "virtualClusters:\n  research: {guarantees: {s/node: 1}}\n";
  plane_->ApplyPolicy(kGoldPolicy, "root");
  plane_->ApplyQueues(queues, "root");
  for (int restart = 0; restart < 2; ++restart) {
    text = plane_->InForce();
    EXPECT_EQ(text.policy_name, "gold");
    EXPECT_EQ(text.policy_yaml, kGoldPolicy);
    EXPECT_EQ(text.policy_from, "applied through the API");
    EXPECT_EQ(text.queues_yaml, queues);
    EXPECT_EQ(text.queues_from, "applied through the API");
    Open(2);
  }
}

TEST_F(ControlPlaneTest, AQueueWithJobsCannotBeRemoved) {
  Open(1, {{"research", 1, -1, {}}});
  const int64_t job = plane_->Submit(R"({"image": "x", "gpus": 1, "queue": "research"})");
  std::string message;
  EXPECT_EQ(Status([&] { plane_->ApplyQueues("virtualClusters:\n  other:\n", "root"); }, &message),
            409);
  EXPECT_NE(message.find("queue \"research\" has 1 jobs not ended (pending or placed), so it "
                         "cannot be removed"),
            std::string::npos)
      << message;
  // Guarantees the cluster cannot give are the engine's 400, naming the file's line.
  EXPECT_EQ(Status(
                [&] {
                  plane_->ApplyQueues("virtualClusters:\n  research: {guarantees: {s/node: 2}}\n",
                                      "root");
                },
                &message),
            400);
  EXPECT_NE(message.find("queues:2"), std::string::npos) << message;
  EXPECT_EQ(plane_->Queues().size(), 2u);  // research and default, as before
  plane_->ApplyQueues("virtualClusters:\n  research:\n  other:\n", "root");
  EXPECT_EQ(plane_->Queues().size(), 3u);
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(job).state, "scheduled");
  // Once its jobs have ended, the queue may go.
  plane_->Stop(job);
  plane_->ApplyQueues("virtualClusters:\n  other:\n", "root");
  EXPECT_EQ(plane_->Queues().size(), 2u);
  EXPECT_EQ(plane_->Get(job).state, "stopped");
}

// GET /v1/cells counts the GPUs the jobs hold.
TEST_F(ControlPlaneTest, CellsCountTheGpusTheJobsHold) {
  plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Submit(R"({"image": "x", "gpus": 2})");
  plane_->Cycle();
  const nlohmann::json cells = plane_->Cells();
  EXPECT_EQ(cells["gpus"], 16);
  EXPECT_EQ(cells["tree"]["used"], 10);
  EXPECT_EQ(cells["tree"]["free"], 6);
  int used_nodes = 0;
  for (const nlohmann::json& type : cells["types"])
    if (type["level"] == "node") used_nodes = type["used"].get<int>() + type["partial"].get<int>();
  EXPECT_EQ(used_nodes, 2);
}

}  // namespace
}  // namespace berth
