// Nodes that join a server started without a cluster (berth server --cluster none): the shape
// an agent sends, checked (JoinNode), and the control plane growing, scheduling onto the new
// node and keeping it across a restart.
#include "server/node_join.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/policy_file.h"
#include "protocol/agent_protocol.h"
#include "server/control_plane.h"
#include "server_test_util.h"

namespace berth {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What the agent of an 8-GPU DGX declared by a file registers.
NodeRegistration Declared(const std::string& name, int64_t memory_mib = 81920) {
  const Cluster dgx = Dgx(1);
  NodeRegistration r;
  r.declared = dgx.nodes[0];
  r.declared->name = "what-the-file-calls-it";
  r.models = dgx.models;
  r.models[0].memory_mib = memory_mib;
  for (size_t g = 0; g < dgx.nodes[0].gpus.size(); ++g)
    r.gpu_uuids.push_back("GPU-" + name + "-" + std::to_string(g));
  r.simulated = true;
  return r;
}

// The same agent finding one GPU fewer (one fell off the bus).
NodeRegistration OneGpuFewer(const std::string& name) {
  NodeRegistration r = Declared(name);
  r.declared->gpus.pop_back();
  r.gpu_uuids.pop_back();
  return r;
}

TEST(JoinNodeTest, AddsTheNodeAsTheAgentGivesItUnderItsOwnName) {
  Cluster cluster;
  ASSERT_EQ(JoinNode("gpu-a", Declared("gpu-a"), &cluster), "");
  ASSERT_EQ(cluster.nodes.size(), 1u);
  EXPECT_EQ(cluster.nodes[0].name, "gpu-a");
  EXPECT_EQ(cluster.nodes[0].gpus.size(), 8u);
  ASSERT_EQ(cluster.models.size(), 1u);
  EXPECT_EQ(cluster.models[0].name, "A100");
  // A second node of the same model adds no model; it goes at the end.
  ASSERT_EQ(JoinNode("gpu-b", Declared("gpu-b"), &cluster), "");
  ASSERT_EQ(cluster.nodes.size(), 2u);
  EXPECT_EQ(cluster.nodes[1].name, "gpu-b");
  EXPECT_EQ(cluster.models.size(), 1u);
  EXPECT_EQ(ValidateCluster(cluster), "");
}

TEST(JoinNodeTest, RefusesWhatCannotJoinLeavingTheClusterAsItWas) {
  Cluster cluster;
  ASSERT_EQ(JoinNode("gpu-a", Declared("gpu-a"), &cluster), "");
  const auto refused = [&](const std::string& name, const NodeRegistration& r) {
    const std::string why = JoinNode(name, r, &cluster);
    EXPECT_EQ(cluster.nodes.size(), 1u) << why;
    return why;
  };
  std::string why = refused("gpu-b", Declared("gpu-b", 40960));
  EXPECT_TRUE(Has(why, "GPU model \"A100\" has 40960 MiB here and 81920 MiB")) << why;
  NodeRegistration no_shape = Declared("gpu-b");
  no_shape.declared.reset();
  why = refused("gpu-b", no_shape);
  EXPECT_TRUE(Has(why, "sent no node shape")) << why;
  NodeRegistration fewer = Declared("gpu-b");
  fewer.gpu_uuids.pop_back();
  why = refused("gpu-b", fewer);
  EXPECT_TRUE(Has(why, "sent 8 GPUs and 7 GPU UUIDs")) << why;
  NodeRegistration no_model = Declared("gpu-b");
  no_model.declared->gpus[3].model = "H100";
  why = refused("gpu-b", no_model);
  EXPECT_TRUE(Has(why, "did not send GPU model \"H100\"")) << why;
  NodeRegistration bad_switch = Declared("gpu-b");
  bad_switch.declared->switches[1].socket = 5;
  why = refused("gpu-b", bad_switch);
  EXPECT_TRUE(Has(why, "PCIe switch 1 is under socket 5")) << why;
  NodeRegistration twice = Declared("gpu-b");
  twice.declared->sockets[0].cpus.push_back(twice.declared->sockets[0].cpus[0]);
  why = refused("gpu-b", twice);
  EXPECT_TRUE(Has(why, "CPU 0 is listed twice")) << why;
  NodeRegistration far = Declared("gpu-b");
  far.declared->sockets[0].cpus.push_back(70000);
  why = refused("gpu-b", far);
  EXPECT_TRUE(Has(why, "CPU 70000 is outside 0-65535")) << why;
  NodeRegistration nothing;
  nothing.declared = Node();
  why = refused("gpu-b", nothing);
  EXPECT_TRUE(Has(why, "neither GPUs nor CPUs")) << why;
  for (const std::string& name :
       std::vector<std::string>{"", ".", "..", "-x", "a b", "n\n1", std::string(64, 'n')})
    EXPECT_TRUE(Has(refused(name, Declared("x")), "1 to 63 letters")) << name;
}

TEST(JoinNodeTest, OnlyTheModelsOfItsGpusCount) {
  Cluster cluster;
  NodeRegistration extra = Declared("gpu-a");
  extra.models.push_back({"H100", 1, {}});  // sent, not used by its GPUs
  ASSERT_EQ(JoinNode("gpu-a", extra, &cluster), "");
  EXPECT_EQ(cluster.FindModel("H100"), nullptr);
  NodeRegistration h100 = Declared("gpu-b");
  for (Gpu& g : h100.declared->gpus) g.model = "H100";
  h100.models = {{"H100", 81920, {}}};
  EXPECT_EQ(JoinNode("gpu-b", h100, &cluster), "");
}

TEST(JoinNodeTest, AFirstNodeMayHaveOnlyCpus) {
  Cluster cluster;
  NodeRegistration cpu_only;
  cpu_only.declared = Dgx(1).nodes[0];
  cpu_only.declared->gpus.clear();
  cpu_only.declared->switches.clear();
  ASSERT_EQ(JoinNode("cpu-a", cpu_only, &cluster), "");
  ASSERT_EQ(JoinNode("gpu-a", Declared("gpu-a"), &cluster), "");
  EXPECT_EQ(cluster.nodes.size(), 2u);
}

// The models are those of the nodes' GPUs: once the last node of a model has other GPUs, the
// model's name may come back with another memory size.
TEST(JoinNodeTest, AModelNoNodeHasIsDropped) {
  Cluster cluster;
  ASSERT_EQ(JoinNode("gpu-a", Declared("gpu-a"), &cluster), "");
  NodeRegistration h100 = Declared("gpu-a");
  for (Gpu& g : h100.declared->gpus) g.model = "H100";
  h100.models = {{"H100", 81920, {}}};
  ASSERT_EQ(JoinNode("gpu-a", h100, &cluster), "");
  EXPECT_EQ(cluster.FindModel("A100"), nullptr);
  EXPECT_EQ(JoinNode("gpu-b", Declared("gpu-b", 40960), &cluster), "");
  ASSERT_NE(cluster.FindModel("A100"), nullptr);
  EXPECT_EQ(cluster.FindModel("A100")->memory_mib, 40960);
}

TEST(JoinNodeTest, ANodeThatJoinedAgainWithOtherHardwareIsReplacedInPlace) {
  Cluster cluster;
  ASSERT_EQ(JoinNode("gpu-a", Declared("gpu-a"), &cluster), "");
  ASSERT_EQ(JoinNode("gpu-b", Declared("gpu-b"), &cluster), "");
  const NodeRegistration fewer = OneGpuFewer("gpu-a");
  ASSERT_EQ(JoinNode("gpu-a", fewer, &cluster), "");
  ASSERT_EQ(cluster.nodes.size(), 2u);
  EXPECT_EQ(cluster.nodes[0].name, "gpu-a");
  EXPECT_EQ(cluster.nodes[0].gpus.size(), 7u);
  EXPECT_EQ(cluster.nodes[1].gpus.size(), 8u);
}

TEST(JoinNodeTest, AtMostKMaxJoinedNodes) {
  Cluster cluster;
  for (size_t n = 0; n < kMaxJoinedNodes; ++n)
    ASSERT_EQ(JoinNode("n" + std::to_string(n), Declared("x"), &cluster), "") << n;
  const std::string why = JoinNode("one-more", Declared("x"), &cluster);
  EXPECT_TRUE(Has(why, "the most that may join one server")) << why;
  EXPECT_EQ(cluster.nodes.size(), kMaxJoinedNodes);
}

class NodeJoinPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "berth_join_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  // A server without a cluster over the state directory (again: a restart).
  void Open(double unhealthy_after_s = 15, double lost_after_s = 120) {
    plane_.reset();
    store_.reset();
    store_ = std::make_unique<StateStore>(dir_);
    ControlPlaneConfig config;
    config.nodes_join = true;
    config.unhealthy_after_s = unhealthy_after_s;
    config.lost_after_s = lost_after_s;
    ASSERT_TRUE(BuiltinPolicy("berth", &config.policy));
    plane_ = std::make_unique<ControlPlane>(std::move(config), store_.get(),
                                            [this] { return now_ += 1; });
  }
  // Keeps a joined node's row (`order`: its order of joining, any JSON) in the stopped server's
  // state, as a server before it would have, with the registration `r`.
  void Keep(const std::string& node, const nlohmann::json& order, const NodeRegistration& r) {
    const std::string value = nlohmann::json{{"order", order}, {"registration", ToJson(r)}}.dump();
    store_->Wait(
        store_->Enqueue({StoreWrite::Setting({"node:" + node, value}, "test", 1, "kept")}));
  }
  std::vector<std::string> JoinEvents() const {
    std::vector<std::string> out;
    for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
      if (e.state == "node-joined") out.push_back(e.reason);
    return out;
  }

  std::string dir_;
  double now_ = 1000;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<ControlPlane> plane_;
};

TEST_F(NodeJoinPlaneTest, NodesJoinJobsWaitForThemAndARestartKeepsThem) {
  Open();
  EXPECT_TRUE(plane_->cluster()->nodes.empty());
  EXPECT_EQ(plane_->max_nodes(), kMaxJoinedNodes);
  // A job before any node: accepted, waiting (no node can hold it yet).
  const int64_t early = plane_->Submit(R"({"gpus": 8, "image": "x"})");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(early).state, "pending");

  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  ASSERT_EQ(plane_->cluster()->nodes.size(), 1u);
  ASSERT_EQ(plane_->Agents().size(), 1u);
  EXPECT_TRUE(plane_->Agents()[0].registered);
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(early).state, "scheduled");
  EXPECT_EQ(plane_->Assignments("gpu-a", 1, 0).assignments.size(), 1u);
  std::vector<std::string> joined = JoinEvents();
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_TRUE(Has(joined[0], "node gpu-a joined the cluster as its agent registered, with 8 GPUs"))
      << joined[0];

  // Registering again is not joining again.
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  EXPECT_EQ(plane_->cluster()->nodes.size(), 1u);
  EXPECT_EQ(JoinEvents().size(), 1u);

  // A node that cannot join is told why, and nothing changes.
  try {
    plane_->RegisterAgent("gpu-b", Declared("gpu-b", 40960));
    ADD_FAILURE() << "joined with another A100 memory size";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_TRUE(Has(e.what(), "node gpu-b cannot join the cluster: GPU model")) << e.what();
  }
  EXPECT_EQ(plane_->cluster()->nodes.size(), 1u);

  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  const int64_t second = plane_->Submit(R"({"gpus": 8, "image": "x"})");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(second).state, "scheduled");
  EXPECT_EQ(plane_->Assignments("gpu-b", 1, 0).assignments.size(), 1u);

  // A restart: both nodes are back (from the state), the jobs adopted where they were.
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(plane_->Get(early).state, "scheduled");
  EXPECT_EQ(plane_->Get(second).state, "scheduled");
  EXPECT_FALSE(plane_->Agents()[0].registered);  // until its agent registers again
  // Its assignments wait for it: the server does not know its GPUs' UUIDs yet.
  try {
    plane_->Assignments("gpu-a", 1, 0);
    ADD_FAILURE() << "assignments handed to a node not registered since the restart";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
    EXPECT_TRUE(Has(e.what(), "register first")) << e.what();
  }
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  const std::vector<Assignment> on_a = plane_->Assignments("gpu-a", 1, 0).assignments;
  ASSERT_EQ(on_a.size(), 1u);
  for (const std::string& uuid : on_a[0].gpu_uuids) EXPECT_TRUE(Has(uuid, "GPU-gpu-a-")) << uuid;
  EXPECT_EQ(plane_->Assignments("gpu-b", 1, 0).assignments.size(), 1u);
  EXPECT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(JoinEvents().size(), 2u);
}

// A label change is not a hardware change: the node is relabeled in place with jobs on it, and
// a restart keeps the new labels.
TEST_F(NodeJoinPlaneTest, ANodeIsRelabeledInPlaceWhateverRunsThere) {
  Open();
  NodeRegistration labeled = Declared("gpu-a");
  labeled.declared->labels = {{"pool", "blue"}};
  plane_->RegisterAgent("gpu-a", labeled);
  const int64_t job = plane_->Submit(R"({"gpus": 1, "image": "x"})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(job).state, "scheduled");
  labeled.declared->labels = {{"pool", "green"}};
  plane_->RegisterAgent("gpu-a", labeled);
  EXPECT_EQ(plane_->cluster()->nodes[0].labels.at("pool"), "green");
  EXPECT_EQ(plane_->Get(job).state, "scheduled");
  const int64_t green =
      plane_->Submit(R"({"gpus": 1, "image": "x", "nodeSelector": {"pool": "green"}})");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(green).state, "scheduled");
  Open();
  EXPECT_EQ(plane_->cluster()->nodes[0].labels.at("pool"), "green");
  EXPECT_EQ(plane_->Get(job).state, "scheduled");
}

// GPU UUIDs are handed to containers: none may be empty, repeated, or another node's.
TEST_F(NodeJoinPlaneTest, AGpuUuidBelongsToOneGpu) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  const auto refused = [&](const std::string& node, const NodeRegistration& r) {
    try {
      plane_->RegisterAgent(node, r);
      ADD_FAILURE() << node << " registered";
      return std::string();
    } catch (const ApiError& e) {
      return std::to_string(e.status) + " " + e.what();
    }
  };
  NodeRegistration theirs = Declared("gpu-b");
  theirs.gpu_uuids[5] = "GPU-gpu-a-2";
  std::string why = refused("gpu-b", theirs);
  EXPECT_TRUE(Has(why, "409 node gpu-b: GPU UUID GPU-gpu-a-2 is registered by node gpu-a")) << why;
  NodeRegistration twice = Declared("gpu-b");
  twice.gpu_uuids[1] = twice.gpu_uuids[0];
  why = refused("gpu-b", twice);
  EXPECT_TRUE(Has(why, "GPU UUID \"GPU-gpu-b-0\" twice")) << why;
  NodeRegistration empty = Declared("gpu-b");
  empty.gpu_uuids[7].clear();
  why = refused("gpu-b", empty);
  EXPECT_TRUE(Has(why, "an empty GPU UUID")) << why;
  EXPECT_EQ(plane_->cluster()->nodes.size(), 1u);
  // After a restart gpu-a's GPUs are still its own, before its agent is back.
  Open();
  why = refused("gpu-b", theirs);
  EXPECT_TRUE(Has(why,
                  "409 node gpu-b: GPU UUID GPU-gpu-a-2 is node gpu-a's (it joined before "
                  "the server restarted; its agent has not registered again yet)"))
      << why;
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  why = refused("gpu-b", theirs);
  EXPECT_TRUE(Has(why, "409 node gpu-b: GPU UUID GPU-gpu-a-2 is registered by node gpu-a")) << why;
}

// A node left out at a restart (its kept row no longer joins: here another node's A100s have
// other memory now) keeps its GPU UUIDs until its agent is back: no other node takes them.
TEST_F(NodeJoinPlaneTest, ANodeLeftOutKeepsItsGpuUuids) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_.reset();
  Keep("gpu-b", 7, Declared("gpu-b", 40960));
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 1u);
  ASSERT_TRUE(Has(plane_->recovery_summary(), "node gpu-b (joined before) is left out"))
      << plane_->recovery_summary();
  NodeRegistration theirs = Declared("gpu-c");
  theirs.gpu_uuids[3] = "GPU-gpu-b-3";
  try {
    plane_->RegisterAgent("gpu-c", theirs);
    ADD_FAILURE() << "gpu-c registered gpu-b's GPU";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
    EXPECT_TRUE(Has(e.what(),
                    "GPU UUID GPU-gpu-b-3 is node gpu-b's (it joined before the server "
                    "restarted and is left out until its agent registers again)"))
        << e.what();
  }
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  EXPECT_EQ(plane_->cluster()->nodes.size(), 2u);
  plane_->RegisterAgent("gpu-c", Declared("gpu-c"));
  EXPECT_EQ(plane_->cluster()->nodes.size(), 3u);
}

// A node in the cluster is not held off by one left out: where both kept the same GPU UUIDs
// (a GPU moved while the left-out node was away), the node in the cluster registers, and the
// one left out is told whose they are.
TEST_F(NodeJoinPlaneTest, ANodeLeftOutGivesWayToOneInTheCluster) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_.reset();
  Keep("gpu-b", 7, Declared("gpu-b", 40960));
  Keep("gpu-c", 8, Declared("gpu-b"));  // gpu-b's GPUs, moved
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  plane_->RegisterAgent("gpu-c", Declared("gpu-b"));
  try {
    plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
    ADD_FAILURE() << "two nodes registered one GPU";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
    EXPECT_TRUE(Has(e.what(), "GPU UUID GPU-gpu-b-0 is registered by node gpu-c")) << e.what();
  }
}

// An operator's cordon is the node's, not its row's: a node left out at a restart is cordoned
// again when it joins, and stays so across the next restart.
TEST_F(NodeJoinPlaneTest, ACordonHoldsForANodeLeftOutUntilItJoinsAgain) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_->NodeAction("gpu-b", "cordon");
  plane_.reset();
  store_->Wait(store_->Enqueue(
      {StoreWrite::Setting({"node:gpu-b", "{not json"}, "test", 1, "a corrupt row")}));
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 1u);
  EXPECT_TRUE(Has(plane_->recovery_summary(), "0 nodes cordoned (and node gpu-b when it joins"))
      << plane_->recovery_summary();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_->Report("gpu-a", AgentReport());
  ASSERT_EQ(plane_->Nodes().size(), 2u);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  // No new job lands there: an 8-GPU job waits while gpu-a is full.
  const int64_t on_a = plane_->Submit(R"({"gpus": 8, "image": "x"})");
  const int64_t waits = plane_->Submit(R"({"gpus": 8, "image": "x"})");
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(on_a).state, "scheduled");
  EXPECT_EQ(plane_->Get(waits).state, "pending");
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  EXPECT_TRUE(Has(plane_->recovery_summary(), "1 node cordoned")) << plane_->recovery_summary();
}

// While a node is left out its kept cordon can still be changed: lifted, it joins uncordoned;
// set, it joins cordoned.
TEST_F(NodeJoinPlaneTest, TheCordonOfANodeLeftOutCanBeChanged) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->NodeAction("gpu-a", "cordon");
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_.reset();
  for (const char* node : {"node:gpu-a", "node:gpu-b"})
    store_->Wait(store_->Enqueue({StoreWrite::Setting({node, "{not json"}, "test", 1, "corrupt")}));
  Open();
  ASSERT_TRUE(plane_->cluster()->nodes.empty());
  plane_->NodeAction("gpu-a", "uncordon");
  plane_->NodeAction("gpu-b", "drain");
  Open();  // kept across a restart too
  EXPECT_TRUE(Has(plane_->recovery_summary(), "(and node gpu-b when it joins again)"))
      << plane_->recovery_summary();
  EXPECT_FALSE(Has(plane_->recovery_summary(), "node gpu-a when")) << plane_->recovery_summary();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_->Report("gpu-a", AgentReport());
  ASSERT_EQ(plane_->Nodes().size(), 2u);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  // The event log says it joined, then that it is cordoned.
  int64_t joined = -1, cordoned = -1;
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events) {
    if (e.state == "node-joined" && Has(e.reason, "node gpu-b joined")) joined = e.seq;
    if (e.state == "cordoned" && e.node == "gpu-b" && Has(e.reason, "kept while it was left out"))
      cordoned = e.seq;
  }
  EXPECT_GE(joined, 0);
  EXPECT_GT(cordoned, joined);
  try {
    plane_->NodeAction("gpu-z", "cordon");
    ADD_FAILURE() << "cordoned a node never seen";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
  }
}

// A cordon kept for a name that never joined (a cluster file's node, say) is not applied to a
// node of that name joining for the first time.
TEST_F(NodeJoinPlaneTest, AKeptCordonOfANodeThatNeverJoinedIsNotApplied) {
  Open();
  plane_.reset();
  store_->Wait(store_->Enqueue({StoreWrite::Node({"gpu-a", true}, "cordoned", 1, "elsewhere")}));
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  ASSERT_EQ(plane_->Nodes().size(), 1u);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
}

// Join orders count joins; a kept one past what berth writes (2^53 - 1 still reads) numbers the
// kept rows again, so that every order written later is read back.
TEST_F(NodeJoinPlaneTest, AnOrderPastWhatBerthWritesNumbersTheRowsAgain) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_.reset();
  Keep("gpu-a", (int64_t{1} << 53) - 1, Declared("gpu-a"));
  Open();
  plane_->RegisterAgent("gpu-c", Declared("gpu-c"));
  std::map<std::string, int64_t> orders;
  for (const StoredSetting& s : store_->LoadSettings())
    if (s.key.rfind("node:", 0) == 0)
      orders[s.key] = nlohmann::json::parse(s.value)["order"].get<int64_t>();
  EXPECT_EQ(orders, (std::map<std::string, int64_t>{
                        {"node:gpu-b", 0}, {"node:gpu-a", 1}, {"node:gpu-c", 2}}));
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 3u);
  EXPECT_EQ(plane_->cluster()->nodes[0].name, "gpu-b");
  EXPECT_EQ(plane_->cluster()->nodes[2].name, "gpu-c");
}

// A kept row whose order of joining does not load still brings its node back (last); its agent
// registering again, with the same hardware, keeps the row again with a new place.
TEST_F(NodeJoinPlaneTest, ARowWithoutAnOrderIsKeptAgainWithOne) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_.reset();
  Keep("gpu-a", "first", Declared("gpu-a"));
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(plane_->cluster()->nodes[1].name, "gpu-a");
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  std::optional<int64_t> order;
  for (const StoredSetting& s : store_->LoadSettings())
    if (s.key == "node:gpu-a") order = nlohmann::json::parse(s.value)["order"].get<int64_t>();
  EXPECT_EQ(order, 2);  // after gpu-b's 1
}

// A job waiting for a GPU model that leaves the cluster (its only node has other GPUs now)
// fails at once, as a restart would fail it; one naming only models still there waits on.
TEST_F(NodeJoinPlaneTest, AJobOfAModelThatLeftTheClusterFails) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  NodeRegistration h100 = Declared("gpu-b");
  for (Gpu& g : h100.declared->gpus) g.model = "H100";
  h100.models = {{"H100", 81920, {}}};
  plane_->RegisterAgent("gpu-b", h100);
  const int64_t only = plane_->Submit(
      R"({"gpus": 1, "image": "x", "gpuModels": ["A100"], "nodeSelector": {"pool": "none"}})");
  const int64_t either = plane_->Submit(
      R"({"gpus": 1, "image": "x", "gpuModels": ["A100", "H100"], "nodeSelector": {"pool": "none"}})");
  const int64_t h100_only = plane_->Submit(
      R"({"gpus": 1, "image": "x", "gpuModels": ["H100"], "nodeSelector": {"pool": "none"}})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(only).state, "pending");
  NodeRegistration l40 = Declared("gpu-a");
  for (Gpu& g : l40.declared->gpus) g.model = "L40S";
  l40.models = {{"L40S", 46068, {}}};
  plane_->RegisterAgent("gpu-a", l40);
  EXPECT_EQ(plane_->Get(only).state, "failed");
  EXPECT_TRUE(Has(plane_->Get(only).reason, "GPU model A100 left the cluster (node gpu-a"))
      << plane_->Get(only).reason;
  EXPECT_EQ(plane_->Get(either).state, "failed");
  EXPECT_EQ(plane_->Get(h100_only).state, "pending");
  Open();
  EXPECT_EQ(plane_->Get(only).state, "failed");
  EXPECT_EQ(plane_->Get(either).state, "failed");
  EXPECT_EQ(plane_->Get(h100_only).state, "pending");
}

// One kept row per node: a row that no longer loads leaves only its node out, and the node's
// agent registering again replaces it.
TEST_F(NodeJoinPlaneTest, AKeptNodeThatNoLongerLoadsIsLeftOutUntilItRegisters) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_.reset();
  store_->Wait(
      store_->Enqueue({StoreWrite::Setting({"node:gpu-b", "{not json"}, "test", 1, "a corrupt row"),
                       StoreWrite::Setting({"node:gpu-z", R"({"order": 9223372036854775807})"},
                                           "test", 1, "an order past any")}));
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 1u);
  const std::string summary = plane_->recovery_summary();
  EXPECT_TRUE(Has(summary, "1 node joined; node gpu-b (joined before) is left out")) << summary;
  EXPECT_TRUE(Has(summary, "node gpu-z (joined before) is left out")) << summary;
  // Its agent's calls are told to register (its report's 409 makes it do so), not 404.
  try {
    plane_->Report("gpu-b", AgentReport());
    ADD_FAILURE() << "a report from a node left out";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
    EXPECT_TRUE(Has(e.what(), "register first")) << e.what();
  }
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  Open();
  EXPECT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(plane_->cluster()->nodes[1].name, "gpu-b");
  EXPECT_FALSE(Has(plane_->recovery_summary(), "gpu-b (joined before) is left out"))
      << plane_->recovery_summary();
  size_t rows = 0;
  for (const StoredSetting& s : store_->LoadSettings()) rows += s.key.rfind("node:", 0) == 0;
  EXPECT_EQ(rows, 3u);  // gpu-a's, gpu-b's, and gpu-z's until its agent registers
}

// A node that joined before a restart and whose agent never comes back turns unhealthy (no new
// jobs), then lost (its jobs wait again), as a registered one would.
TEST_F(NodeJoinPlaneTest, ANodeWhoseAgentNeverReturnsIsLost) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  const int64_t job = plane_->Submit(R"({"gpus": 8, "image": "x"})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(job).state, "scheduled");
  Open(/*unhealthy_after_s=*/5, /*lost_after_s=*/20);
  ASSERT_EQ(plane_->Get(job).state, "scheduled");
  for (int cycle = 0; cycle < 30; ++cycle) plane_->Cycle();
  EXPECT_NE(plane_->Get(job).state, "scheduled");
  bool lost = false;
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
    lost = lost || e.state == "lost";
  EXPECT_TRUE(lost);
}

// After a restart a joined node takes no new jobs until its agent is back, registered and
// reporting with its container engine: they would wait for an agent that may be gone, or that
// cannot run them. The operator's cordon is not the server's: it stays.
TEST_F(NodeJoinPlaneTest, AJoinedNodeTakesNewJobsOnlyOnceItsAgentIsBack) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  plane_->NodeAction("gpu-a", "cordon");
  Open();
  const int64_t job = plane_->Submit(R"({"gpus": 8, "image": "x"})");
  for (int cycle = 0; cycle < 3; ++cycle) plane_->Cycle();
  EXPECT_EQ(plane_->Get(job).state, "pending");
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(job).state, "pending");  // gpu-a stays cordoned: the operator's
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);  // registering says nothing of its engine
  AgentReport no_engine;
  no_engine.runtime_error = "Cannot connect to the Docker daemon";
  plane_->Report("gpu-b", no_engine);
  plane_->Cycle();
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  EXPECT_EQ(plane_->Get(job).state, "pending");
  plane_->Report("gpu-b", AgentReport());
  EXPECT_FALSE(plane_->Nodes()[1].cordoned);
  // The event log says why it takes jobs again (the server's cordon left none).
  std::vector<std::string> back;
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
    if (e.node == "gpu-b" && e.state == "healthy") back.push_back(e.reason);
  EXPECT_EQ(back, std::vector<std::string>{"its agent reports again after the server's restart, "
                                           "with its containers: it takes new jobs again"});
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(job).state, "scheduled");
  EXPECT_EQ(plane_->Assignments("gpu-b", 1, 0).assignments.size(), 1u);
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
  // The server's cordon is not kept as the node's mark: after another restart and both agents
  // back, gpu-b takes jobs and gpu-a does not.
  Open();
  for (const char* node : {"gpu-a", "gpu-b"}) {
    plane_->RegisterAgent(node, Declared(node));
    plane_->Report(node, AgentReport());
  }
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
  EXPECT_FALSE(plane_->Nodes()[1].cordoned);
  // An agent that comes back only after its node turned unhealthy lifts it all the same, with
  // its first report (registering says nothing of its container engine).
  Open(/*unhealthy_after_s=*/5, /*lost_after_s=*/1000);
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  for (int cycle = 0; cycle < 10; ++cycle) plane_->Cycle();
  EXPECT_TRUE(plane_->Agents()[1].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  plane_->RegisterAgent("gpu-b", Declared("gpu-b"));
  EXPECT_TRUE(plane_->Agents()[1].unhealthy);
  plane_->Report("gpu-b", AgentReport());  // acted on no assignment yet: its jobs stay
  EXPECT_FALSE(plane_->Agents()[1].unhealthy);
  EXPECT_FALSE(plane_->Nodes()[1].cordoned);
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
}

// Joined nodes come back in the order they joined (each checked against those before it), so
// that their indices, listings and events keep their order.
TEST_F(NodeJoinPlaneTest, ARestartJoinsTheNodesInTheOrderTheyJoined) {
  Open();
  plane_->RegisterAgent("zz-gpu", Declared("zz-gpu"));
  NodeRegistration cpu_only;
  cpu_only.declared = Dgx(1).nodes[0];
  cpu_only.declared->gpus.clear();
  cpu_only.declared->switches.clear();
  plane_->RegisterAgent("aa-cpu", cpu_only);
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(plane_->cluster()->nodes[0].name, "zz-gpu");
  EXPECT_TRUE(Has(plane_->recovery_summary(), "2 nodes joined")) << plane_->recovery_summary();
}

TEST_F(NodeJoinPlaneTest, ANodeWhoseHardwareChangedJoinsAgainOnceNothingRunsThere) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  const int64_t job = plane_->Submit(R"({"gpus": 1, "image": "x"})");
  plane_->Cycle();
  ASSERT_EQ(plane_->Get(job).state, "scheduled");
  const NodeRegistration fewer = OneGpuFewer("gpu-a");
  try {
    plane_->RegisterAgent("gpu-a", fewer);
    ADD_FAILURE() << "its hardware changed under a placed job";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
    EXPECT_TRUE(Has(e.what(), "drain it (berth node drain gpu-a)")) << e.what();
    EXPECT_TRUE(Has(e.what(), "then uncordon it")) << e.what();
  }
  EXPECT_EQ(plane_->cluster()->nodes[0].gpus.size(), 8u);
  plane_->Stop(job);
  // Its GPUs are held until its container is gone: its agent (the one registered) says so.
  AgentReport gone;
  gone.applied_version = plane_->Assignments("gpu-a", 0, 0).version;
  plane_->Report("gpu-a", gone);
  plane_->RegisterAgent("gpu-a", fewer);
  EXPECT_EQ(plane_->cluster()->nodes[0].gpus.size(), 7u);
  bool changed = false;
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
    changed = changed || e.state == "node-changed";
  EXPECT_TRUE(changed);
  Open();  // kept as it is now
  EXPECT_FALSE(Has(plane_->recovery_summary(), "left out")) << plane_->recovery_summary();
  EXPECT_EQ(plane_->cluster()->nodes[0].gpus.size(), 7u);
  EXPECT_EQ(plane_->cluster()->nodes.size(), 1u);
}

// A refusal of the node's hardware names the runs still placed there, so that the refused agent
// stops the others: a stopped job's container, or one whose job runs elsewhere once the node was
// lost (review: they ran on, and a job ran on two nodes at once).
TEST_F(NodeJoinPlaneTest, AHardwareRefusalNamesTheRunsTheNodeKeeps) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  const int64_t kept = plane_->Submit(R"({"gpus": 1, "image": "x"})");
  const int64_t stopped = plane_->Submit(R"({"gpus": 1, "image": "x"})");
  plane_->Cycle();
  const std::vector<Assignment> runs = plane_->Assignments("gpu-a", 0, 0).assignments;
  ASSERT_EQ(runs.size(), 2u);
  const Assignment& run = runs[0].job == kept ? runs[0] : runs[1];
  plane_->Stop(stopped);  // still stopping there: its container is to go
  const NodeRegistration fewer = OneGpuFewer("gpu-a");
  try {
    plane_->RegisterAgent("gpu-a", fewer);
    ADD_FAILURE() << "its hardware changed under a placed job";
  } catch (const ApiError& e) {
    ASSERT_EQ(e.status, 409);
    ASSERT_TRUE(e.detail.contains("keep")) << e.detail.dump();
    ASSERT_EQ(e.detail["keep"].size(), 1u) << e.detail.dump();
    EXPECT_EQ(e.detail["keep"][0]["job"], kept);
    EXPECT_EQ(e.detail["keep"][0]["replica"], 0);
    EXPECT_EQ(e.detail["keep"][0]["placement"], run.placement);
  }
}

// An admin forgets a node whose agent is gone for good: refused while its agent reports or
// jobs are placed there; once lost, it leaves the cluster (the nodes after it move up an index:
// their jobs and watches follow), a restart does not bring it back, and its GPU UUIDs are free.
TEST_F(NodeJoinPlaneTest, ANodeWhoseAgentIsGoneForGoodCanBeRemoved) {
  Open(/*unhealthy_after_s=*/60, /*lost_after_s=*/200);
  for (const char* node : {"gpu-a", "gpu-b", "gpu-c"}) plane_->RegisterAgent(node, Declared(node));
  std::map<std::string, int64_t> job_on;
  for (int i = 0; i < 3; ++i) plane_->Submit(R"({"gpus": 8, "image": "x"})");
  plane_->Cycle();
  for (const char* node : {"gpu-a", "gpu-b", "gpu-c"}) {
    const std::vector<Assignment> on = plane_->Assignments(node, 1, 0).assignments;
    ASSERT_EQ(on.size(), 1u) << node;
    job_on[node] = on[0].job;
  }
  auto refused = [&](const std::string& node, int status, const std::string& part) {
    try {
      plane_->RemoveNode(node);
      ADD_FAILURE() << node << " removed";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, status) << e.what();
      EXPECT_TRUE(Has(e.what(), part)) << e.what();
    }
  };
  refused("gpu-b", 409, "its agent still reports");
  refused("gpu-z", 404, "no node gpu-z");
  // gpu-b's agent goes silent; a and c keep reporting. Before it is lost its job is still placed.
  auto keep_alive = [&] {
    plane_->Report("gpu-a", AgentReport());
    plane_->Report("gpu-c", AgentReport());
  };
  while (!plane_->Agents()[1].unhealthy) {
    keep_alive();
    plane_->Cycle();
  }
  refused("gpu-b", 409, "jobs are placed on it or still stopping there; drain it first");
  while (!plane_->Agents()[1].lost) {
    keep_alive();
    plane_->Cycle();
  }
  ASSERT_EQ(plane_->Get(job_on["gpu-b"]).state, "pending");  // a and c are full

  // A watch of gpu-c's assignments waiting as gpu-b leaves sees gpu-c's, at its new index.
  const uint64_t version = plane_->Assignments("gpu-c", 1, 0).version;
  AssignmentSet watched;
  std::thread watch([&] { watched = plane_->Assignments("gpu-c", version, 30); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(Has(plane_->RemoveNode("gpu-b"), "node gpu-b removed on request"));
  watch.join();
  ASSERT_EQ(watched.assignments.size(), 1u);
  EXPECT_EQ(watched.assignments[0].job, job_on["gpu-c"]);
  for (const std::string& uuid : watched.assignments[0].gpu_uuids)
    EXPECT_TRUE(Has(uuid, "GPU-gpu-c-")) << uuid;
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(plane_->cluster()->nodes[1].name, "gpu-c");
  EXPECT_FALSE(plane_->Agents()[1].lost);  // gpu-c's agent, not gpu-b's
  EXPECT_EQ(plane_->Get(job_on["gpu-c"]).state, "scheduled");
  bool removed = false;
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
    removed = removed || (e.state == "node-removed" && e.node == "gpu-b");
  EXPECT_TRUE(removed);

  Open();
  ASSERT_EQ(plane_->cluster()->nodes.size(), 2u);
  EXPECT_EQ(plane_->cluster()->FindNode("gpu-b"), -1);
  EXPECT_EQ(plane_->Get(job_on["gpu-c"]).state, "scheduled");
  plane_->RegisterAgent("gpu-d", Declared("gpu-b"));  // gpu-b's GPUs, moved to a new host
  EXPECT_EQ(plane_->cluster()->nodes.size(), 3u);
  plane_->Cycle();
  EXPECT_EQ(plane_->Get(job_on["gpu-b"]).state, "scheduled");
}

// A node left out at a restart (its kept row no longer joins) can be forgotten too: its kept
// cordon and GPU UUIDs go with it.
TEST_F(NodeJoinPlaneTest, ANodeLeftOutCanBeRemoved) {
  Open();
  plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
  plane_.reset();
  Keep("gpu-b", 7, Declared("gpu-b", 40960));
  store_->Wait(store_->Enqueue({StoreWrite::Node({"gpu-b", true}, "cordoned", 1, "test")}));
  Open();
  ASSERT_TRUE(Has(plane_->recovery_summary(), "(and node gpu-b when it joins again)"))
      << plane_->recovery_summary();
  EXPECT_TRUE(Has(plane_->RemoveNode("gpu-b"), "left out since the restart"));
  plane_->RegisterAgent("gpu-c", Declared("gpu-b"));  // its UUIDs are no longer held
  Open();
  EXPECT_FALSE(Has(plane_->recovery_summary(), "gpu-b")) << plane_->recovery_summary();
  plane_->RegisterAgent("gpu-b", Declared("gpu-b2"));
  ASSERT_EQ(plane_->Nodes().size(), 3u);
  EXPECT_FALSE(plane_->Nodes()[2].cordoned);  // gpu-b, joining anew
}

TEST_F(NodeJoinPlaneTest, AServerWithAClusterFileTakesNoNewNodes) {
  store_ = std::make_unique<StateStore>(dir_);
  ControlPlaneConfig config;
  config.cluster = Dgx(1);
  ASSERT_TRUE(BuiltinPolicy("berth", &config.policy));
  plane_ = std::make_unique<ControlPlane>(std::move(config), store_.get(), [] { return 1.0; });
  EXPECT_EQ(plane_->max_nodes(), 1u);
  try {
    plane_->RegisterAgent("gpu-a", Declared("gpu-a"));
    ADD_FAILURE() << "joined a cluster file's cluster";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
  }
  EXPECT_EQ(plane_->cluster()->nodes.size(), 1u);
  try {
    plane_->RemoveNode(plane_->cluster()->nodes[0].name);
    ADD_FAILURE() << "removed a cluster file's node";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
    EXPECT_TRUE(Has(e.what(), "remove it from the cluster file")) << e.what();
  }
}

}  // namespace
}  // namespace berth
