// The control plane through the agent protocol: the tests play the node agents, calling
// RegisterAgent, Assignments and Report directly (no HTTP, no containers) on a fake clock.
#include "protocol/agent_protocol.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/cluster_file.h"
#include "server/control_plane.h"
#include "server_test_util.h"
#include "store/log_store.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

// One node of 4 GPUs over two sockets, the GPUs interleaved: 0 and 2 on socket 0 (CPUs 0-3),
// 1 and 3 on socket 1 (CPUs 4-7).
Cluster TwoSockets() {
  return ParseClusterYaml(
      "name: t\n"
      "gpuModels: [{name: A100, memoryMiB: 81920}]\n"
      "nodeShapes:\n"
      "  s:\n"
      "    gpuModel: A100\n"
      "    sockets:\n"
      "      - {cpus: \"0-3\", memoryMiB: 65536, switches: [{gpus: [0, 2]}]}\n"
      "      - {cpus: \"4-7\", memoryMiB: 65536, switches: [{gpus: [1, 3]}]}\n"
      "nodes: [{name: n0, shape: s}]\n",
      "t.yaml");
}

// One node of 2 H100s whose MIG instances are laid out as mig-parted would (node shape
// "fixed"); `layout` is the cluster file's list.
Cluster MigNode(const std::string& layout) {
  return ParseClusterYaml(
      "name: t\n"
      "gpuModels: [{name: H100-80GB, memoryMiB: 81920, mig: builtin}]\n"
      "nodeShapes:\n"
      "  fixed:\n"
      "    gpuModel: H100-80GB\n"
      "    mig: {enabled: true, layout: [" +
          layout +
          "]}\n"
          "    sockets: [{cpus: \"0-7\", memoryMiB: 65536, switches: [2]}]\n"
          "nodes: [{name: n0, shape: fixed}]\n",
      "t.yaml");
}

class ControlPlaneAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "berth_agents_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }

  // A server over the state directory (a restart when one was open). Liveness off unless asked.
  void Open(Cluster cluster, double unhealthy_after_s = 1e9, double lost_after_s = 2e9) {
    cluster_nodes_ = static_cast<int>(cluster.nodes.size());
    plane_.reset();
    store_.reset();
    logs_.reset();
    store_ = std::make_unique<StateStore>(dir_);
    logs_ = std::make_unique<LogStore>(dir_ + "/logs");
    ControlPlaneConfig config;
    config.cluster = std::move(cluster);
    ASSERT_TRUE(BuiltinPolicy("berth", &config.policy));
    config.unhealthy_after_s = unhealthy_after_s;
    config.lost_after_s = lost_after_s;
    config.expect_agents = expect_agents_;
    config.logs = logs_.get();
    plane_ =
        std::make_unique<ControlPlane>(std::move(config), store_.get(), [this] { return now_; });
  }

  static std::vector<std::string> Uuids(const std::string& node, int gpus) {
    std::vector<std::string> out;
    for (int g = 0; g < gpus; ++g) out.push_back("GPU-" + node + "-" + std::to_string(g));
    return out;
  }
  uint64_t Register(const std::string& node, int gpus = 8, const std::string& instance = "") {
    NodeRegistration r;
    r.gpu_uuids = Uuids(node, gpus);
    r.agent_version = "test";
    r.instance = instance;
    return plane_->RegisterAgent(node, r);
  }
  // The node's assignments now (a `since` no version has).
  AssignmentSet Set(const std::string& node) const { return plane_->Assignments(node, 1, 0); }

  static ContainerReport Container(const Assignment& a, const std::string& state,
                                   int exit_code = 0) {
    ContainerReport c;
    c.job = a.job;
    c.replica = a.replica;
    c.placement = a.placement;
    c.state = state;
    c.exit_code = exit_code;
    c.container_id = "c" + std::to_string(a.job) + "-" + std::to_string(a.replica);
    if (state == "failed") c.error = "image not found";
    return c;
  }
  // A report of every assignment the node has now in `state`, having acted on them.
  void ReportAll(const std::string& node, const std::string& state) {
    const AssignmentSet set = Set(node);
    AgentReport r;
    r.applied_version = set.version;
    for (const Assignment& a : set.assignments) r.containers.push_back(Container(a, state));
    plane_->Report(node, r);
  }
  // A report of no containers at all, having acted on `applied`.
  void ReportNone(const std::string& node, uint64_t applied) {
    AgentReport r;
    r.applied_version = applied;
    plane_->Report(node, r);
  }

  // One DGX whose job (priority 1, grace period 30 s) runs there, and a job of priority 1000
  // (*preemptor) that preempts it: returns that victim; *old is its assignment, *before (when
  // given) the node's assignment version before the preemption.
  int64_t PreemptAWholeNodeJob(Assignment* old, int64_t* preemptor, uint64_t* before = nullptr) {
    Open(Dgx(1));
    Register("dgx-0");
    const int64_t victim =
        plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1, "gracePeriodSeconds": 30})");
    plane_->Cycle();
    ReportAll("dgx-0", "running");
    EXPECT_EQ(State(victim), "running");
    *old = Of("dgx-0", victim).at(0);
    if (before != nullptr) *before = Set("dgx-0").version;
    *preemptor = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1000})");
    for (int i = 0; i < 3 && State(victim) != "preempted"; ++i) {
      now_ += 1;
      plane_->Cycle();
    }
    return victim;
  }

  // The assignments of `job` on `node`.
  std::vector<Assignment> Of(const std::string& node, int64_t job) const {
    std::vector<Assignment> out;
    for (const Assignment& a : Set(node).assignments)
      if (a.job == job) out.push_back(a);
    return out;
  }
  std::string State(int64_t job) const { return plane_->Get(job).state; }
  std::vector<std::string> States(int64_t job) const {
    std::vector<std::string> out;
    for (const StoredEvent& e : plane_->Events(job).events) out.push_back(e.state);
    return out;
  }
  // The node of the job's placement ("" when none).
  std::string NodeOf(int64_t job) const {
    for (const std::string node : {"dgx-0", "dgx-1", "dgx-2"})
      if (cluster_nodes_ > node.back() - '0' && !Of(node, job).empty()) return node;
    return "";
  }
  // Two registered nodes, liveness after 15 s and 120 s, and a job of `gpus` placed on one of
  // them: `*at` that node (index `*x`), `*other` the other one (index 1 - *x).
  int64_t PlaceOnOneOfTwo(int gpus, std::string* at, std::string* other, int* x) {
    Open(Dgx(2), 15, 120);
    Register("dgx-0");
    Register("dgx-1");
    const int64_t job = plane_->Submit(R"({"image": "x", "gpus": )" + std::to_string(gpus) + "}");
    plane_->Cycle();
    *at = NodeOf(job);
    EXPECT_FALSE(at->empty());
    *x = *at == "dgx-0" ? 0 : 1;
    *other = plane_->cluster()->nodes[1 - *x].name;
    return job;
  }
  // Two nodes (Open's liveness), both registered, and a job of all the GPUs of each running
  // there: the two jobs' ids.
  std::pair<int64_t, int64_t> RunOnePerNode(double unhealthy_after_s = 1e9,
                                            double lost_after_s = 2e9) {
    Open(Dgx(2), unhealthy_after_s, lost_after_s);
    Register("dgx-0");
    Register("dgx-1");
    const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 8})");
    const int64_t b = plane_->Submit(R"({"image": "x", "gpus": 8})");
    plane_->Cycle();
    ReportAll("dgx-0", "running");
    ReportAll("dgx-1", "running");
    EXPECT_EQ(State(a), "running");
    EXPECT_EQ(State(b), "running");
    return {a, b};
  }
  // One node, and a job of all its GPUs running there; `*a`: its assignment.
  int64_t RunWholeNodeJob(Assignment* a) {
    Open(Dgx(1));
    Register("dgx-0");
    const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
    plane_->Cycle();
    ReportAll("dgx-0", "running");
    EXPECT_EQ(State(id), "running");
    *a = Of("dgx-0", id).at(0);
    return id;
  }
  // Two registered DGXs, and a job of two 8-GPU replicas placed on them, one each.
  int64_t PlaceAGangOnTwoNodes() {
    Open(Dgx(2));
    Register("dgx-0");
    Register("dgx-1");
    const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8, "replicas": 2})");
    plane_->Cycle();
    return id;
  }
  // The agent of `node` reports `a`'s container still running, as of its latest version.
  void ReportStillRunning(const std::string& node, const Assignment& a) {
    AgentReport still;
    still.applied_version = Set(node).version;
    still.containers = {Container(a, "running")};
    plane_->Report(node, still);
  }
  template <typename Call>
  static int Status(Call call, std::string* message) {
    try {
      call();
    } catch (const ApiError& e) {
      *message = e.what();
      return e.status;
    }
    return 200;
  }

  std::string dir_;
  int cluster_nodes_ = 0;
  bool expect_agents_ = false;  // berth server --expect-agents
  double now_ = 1000;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<ControlPlane> plane_;
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// --- Registration ------------------------------------------------------------------------------

TEST_F(ControlPlaneAgentTest, RegistrationChecksTheNodeAndItsGpus) {
  Open(Dgx(2));
  std::string message;
  EXPECT_EQ(Status([&] { Register("nope"); }, &message), 404);
  EXPECT_TRUE(Has(message, "no node nope")) << message;
  EXPECT_EQ(Status([&] { Register("dgx-0", 4); }, &message), 409);
  EXPECT_TRUE(Has(message, "has 4 GPUs and the cluster file declares 8")) << message;
  EXPECT_FALSE(plane_->Agents()[0].registered);

  // A report before registering is refused: the agent should register.
  EXPECT_EQ(Status([&] { ReportNone("dgx-0", 0); }, &message), 409);
  EXPECT_TRUE(Has(message, "register")) << message;
  EXPECT_EQ(Status([&] { ReportNone("nope", 0); }, &message), 404);
  EXPECT_EQ(plane_->Agents()[0].heartbeat_age_s, -1);

  const uint64_t version = Register("dgx-0");
  EXPECT_GT(version, 0u);
  EXPECT_EQ(Set("dgx-0").version, version);
  const std::vector<ControlPlane::AgentStatus> agents = plane_->Agents();
  EXPECT_TRUE(agents[0].registered);
  EXPECT_FALSE(agents[1].registered);
  EXPECT_FALSE(agents[0].unhealthy);
  EXPECT_EQ(agents[0].heartbeat_age_s, 0);
  EXPECT_EQ(Status([&] { ReportNone("dgx-0", version); }, &message), 200) << message;
  // Registering again is fine, and keeps the version.
  EXPECT_EQ(Register("dgx-0"), version);
}

TEST_F(ControlPlaneAgentTest, ANodeFoundOtherThanDeclaredIsACondition) {
  Open(TwoSockets());
  const Node declared = plane_->cluster()->nodes[0];
  const auto topology_events = [&] {
    std::vector<std::string> out;
    for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
      if (e.state.rfind("topology-", 0) == 0) out.push_back(e.state + ": " + e.reason);
    return out;
  };
  NodeRegistration r;
  r.gpu_uuids = Uuids("n0", 4);
  // Declared GPUs (no found node): nothing to compare.
  plane_->RegisterAgent("n0", r);
  EXPECT_TRUE(plane_->Agents()[0].topology_mismatch.empty());
  EXPECT_TRUE(topology_events().empty());

  // The host has GPU 1 on socket 0 (the file says socket 1): jobs on it would be pinned to
  // CPUs 4-7, the other socket's.
  Node found = declared;
  found.gpus[1].pcie_switch = found.gpus[0].pcie_switch;
  r.found = found;
  plane_->RegisterAgent("n0", r);
  const std::vector<std::string> mismatch = plane_->Agents()[0].topology_mismatch;
  ASSERT_FALSE(mismatch.empty());
  EXPECT_TRUE(Has(mismatch[0], "GPU 1 is on socket 0, the cluster file declares socket 1"))
      << mismatch[0];
  std::vector<std::string> events = topology_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(Has(events[0], "topology-mismatch: its agent found another topology")) << events[0];
  EXPECT_TRUE(Has(events[0], "GPU 1 is on socket 0")) << events[0];
  ControlPlane::MetricsSnapshot m = plane_->Metrics();
  ASSERT_EQ(m.topology_mismatches.size(), 1u);
  EXPECT_EQ(m.topology_mismatches[0].second, mismatch.size());

  // Registering again as it was says nothing new, nor does one without a found node (nothing
  // compared: the condition stays); the host fixed says so once.
  plane_->RegisterAgent("n0", r);
  NodeRegistration declared_gpus;
  declared_gpus.gpu_uuids = r.gpu_uuids;
  plane_->RegisterAgent("n0", declared_gpus);
  EXPECT_EQ(plane_->Agents()[0].topology_mismatch, mismatch);
  EXPECT_EQ(topology_events().size(), 1u);
  r.found = declared;
  plane_->RegisterAgent("n0", r);
  EXPECT_TRUE(plane_->Agents()[0].topology_mismatch.empty());
  events = topology_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(Has(events[1], "topology-matches")) << events[1];
  EXPECT_EQ(plane_->Metrics().topology_mismatches[0].second, 0u);
}

TEST_F(ControlPlaneAgentTest, AMigSliceRunsInTheInstanceTheNodeRegisteredAtItsPlace) {
  Open(MigNode("3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb"));
  // The agent registers each GPU's instances where they are (as BuildNode pins them).
  const std::vector<MigProfile> profiles = BuiltinMigProfiles("H100-80GB");
  std::vector<MigInstance> placed;
  ASSERT_EQ(PlaceMigLayout(profiles, {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, &placed), "");
  NodeRegistration r;
  r.gpu_uuids = Uuids("n0", 2);
  std::map<std::string, std::string> uuid_at;  // "gpu/profile@start" -> its UUID
  for (int g = 0; g < 2; ++g)
    for (const MigInstance& i : placed) {
      const RegisteredMig m{g, profiles[i.profile].name, i.start,
                            "MIG-" + std::to_string(g) + "-" + std::to_string(i.start)};
      r.migs.push_back(m);
      uuid_at[std::to_string(g) + "/" + m.profile + "@" + std::to_string(m.start)] = m.uuid;
    }
  Node found = plane_->cluster()->nodes[0];
  r.found = found;
  plane_->RegisterAgent("n0", r);
  EXPECT_TRUE(plane_->Agents()[0].topology_mismatch.empty());

  // Four slices of 1g.10gb: four distinct instances, each by its own UUID.
  std::set<std::string> uuids;
  for (int j = 0; j < 4; ++j) plane_->Submit(R"({"migProfile": "1g.10gb", "image": "x"})");
  plane_->Submit(R"({"migProfile": "3g.40gb", "image": "x"})");
  plane_->Cycle();
  const AssignmentSet set = Set("n0");
  ASSERT_EQ(set.assignments.size(), 5u);
  for (const Assignment& a : set.assignments) {
    ASSERT_EQ(a.gpus.size(), 1u);
    const std::string at =
        std::to_string(a.gpus[0]) + "/" + a.mig_profile + "@" + std::to_string(a.mig_start);
    ASSERT_TRUE(uuid_at.count(at)) << at;
    EXPECT_EQ(a.gpu_uuids, std::vector<std::string>{uuid_at[at]}) << at;
    uuids.insert(a.gpu_uuids[0]);
  }
  EXPECT_EQ(uuids.size(), 5u);

  // The host lost GPU 1's 2g.20gb instance: a condition naming both layouts, and a slice placed
  // there is given the GPU's UUID, which the agent refuses to start (not the whole GPU).
  std::vector<RegisteredMig> fewer;
  for (const RegisteredMig& m : r.migs)
    if (m.gpu != 1 || m.profile != "2g.20gb") fewer.push_back(m);
  r.migs = fewer;
  plane_->RegisterAgent("n0", r);
  const std::vector<std::string> mismatch = plane_->Agents()[0].topology_mismatch;
  ASSERT_EQ(mismatch.size(), 1u);
  EXPECT_TRUE(Has(mismatch[0], "GPU 1 has the MIG instances [")) << mismatch[0];
  EXPECT_TRUE(Has(mismatch[0], "], the cluster file lays out [")) << mismatch[0];
  EXPECT_TRUE(Has(mismatch[0], "2g.20gb@")) << mismatch[0];
  plane_->Submit(R"({"migProfile": "2g.20gb", "image": "x"})");
  plane_->Submit(R"({"migProfile": "2g.20gb", "image": "x"})");
  plane_->Cycle();
  bool refused = false;
  for (const Assignment& a : Set("n0").assignments) {
    if (a.mig_profile != "2g.20gb" || a.gpus[0] != 1) continue;
    EXPECT_EQ(a.gpu_uuids, std::vector<std::string>{"GPU-n0-1"});
    refused = true;
  }
  EXPECT_TRUE(refused);

  // A GPU whose instances berth would make on demand: the agent cannot, which is said.
  Open(MigNode(""));
  plane_->RegisterAgent("n0", r);
  const std::vector<std::string> on_demand = plane_->Agents()[0].topology_mismatch;
  ASSERT_EQ(on_demand.size(), 2u);
  EXPECT_TRUE(Has(on_demand[0],
                  "berth would make them as slices need them, which its agent "
                  "does not do"))
      << on_demand[0];
  // So is one without instances at all (nothing listed, nothing laid out).
  r.migs.clear();
  plane_->RegisterAgent("n0", r);
  EXPECT_EQ(plane_->Agents()[0].topology_mismatch.size(), 2u);
}

TEST_F(ControlPlaneAgentTest, AStartIsTimedPhaseByPhaseEachPhaseCountedOnce) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t job = plane_->Submit(R"({"gpus": 2, "image": "train:v2"})");
  now_ += 5;  // waits 5 s for its cycle
  plane_->Cycle();
  const AssignmentSet set = Set("dgx-0");
  ASSERT_EQ(set.assignments.size(), 1u);
  AgentReport r;
  r.applied_version = set.version;
  r.containers.push_back(Container(set.assignments[0], "running"));
  r.containers[0].phases = {{"pull", 2}, {"create", 0.5}, {"start", 0.25}, {"made-up", 9}};
  plane_->Report("dgx-0", r);
  plane_->Report("dgx-0", r);                // the same phases again: not counted again
  r.containers[0].phases["firstLog"] = 1.5;  // its first line, a report later
  plane_->Report("dgx-0", r);
  const std::map<std::string, double> phases = plane_->Replicas(job).at(0).phases;
  EXPECT_EQ(phases.at("queued"), 5);
  EXPECT_EQ(phases.at("pull"), 2);
  EXPECT_EQ(phases.at("firstLog"), 1.5);
  const auto histograms = plane_->Metrics().start_phases;
  for (const char* phase : {"queued", "pull", "create", "start", "firstLog"}) {
    ASSERT_TRUE(histograms.count(phase)) << phase;
    EXPECT_EQ(histograms.at(phase).count(), 1u) << phase;
  }
  EXPECT_FALSE(histograms.count("made-up"));  // an agent's other names do not grow the metrics

  // Its agent restarts and adopts the container, its phases forgotten: those reported stay.
  r.containers[0].phases.clear();
  plane_->Report("dgx-0", r);
  EXPECT_EQ(plane_->Replicas(job).at(0).phases.at("pull"), 2);
  EXPECT_EQ(plane_->Metrics().start_phases.at("pull").count(), 1u);
  // The server restarts: the run's phases, reported again, were counted by the one before.
  r.containers[0].phases = {{"pull", 2}, {"create", 0.5}};
  Open(Dgx(1));
  r.applied_version = Register("dgx-0");
  plane_->Report("dgx-0", r);
  EXPECT_EQ(plane_->Replicas(job).at(0).phases.at("pull"), 2);
  EXPECT_FALSE(plane_->Metrics().start_phases.count("pull"));
}

TEST_F(ControlPlaneAgentTest, AContainerOffItsGpusNumaNodeIsACondition) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t job = plane_->Submit(R"({"gpus": 2, "image": "train:v2"})");
  plane_->Cycle();
  const auto affinity_events = [&] {
    std::vector<std::string> out;
    for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
      if (e.state.rfind("affinity-", 0) == 0) out.push_back(e.state + ": " + e.reason);
    return out;
  };
  const AssignmentSet set = Set("dgx-0");
  ASSERT_EQ(set.assignments.size(), 1u);
  AgentReport r;
  r.applied_version = set.version;
  r.containers.push_back(Container(set.assignments[0], "running"));
  plane_->Report("dgx-0", r);
  EXPECT_TRUE(plane_->Agents()[0].off_gpus.empty());
  EXPECT_TRUE(affinity_events().empty());  // nothing to say while all is well

  r.containers[0].off_gpus = "runs on CPUs 0-3 rather than its GPUs' (CPUs 64-127)";
  plane_->Report("dgx-0", r);
  plane_->Report("dgx-0", r);  // said once, not every heartbeat
  const std::vector<std::string> off = plane_->Agents()[0].off_gpus;
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0], "job " + std::to_string(job) + " replica 0 " + r.containers[0].off_gpus);
  std::vector<std::string> events = affinity_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(Has(events[0], "affinity-mismatch: containers run on CPUs away from their GPUs"))
      << events[0];
  EXPECT_TRUE(Has(events[0], "rather than its GPUs' (CPUs 64-127)")) << events[0];
  ASSERT_EQ(plane_->Metrics().off_gpus.size(), 1u);
  EXPECT_EQ(plane_->Metrics().off_gpus[0].second, 1u);

  // Moved back (or gone): the condition clears, once.
  r.containers[0].off_gpus.clear();
  plane_->Report("dgx-0", r);
  EXPECT_TRUE(plane_->Agents()[0].off_gpus.empty());
  events = affinity_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(Has(events[1], "affinity-matches")) << events[1];
  EXPECT_EQ(plane_->Metrics().off_gpus[0].second, 0u);
}

// --- Assignments -------------------------------------------------------------------------------

TEST_F(ControlPlaneAgentTest, ReportedImagesDrawAJobToTheNodeHoldingMostOfItsBytes) {
  Open(Dgx(3));
  for (const char* node : {"dgx-0", "dgx-1", "dgx-2"}) Register(node);
  const int64_t filler = plane_->Submit(R"({"gpus": 8, "image": "train:v2"})");
  plane_->Cycle();
  ASSERT_EQ(NodeOf(filler), "dgx-0");  // ties go to the first node
  const auto report_images = [&](const std::string& node, const std::string& name,
                                 std::vector<ImageLayer> layers) {
    AgentReport r;
    r.applied_version = Set(node).version;
    for (const Assignment& a : Set(node).assignments)
      r.containers.push_back(Container(a, "running"));
    r.images = std::vector<ReportedImage>{{{name}, std::move(layers)}};
    plane_->Report(node, r);
  };
  // dgx-0 (full) has train:v2; dgx-2 has last week's build, which shares the base and the
  // framework with it; dgx-1 has an unrelated image.
  report_images("dgx-0", "train:v2",
                {{"sha256:base", 6'000'000'000},
                 {"sha256:torch", 3'000'000'000},
                 {"sha256:code2", 1'000'000'000}});
  report_images("dgx-1", "other:1", {{"sha256:other", 5'000'000'000}});
  report_images("dgx-2", "train:v1",
                {{"sha256:base", 6'000'000'000},
                 {"sha256:torch", 3'000'000'000},
                 {"sha256:code1", 1'000'000'000}});
  // Reports without images leave them as they were, and a policy reload keeps them.
  ReportAll("dgx-2", "running");
  plane_->ApplyPolicy("name: berth\n", "test");
  const int64_t job = plane_->Submit(R"({"gpus": 1, "image": "train:v2"})");
  plane_->Cycle();
  EXPECT_EQ(NodeOf(job), "dgx-2");  // 1 GB to pull there, 10 GB on dgx-1
}

TEST_F(ControlPlaneAgentTest, AnAssignmentCarriesTheSpecTheGpusAndTheirSockets) {
  Open(TwoSockets());
  const uint64_t v0 = Register("n0", 4);
  // A job over GPUs of both sockets is pinned to both.
  const int64_t wide = plane_->Submit(R"({"gpus": 4, "image": "x"})");
  EXPECT_TRUE(Set("n0").assignments.empty());  // not placed before a cycle
  plane_->Cycle();
  ASSERT_EQ(State(wide), "scheduled");
  const AssignmentSet first = Set("n0");
  EXPECT_GT(first.version, v0);
  ASSERT_EQ(first.assignments.size(), 1u);
  const Assignment& w = first.assignments[0];
  EXPECT_EQ(w.job, wide);
  EXPECT_EQ(w.replica, 0);
  EXPECT_EQ(w.gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(w.gpu_uuids, Uuids("n0", 4));
  EXPECT_EQ(w.cpuset_cpus, "0,1,2,3,4,5,6,7");
  EXPECT_EQ(w.cpuset_mems, "0,1");
  EXPECT_FALSE(w.placement.empty());
  plane_->Stop(wide);
  ReportNone("n0", Set("n0").version);  // its GPUs are free once its agent has stopped it

  const int64_t id = plane_->Submit(
      R"({"name": "train", "gpus": 1, "replicas": 2, "image": "trainer:1",
          "command": ["python", "train.py"], "env": {"EPOCHS": "3"}, "gracePeriodSeconds": 7})");
  now_ += 1;
  plane_->Cycle();
  ASSERT_EQ(State(id), "scheduled");
  const AssignmentSet set = Set("n0");
  EXPECT_GT(set.version, first.version);
  ASSERT_EQ(set.assignments.size(), 2u);
  std::set<int> replicas, gpus;
  for (const Assignment& a : set.assignments) {
    replicas.insert(a.replica);
    EXPECT_EQ(a.job, id);
    EXPECT_EQ(a.name, "train");
    EXPECT_EQ(a.image, "trainer:1");
    EXPECT_EQ(a.command, (std::vector<std::string>{"python", "train.py"}));
    EXPECT_EQ(a.env, std::vector<std::string>{"EPOCHS=3"});
    EXPECT_EQ(a.grace_s, 7);
    EXPECT_FALSE(a.placement.empty());
    EXPECT_EQ(a.placement, set.assignments[0].placement);  // one token per placement
    EXPECT_NE(a.placement, w.placement);
    ASSERT_EQ(a.gpus.size(), 1u);
    gpus.insert(a.gpus[0]);
    // The UUIDs are the registration's, by index.
    ASSERT_EQ(a.gpu_uuids.size(), 1u);
    EXPECT_EQ(a.gpu_uuids[0], "GPU-n0-" + std::to_string(a.gpus[0]));
    // Pinned to the socket of its GPU: even GPUs on socket 0, odd ones on socket 1.
    const bool second = a.gpus[0] % 2 == 1;
    EXPECT_EQ(a.cpuset_cpus, second ? "4,5,6,7" : "0,1,2,3") << a.gpus[0];
    EXPECT_EQ(a.cpuset_mems, second ? "1" : "0") << a.gpus[0];
    EXPECT_EQ(a.log_since, "");
  }
  EXPECT_EQ(replicas, (std::set<int>{0, 1}));
  EXPECT_EQ(gpus.size(), 2u);  // two different GPUs
}

TEST_F(ControlPlaneAgentTest, VersionsGrowOnlyWithTheNodesOwnSet) {
  Open(Dgx(2));
  const uint64_t v0 = Register("dgx-0");
  const uint64_t w0 = Register("dgx-1");
  const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const std::string node = NodeOf(a);
  ASSERT_FALSE(node.empty());
  const std::string other = node == "dgx-0" ? "dgx-1" : "dgx-0";
  const uint64_t placed = Set(node).version;
  EXPECT_GT(placed, node == "dgx-0" ? v0 : w0);
  EXPECT_EQ(Set(other).version, node == "dgx-0" ? w0 : v0);  // not its change
  plane_->Cycle();                                           // nothing changes: nor do versions
  EXPECT_EQ(Set(node).version, placed);
  // Running changes the job, not the set.
  ReportAll(node, "running");
  ASSERT_EQ(State(a), "running");
  EXPECT_EQ(Set(node).version, placed);
  plane_->Stop(a);  // off the node: the set changes again
  const AssignmentSet after = Set(node);
  EXPECT_GT(after.version, placed);
  EXPECT_TRUE(after.assignments.empty());
}

TEST_F(ControlPlaneAgentTest, AWatchWaitsForAChangeOrItsWait) {
  Open(Dgx(1));
  const uint64_t v = Register("dgx-0");
  // The same version: back after the wait, with it.
  auto started = Clock::now();
  AssignmentSet set = plane_->Assignments("dgx-0", v, 0.2);
  auto waited = Clock::now() - started;
  EXPECT_EQ(set.version, v);
  EXPECT_TRUE(set.assignments.empty());
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // Another version: at once.
  started = Clock::now();
  set = plane_->Assignments("dgx-0", v - 1, 30);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(set.version, v);
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Assignments("nope", 0, 0); }, &message), 404);

  // A waiting watch wakes when a job is placed on its node.
  std::future<AssignmentSet> watch =
      std::async(std::launch::async, [&] { return plane_->Assignments("dgx-0", v, 60); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  started = Clock::now();
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 2})");
  plane_->Cycle();
  ASSERT_EQ(watch.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(20));
  set = watch.get();
  EXPECT_GT(set.version, v);
  ASSERT_EQ(set.assignments.size(), 1u);
  EXPECT_EQ(set.assignments[0].job, id);
}

// --- Reports -----------------------------------------------------------------------------------

TEST_F(ControlPlaneAgentTest, ReportsMoveAJobThroughStartingAndRunningToSuccess) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 2, "replicas": 2})");
  plane_->Cycle();
  ASSERT_EQ(State(id), "scheduled");
  const AssignmentSet set = Set("dgx-0");
  ASSERT_EQ(set.assignments.size(), 2u);
  const Assignment& r0 = set.assignments[0].replica == 0 ? set.assignments[0] : set.assignments[1];
  const Assignment& r1 = set.assignments[0].replica == 0 ? set.assignments[1] : set.assignments[0];
  const auto report = [&](const ContainerReport& a, const ContainerReport& b) {
    AgentReport r;
    r.applied_version = set.version;
    r.containers = {a, b};
    plane_->Report("dgx-0", r);
  };
  report(Container(r0, "starting"), Container(r1, "starting"));
  EXPECT_EQ(State(id), "starting");
  report(Container(r0, "running"), Container(r1, "starting"));
  EXPECT_EQ(State(id), "running");
  report(Container(r0, "exited", 0), Container(r1, "running"));  // one done, one going
  EXPECT_EQ(State(id), "running");
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 4);
  report(Container(r0, "exited", 0), Container(r1, "exited", 0));
  const StoredJob done = plane_->Get(id);
  EXPECT_EQ(done.state, "succeeded");
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_TRUE(done.placements.empty());
  EXPECT_EQ(States(id),
            (std::vector<std::string>{"pending", "scheduled", "starting", "running", "succeeded"}));
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 8);  // its GPUs are free again
  EXPECT_TRUE(Set("dgx-0").assignments.empty());
  // Reports of its containers after the end change nothing.
  report(Container(r0, "exited", 0), Container(r1, "exited", 0));
  EXPECT_EQ(State(id), "succeeded");
  EXPECT_EQ(States(id).size(), 5u);
}

TEST_F(ControlPlaneAgentTest, ANonZeroExitFailsTheJobWithItsCode) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const AssignmentSet set = Set("dgx-0");
  ASSERT_EQ(set.assignments.size(), 1u);
  ReportAll("dgx-0", "running");
  EXPECT_EQ(State(id), "running");
  AgentReport r;
  r.applied_version = set.version;
  r.containers = {Container(set.assignments[0], "exited", 3)};
  plane_->Report("dgx-0", r);
  const StoredJob job = plane_->Get(id);
  EXPECT_EQ(job.state, "failed");
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_TRUE(Has(job.reason, "exited with code 3")) << job.reason;
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 8);
  // Its GPUs go to the next job.
  const int64_t next = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  EXPECT_EQ(State(next), "scheduled");
}

// A replica that fails ends its gang as failed, but the other replicas' GPUs stay held, and
// their last output is taken, until their containers have stopped: so that nothing else starts
// on GPUs a replica still runs on, and `berth run` does not end before their last lines.
TEST_F(ControlPlaneAgentTest, AFailedReplicaHoldsItsGangsGpusUntilTheOthersHaveStopped) {
  const int64_t id = PlaceAGangOnTwoNodes();
  ReportAll("dgx-0", "running");
  ReportAll("dgx-1", "running");
  ASSERT_EQ(State(id), "running");
  const Assignment a0 = Of("dgx-0", id).at(0), a1 = Of("dgx-1", id).at(0);
  AgentReport failed;
  failed.applied_version = Set("dgx-0").version;
  failed.containers = {Container(a0, "exited", 3)};
  plane_->Report("dgx-0", failed);
  StoredJob job = plane_->Get(id);
  EXPECT_EQ(job.state, "failed");
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_TRUE(Has(job.reason, "replica " + std::to_string(a0.replica) + " exited with code 3"))
      << job.reason;
  EXPECT_TRUE(plane_->Stopping(id));
  EXPECT_TRUE(Of("dgx-1", id).empty());  // the other replica's agent is told to stop it
  const int64_t next = plane_->Submit(R"({"image": "x", "gpus": 8, "replicas": 2})");
  plane_->Cycle();
  EXPECT_EQ(State(next), "pending");
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Remove(id); }, &message), 409);
  EXPECT_TRUE(Has(message, "failed but its containers are still stopping")) << message;
  // Its last words, after the end, are kept.
  AgentReport last;
  last.applied_version = Set("dgx-1").version;
  last.containers = {Container(a1, "running")};
  last.logs = {{id,
                a1.replica,
                a1.placement,
                logs_->Cursor(id, a1.replica, a1.placement),
                "2026-12-02T03:40:50Z",
                "last words\n",
                {}}};
  plane_->Report("dgx-1", last);
  int64_t offset = -1;
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &offset), "last words\n");

  // A restart meanwhile holds them too.
  now_ += 1;
  Open(Dgx(2));
  Register("dgx-0");
  Register("dgx-1");
  ReportNone("dgx-0", Set("dgx-0").version);
  ReportStillRunning("dgx-1", a1);
  plane_->Cycle();
  EXPECT_EQ(State(next), "pending");
  EXPECT_TRUE(plane_->Stopping(id));
  EXPECT_EQ(State(id), "failed");

  // Stopped: the failure stays what it was, and the GPUs go to the next job. Each replica says
  // how it ended (review: the others read exit code 0).
  AgentReport stopped;
  stopped.applied_version = Set("dgx-1").version;
  stopped.containers = {Container(a1, "exited", 143)};
  plane_->Report("dgx-1", stopped);
  plane_->Cycle();
  const std::map<int, ContainerReport> replicas = plane_->Replicas(id);
  EXPECT_EQ(replicas.at(a1.replica).state, "exited");
  EXPECT_EQ(replicas.at(a1.replica).exit_code, 143);
  EXPECT_EQ(replicas.at(a0.replica).state, "gone");  // not reported since the restart
  job = plane_->Get(id);
  EXPECT_FALSE(plane_->Stopping(id));
  EXPECT_EQ(job.state, "failed");
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_TRUE(Has(job.reason, "exited with code 3; its containers have stopped")) << job.reason;
  EXPECT_EQ(State(next), "scheduled");
  EXPECT_EQ(Status([&] { plane_->Remove(id); }, &message), 200) << message;
}

// A job over before its agent's first report on it ran all the same: its history says so.
TEST_F(ControlPlaneAgentTest, AQuickJobSeenFirstExitedStillRanInItsHistory) {
  Open(Dgx(1));
  Register("dgx-0");
  for (const int code : {0, 3}) {
    const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
    plane_->Cycle();
    const AssignmentSet set = Set("dgx-0");
    ASSERT_EQ(set.assignments.size(), 1u);
    AgentReport r;
    r.applied_version = set.version;
    r.containers = {Container(set.assignments[0], "exited", code)};
    plane_->Report("dgx-0", r);
    EXPECT_EQ(States(id), (std::vector<std::string>{"pending", "scheduled", "running",
                                                    code == 0 ? "succeeded" : "failed"}));
  }
}

TEST_F(ControlPlaneAgentTest, AFailedStartIsRetriedWithANewPlacementAndFailsTheThirdTime) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"gpus": 1, "image": "nope:latest"})");
  std::set<std::string> tokens;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    now_ += 400;  // past any back-off
    plane_->Cycle();
    ASSERT_EQ(State(id), "scheduled") << "attempt " << attempt;
    const std::vector<Assignment> mine = Of("dgx-0", id);
    ASSERT_EQ(mine.size(), 1u);
    EXPECT_TRUE(tokens.insert(mine[0].placement).second)
        << "placement " << mine[0].placement << " used again";
    ReportAll("dgx-0", "failed");
    if (attempt < 3) {
      const StoredJob job = plane_->Get(id);
      EXPECT_EQ(job.state, "pending") << "attempt " << attempt;
      EXPECT_TRUE(Has(job.reason, "could not be started on dgx-0: image not found")) << job.reason;
      EXPECT_TRUE(Of("dgx-0", id).empty());
      EXPECT_EQ(plane_->Nodes()[0].free_gpus, 8);
    }
  }
  const StoredJob job = plane_->Get(id);
  EXPECT_EQ(job.state, "failed");
  EXPECT_TRUE(Has(job.reason, "could not be started 3 times")) << job.reason;
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 8);
  now_ += 400;
  plane_->Cycle();
  EXPECT_EQ(State(id), "failed");  // not placed again
  EXPECT_TRUE(Set("dgx-0").assignments.empty());
}

TEST_F(ControlPlaneAgentTest, AStartThatWorksResetsTheFailureCount) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 1})");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    now_ += 400;
    plane_->Cycle();
    ASSERT_EQ(State(id), "scheduled");
    ReportAll("dgx-0", "failed");
    ASSERT_EQ(State(id), "pending");
  }
  now_ += 400;
  plane_->Cycle();
  ReportAll("dgx-0", "running");
  ASSERT_EQ(State(id), "running");
  // Its container is lost; the next start's failure is its first again.
  ReportNone("dgx-0", Set("dgx-0").version);
  ASSERT_EQ(State(id), "pending");
  now_ += 400;
  plane_->Cycle();
  ASSERT_EQ(State(id), "scheduled");
  ReportAll("dgx-0", "failed");
  EXPECT_EQ(State(id), "pending");
}

// A stopped job's GPUs go to no one until its agent reports its containers gone: its
// container may take its grace period to stop.
TEST_F(ControlPlaneAgentTest, AStoppedJobHoldsItsGpusUntilItsContainersAreGone) {
  Assignment a;
  const int64_t id = RunWholeNodeJob(&a);
  plane_->Stop(id);
  EXPECT_EQ(State(id), "stopped");
  EXPECT_TRUE(Of("dgx-0", id).empty());  // the agent is told to stop it
  const int64_t next = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  EXPECT_EQ(State(next), "pending");
  // Still running, as of the version that took it away: still held.
  ReportStillRunning("dgx-0", a);
  plane_->Cycle();
  EXPECT_EQ(State(next), "pending");
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 0);
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Remove(id); }, &message), 409);  // its container still runs
  EXPECT_TRUE(Has(message, "containers are still stopping")) << message;
  // What berth ps lists (live=1): the jobs not ended, and this one while it still stops.
  JobFilter live;
  live.live = true;
  auto listed = [&](int64_t job) {
    for (const StoredJob& j : plane_->List(live))
      if (j.id == job) return true;
    return false;
  };
  EXPECT_TRUE(listed(id));
  EXPECT_TRUE(listed(next));
  // Gone: freed, and the next job is placed. The stopped job stays stopped, and says so.
  ReportNone("dgx-0", Set("dgx-0").version);
  plane_->Cycle();
  EXPECT_EQ(State(next), "scheduled");
  EXPECT_EQ(State(id), "stopped");
  EXPECT_FALSE(listed(id));  // ended now: only berth ps -a lists it
  EXPECT_TRUE(listed(next));
  EXPECT_TRUE(Has(plane_->Get(id).reason, "its GPUs are free")) << plane_->Get(id).reason;
  // A job stopped before its node's agent ever ran it, or with no agent, frees at once.
  plane_->Stop(next);
  const int64_t third = plane_->Submit(R"({"image": "x", "gpus": 8})");
  ReportNone("dgx-0", Set("dgx-0").version);
  plane_->Cycle();
  EXPECT_EQ(State(third), "scheduled");
}

// A job stopped on a node that is then lost ends stopped without anyone seeing its containers
// stop, and says so (review: it said its containers had stopped).
TEST_F(ControlPlaneAgentTest, AStoppedJobOnALostNodeSaysTheNodeWasLost) {
  Open(Dgx(1), 15, 120);
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ReportAll("dgx-0", "running");
  plane_->Stop(id);
  now_ += 60;
  plane_->Cycle();
  EXPECT_TRUE(Has(plane_->Get(id).reason, "held until its containers stop"))
      << plane_->Get(id).reason;
  now_ += 61;
  plane_->Cycle();
  ASSERT_TRUE(plane_->Agents()[0].lost);
  EXPECT_EQ(State(id), "stopped");
  EXPECT_TRUE(Has(plane_->Get(id).reason, "node dgx-0 was lost")) << plane_->Get(id).reason;
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Remove(id); }, &message), 200) << message;
}

// Across a restart too: a stopped job whose containers were still stopping holds its GPUs
// until the agent, back, reports them gone (a preempted one: ARestartWhileAJobStops...).
TEST_F(ControlPlaneAgentTest, AJobStillStoppingAtARestartHoldsItsGpusUntilItsContainersAreGone) {
  Assignment a;
  const int64_t id = RunWholeNodeJob(&a);
  plane_->Stop(id);
  now_ += 1;
  Open(Dgx(1));  // the server restarts while it still stops
  EXPECT_TRUE(Has(plane_->recovery_summary(), "1 stopping job still holding GPUs"))
      << plane_->recovery_summary();
  const int64_t next = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  EXPECT_EQ(State(next), "pending");
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Remove(id); }, &message), 409) << message;
  Register("dgx-0");
  EXPECT_TRUE(Of("dgx-0", id).empty());  // the agent is told to stop it
  ReportStillRunning("dgx-0", a);
  plane_->Cycle();
  EXPECT_EQ(State(next), "pending");
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 0);
  // Gone: it stays stopped, and the GPUs go to the next job.
  ReportNone("dgx-0", Set("dgx-0").version);
  plane_->Cycle();
  EXPECT_EQ(State(id), "stopped");
  EXPECT_EQ(State(next), "scheduled");
  EXPECT_EQ(Status([&] { plane_->Remove(id); }, &message), 200) << message;
}

TEST_F(ControlPlaneAgentTest, AContainerMissingFromAnActedOnVersionIsLost) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 4})");
  plane_->Cycle();
  const uint64_t version = Set("dgx-0").version;
  const std::string token = Of("dgx-0", id).at(0).placement;
  // The agent has not yet acted on the version that handed it out: not lost.
  ReportNone("dgx-0", version - 1);
  EXPECT_EQ(State(id), "scheduled");
  ReportNone("dgx-0", 0);
  EXPECT_EQ(State(id), "scheduled");
  // The assignment says whether the server has seen its container: an agent back from a crash
  // that finds none reports it gone rather than start it again unseen.
  EXPECT_FALSE(Of("dgx-0", id).at(0).ran);
  ReportAll("dgx-0", "running");
  ASSERT_EQ(State(id), "running");
  EXPECT_TRUE(Of("dgx-0", id).at(0).ran);
  // A container of an earlier placement of the job, or of another job, is not it.
  AgentReport r;
  r.applied_version = version;
  ContainerReport stale;
  stale.job = id;
  stale.placement = "p-earlier";
  stale.state = "running";
  ContainerReport stranger = stale;
  stranger.job = id + 100;
  stranger.placement = token;
  r.containers = {stale, stranger};
  plane_->Report("dgx-0", r);
  const std::vector<std::string> states = States(id);
  ASSERT_GE(states.size(), 2u);
  EXPECT_EQ(states[states.size() - 2], "lost");
  EXPECT_EQ(states.back(), "pending");
  EXPECT_TRUE(Has(plane_->Events(id).events[states.size() - 2].reason, "is gone"));
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 8);
  EXPECT_TRUE(Of("dgx-0", id).empty());
  // It is placed again, after its back-off, under a new token.
  now_ += 400;
  plane_->Cycle();
  ASSERT_EQ(State(id), "scheduled");
  EXPECT_NE(Of("dgx-0", id).at(0).placement, token);
  EXPECT_FALSE(Of("dgx-0", id).at(0).ran);
}

// --- Preemption with an agent ------------------------------------------------------------------

TEST_F(ControlPlaneAgentTest, APreemptedJobKeepsItsGpusUntilItsAgentStopsIt) {
  Assignment old;
  int64_t preemptor = 0;
  uint64_t before_stop = 0;
  const int64_t victim = PreemptAWholeNodeJob(&old, &preemptor, &before_stop);
  ASSERT_EQ(State(victim), "preempted");
  // Its agent is told to stop it: it is off the node's set, at a new version.
  const AssignmentSet stop = Set("dgx-0");
  EXPECT_TRUE(stop.assignments.empty());
  // Still running there: it keeps its GPUs, and the preemptor waits.
  AgentReport running;
  running.applied_version = stop.version;
  running.containers = {Container(old, "running")};
  for (int i = 0; i < 5; ++i) {
    now_ += 1;
    plane_->Report("dgx-0", running);
    plane_->Cycle();
    EXPECT_EQ(State(victim), "preempted");
    EXPECT_EQ(State(preemptor), "pending");
    EXPECT_EQ(plane_->Nodes()[0].free_gpus, 0);
    EXPECT_EQ(plane_->Nodes()[0].gpu_map, "########");
  }
  // A report from before the stop lists nothing: the agent has not acted on it yet.
  ReportNone("dgx-0", before_stop);
  EXPECT_EQ(State(victim), "preempted");
  EXPECT_EQ(State(preemptor), "pending");
  // Stopped (exited counts as stopped): the victim waits again and the preemptor is placed.
  AgentReport stopped;
  stopped.applied_version = stop.version;
  stopped.containers = {Container(old, "exited", 137)};
  plane_->Report("dgx-0", stopped);
  EXPECT_EQ(State(victim), "pending");
  EXPECT_EQ(State(preemptor), "scheduled");
  EXPECT_EQ(plane_->Get(victim).exit_code, 0);  // a stop is not a failure
  const std::vector<Assignment> placed = Of("dgx-0", preemptor);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].gpus, old.gpus);
  EXPECT_TRUE(Of("dgx-0", victim).empty());
  // No loop: the preemptor runs, the victim waits, however many cycles pass.
  for (int i = 0; i < 30; ++i) {
    now_ += 5;
    ReportAll("dgx-0", "running");
    plane_->Cycle();
    ASSERT_EQ(State(preemptor), "running") << "cycle " << i;
    ASSERT_EQ(State(victim), "pending") << "cycle " << i;
  }
  int preempted = 0;
  for (const std::string& s : States(victim)) preempted += s == "preempted";
  EXPECT_EQ(preempted, 1);
  EXPECT_EQ(States(preemptor), (std::vector<std::string>{"pending", "scheduled", "running"}));
  // When the preemptor ends, the victim runs again.
  AgentReport done;
  done.applied_version = Set("dgx-0").version;
  done.containers = {Container(placed[0], "exited", 0)};
  plane_->Report("dgx-0", done);
  ASSERT_EQ(State(preemptor), "succeeded");
  now_ += 5;
  plane_->Cycle();
  EXPECT_EQ(State(victim), "scheduled");
  EXPECT_NE(Of("dgx-0", victim).at(0).placement, old.placement);
}

// While a preemptor waits for its victim to stop, the node it will land on (and only that one)
// is asked to pull its image, so that the pull overlaps the victim's grace period.
TEST_F(ControlPlaneAgentTest, ANodeAJobWaitsToLandOnPullsItsImageAhead) {
  Open(Dgx(2));
  Register("dgx-0");
  Register("dgx-1");
  for (int i = 0; i < 2; ++i)
    plane_->Submit(R"({"gpus": 8, "priority": 1, "gracePeriodSeconds": 30, "image": "old:1"})");
  plane_->Cycle();
  for (const char* node : {"dgx-0", "dgx-1"}) ReportAll(node, "running");
  EXPECT_TRUE(Set("dgx-0").prefetch.empty());
  const int64_t preemptor = plane_->Submit(
      R"({"priority": 1000, "groups": [{"name": "train", "gpus": 8, "image": "big:2"},
                                       {"name": "eval", "cpuMilli": 1000, "image": "eval:3"}]})");
  for (int i = 0; i < 3 && Set("dgx-0").prefetch.empty() && Set("dgx-1").prefetch.empty(); ++i) {
    now_ += 1;
    plane_->Cycle();
  }
  ASSERT_EQ(State(preemptor), "pending");
  const std::string node = Set("dgx-0").prefetch.empty() ? "dgx-1" : "dgx-0";
  const std::string other = node == "dgx-0" ? "dgx-1" : "dgx-0";
  const AssignmentSet asked = Set(node);
  EXPECT_EQ(asked.prefetch, (std::vector<std::string>{"big:2", "eval:3"}));
  EXPECT_TRUE(Set(other).prefetch.empty());
  // Asked once: further cycles leave the version alone.
  now_ += 1;
  plane_->Cycle();
  EXPECT_EQ(Set(node).version, asked.version);
  // Once the victim has stopped, the preemptor is placed and nothing is left to pull ahead.
  AgentReport stopped;
  stopped.applied_version = asked.version;
  plane_->Report(node, stopped);
  now_ += 1;
  plane_->Cycle();
  ASSERT_EQ(State(preemptor), "scheduled");
  EXPECT_TRUE(Set(node).prefetch.empty());
}

TEST_F(ControlPlaneAgentTest, WithoutAnAgentAPreemptedJobStopsAtOnce) {
  Open(Dgx(1));  // no agent on dgx-0: nothing runs there
  const int64_t victim = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1})");
  plane_->Cycle();
  const int64_t preemptor = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1000})");
  for (int i = 0; i < 3 && State(preemptor) != "scheduled"; ++i) {
    now_ += 1;
    plane_->Cycle();
  }
  EXPECT_EQ(State(preemptor), "scheduled");
  EXPECT_EQ(State(victim), "pending");
  const std::vector<std::string> states = States(victim);
  EXPECT_EQ(states, (std::vector<std::string>{"pending", "scheduled", "preempted", "pending"}));
}

// A job over a node with an agent and one without: nothing runs it on the second, so the
// agent's stop is all it waits for.
TEST_F(ControlPlaneAgentTest, APreemptedJobOverANodeWithoutAnAgentStopsWhenItsAgentSaysSo) {
  Open(Dgx(2));
  Register("dgx-0");  // dgx-1 has none
  const int64_t victim =
      plane_->Submit(R"({"image": "x", "gpus": 8, "replicas": 2, "priority": 1})");
  plane_->Cycle();
  ASSERT_EQ(Of("dgx-0", victim).size(), 1u);
  ReportAll("dgx-0", "running");
  const int64_t preemptor =
      plane_->Submit(R"({"image": "x", "gpus": 8, "replicas": 2, "priority": 1000})");
  for (int i = 0; i < 3 && State(victim) != "preempted"; ++i) {
    now_ += 1;
    plane_->Cycle();
  }
  ASSERT_EQ(State(victim), "preempted");
  ReportNone("dgx-0", Set("dgx-0").version);
  now_ += 1;
  plane_->Cycle();
  EXPECT_EQ(State(victim), "pending");
  EXPECT_EQ(State(preemptor), "scheduled");
}

// --- Liveness ----------------------------------------------------------------------------------

// berth server --expect-agents: a node whose agent does not come turns unhealthy (no new jobs),
// then lost, and the job placed there goes elsewhere (without the flag it would wait
// `scheduled` for an agent that may never come); when the agent comes at last, jobs go there.
// No node is cordoned while agents are on their way: nothing is preempted for them.
TEST_F(ControlPlaneAgentTest, WithExpectAgentsANodeWhoseAgentNeverComesIsLost) {
  expect_agents_ = true;
  Open(Dgx(2), 15, 120);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
  Register("dgx-1");
  ReportNone("dgx-1", Set("dgx-1").version);
  const int64_t a = plane_->Submit(R"({"image": "x", "gpus": 8})");
  const int64_t b = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ASSERT_EQ(State(a), "scheduled");
  ASSERT_EQ(State(b), "scheduled");
  const int64_t here = Of("dgx-1", a).empty() ? b : a;  // on dgx-1, whose agent is in touch
  const int64_t there = a + b - here;                   // on dgx-0, whose agent never comes
  ReportAll("dgx-1", "running");
  now_ += 16;
  ReportAll("dgx-1", "running");
  plane_->Cycle();
  EXPECT_TRUE(plane_->Agents()[0].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
  EXPECT_FALSE(plane_->Agents()[1].unhealthy);
  std::string why;
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
    if (e.node == "dgx-0" && e.state == "unhealthy") why = e.reason;
  EXPECT_NE(why.find("its agent has not registered since the server started"), std::string::npos)
      << why;
  now_ += 110;
  ReportAll("dgx-1", "running");
  plane_->Cycle();
  EXPECT_TRUE(plane_->Agents()[0].lost);
  EXPECT_EQ(State(there), "pending");  // dgx-1 is full
  EXPECT_EQ(State(here), "running");
  // The agent comes at last: the job goes there.
  Register("dgx-0");
  ReportNone("dgx-0", Set("dgx-0").version);
  plane_->Cycle();
  EXPECT_FALSE(plane_->Agents()[0].lost);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
  EXPECT_EQ(NodeOf(there), "dgx-0");
  EXPECT_EQ(plane_->Metrics().decisions.at("preempt"), 0u);
  // Its first report is no return (review: the event said "reports again").
  for (const StoredEvent& e : plane_->EventsAfter(0, 1000, Caller(), 0).events)
    if (e.node == "dgx-0" && e.state == "healthy") why = e.reason;
  EXPECT_EQ(why, "its agent reports, for the first time since the server started");
}

// With --expect-agents, a job stopped on a node whose agent has not come yet, and where no job
// ran before, ends at once and frees its GPUs: nothing can run it there (review).
TEST_F(ControlPlaneAgentTest, WithExpectAgentsAJobStoppedBeforeItsNodesAgentCameEndsAtOnce) {
  expect_agents_ = true;
  Open(Dgx(1), 15, 120);
  const int64_t job = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ASSERT_EQ(State(job), "scheduled");
  plane_->Stop(job);
  plane_->Cycle();
  EXPECT_EQ(State(job), "stopped");
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 8);
  EXPECT_DOUBLE_EQ(plane_->Nodes()[0].agent.heartbeat_age_s, 0);  // expected since the start
  now_ += 5;
  EXPECT_DOUBLE_EQ(plane_->Nodes()[0].agent.heartbeat_age_s, 5);
}

TEST_F(ControlPlaneAgentTest, ASilentAgentsNodeIsCordonedThenLostAndItsJobsMove) {
  std::string silent, alive;
  int x = 0;
  const int64_t a = PlaceOnOneOfTwo(4, &silent, &alive, &x);
  const int y = 1 - x;
  const int64_t filler = plane_->Submit(R"({"image": "x", "gpus": 8})");  // the other node is full
  plane_->Cycle();
  ASSERT_EQ(NodeOf(filler), alive);
  ReportAll(silent, "running");
  ReportAll(alive, "running");
  ASSERT_EQ(State(a), "running");
  const std::string token = Of(silent, a).at(0).placement;

  // Healthy for a while.
  now_ += 10;
  ReportAll(alive, "running");
  plane_->Cycle();
  EXPECT_FALSE(plane_->Agents()[x].unhealthy);
  EXPECT_FALSE(plane_->Nodes()[x].cordoned);
  EXPECT_DOUBLE_EQ(plane_->Agents()[x].heartbeat_age_s, 10);

  // Past unhealthy_after_s: cordoned, its job kept, and no new job goes there.
  now_ += 6;
  ReportAll(alive, "running");
  plane_->Cycle();
  EXPECT_TRUE(plane_->Agents()[x].unhealthy);
  EXPECT_FALSE(plane_->Agents()[x].lost);
  EXPECT_FALSE(plane_->Agents()[y].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  EXPECT_FALSE(plane_->Nodes()[y].cordoned);
  EXPECT_EQ(State(a), "running");
  const int64_t b =
      plane_->Submit(R"({"image": "x", "gpus": 1})");  // fits only on the cordoned node
  for (int i = 0; i < 3; ++i) {
    now_ += 1;
    ReportAll(alive, "running");
    plane_->Cycle();
    EXPECT_EQ(State(b), "pending");
  }
  plane_->Stop(filler);  // room on the other node
  now_ += 1;
  ReportAll(alive, "running");
  plane_->Cycle();
  EXPECT_EQ(NodeOf(b), alive);
  EXPECT_EQ(State(a), "running");

  // Past lost_after_s: its job is lost, pending, then placed on the other node.
  while (!plane_->Agents()[x].lost) {
    now_ += 10;
    ReportAll(alive, "running");
    plane_->Cycle();
    ASSERT_LE(now_, 1000 + 130);
  }
  EXPECT_GE(now_, 1000 + 120);
  // At once, without back-off: nothing the job did failed.
  if (State(a) != "scheduled") {
    now_ += 1;
    plane_->Cycle();
  }
  EXPECT_EQ(State(a), "scheduled");
  std::vector<std::string> states = States(a);
  ASSERT_GE(states.size(), 2u);
  bool lost_then_pending = false;
  for (size_t i = 0; i + 1 < states.size(); ++i)
    lost_then_pending |= states[i] == "lost" && states[i + 1] == "pending";
  EXPECT_TRUE(lost_then_pending);
  EXPECT_TRUE(Of(silent, a).empty());
  EXPECT_EQ(NodeOf(a), alive);
  EXPECT_NE(Of(alive, a).at(0).placement, token);

  // The agent comes back: the node takes jobs again. Its old container is no job's.
  AgentReport back;
  back.applied_version = Set(silent).version;
  ContainerReport old;
  old.job = a;
  old.placement = token;
  old.state = "running";
  back.containers = {old};
  plane_->Report(silent, back);
  EXPECT_FALSE(plane_->Agents()[x].unhealthy);
  EXPECT_FALSE(plane_->Agents()[x].lost);
  EXPECT_FALSE(plane_->Nodes()[x].cordoned);
  EXPECT_EQ(State(a), "scheduled");
  const int64_t c = plane_->Submit(R"({"image": "x", "gpus": 8})");
  ReportAll(alive, "running");
  plane_->Cycle();
  EXPECT_EQ(NodeOf(c), silent);
}

// An agent that reports but cannot reach Docker can neither start nor see containers: its node
// goes the way of a silent one, on the clock of its first such report, and its running job is
// not taken as gone meanwhile.
TEST_F(ControlPlaneAgentTest, AnAgentWithoutItsContainerEngineIsUnhealthyThenLost) {
  std::string away, alive;
  int x = 0;
  const int64_t a = PlaceOnOneOfTwo(8, &away, &alive, &x);
  const int y = 1 - x;
  ReportAll(away, "running");
  ASSERT_EQ(State(a), "running");
  const auto node_events = [&] {
    std::vector<std::string> out;
    for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
      if (e.job == 0 && e.state != "agent-registered") out.push_back(e.state + ": " + e.reason);
    return out;
  };
  const std::string error =
      "cannot reach the Docker engine at /var/run/docker.sock: No such file or directory";
  const auto report_away = [&] {
    AgentReport r;
    r.applied_version = Set(away).version;
    r.runtime_error = error;
    plane_->Report(away, r);
  };

  // Reporting, so never silent; the engine's absence is what counts.
  report_away();
  EXPECT_EQ(plane_->Agents()[x].engine_error, error);
  EXPECT_EQ(plane_->Agents()[y].engine_error, "");
  for (int i = 0; i < 14; ++i) {
    now_ += 1;
    report_away();
    ReportAll(alive, "running");
    plane_->Cycle();
  }
  EXPECT_FALSE(plane_->Agents()[x].unhealthy);
  EXPECT_EQ(State(a), "running");  // an empty container list is not read as its end
  now_ += 1;
  report_away();
  EXPECT_TRUE(plane_->Agents()[x].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  EXPECT_FALSE(plane_->Agents()[y].unhealthy);
  ASSERT_EQ(node_events().size(), 1u);
  EXPECT_TRUE(Has(node_events()[0], "unhealthy: its agent cannot reach the container engine"));
  EXPECT_TRUE(Has(node_events()[0], "/var/run/docker.sock"));
  EXPECT_EQ(State(a), "running");

  // Lost at 120 s: its job is placed again on the other node.
  while (!plane_->Agents()[x].lost) {
    now_ += 5;
    report_away();
    ReportAll(alive, "running");
    plane_->Cycle();
    ASSERT_LE(now_, 1000 + 125);
  }
  EXPECT_GE(now_, 1000 + 120);
  if (State(a) != "scheduled") {
    now_ += 1;
    plane_->Cycle();
  }
  EXPECT_EQ(NodeOf(a), alive);
  EXPECT_TRUE(Has(node_events().back(), "lost: its agent cannot reach the container engine"));
  bool said_why = false;
  for (const StoredEvent& e : plane_->Events(a).events)
    said_why |= e.state == "lost" && Has(e.reason, "cannot reach the container engine");
  EXPECT_TRUE(said_why);

  // The engine is back: the first report with its containers makes the node healthy.
  ReportNone(away, Set(away).version);
  EXPECT_EQ(plane_->Agents()[x].engine_error, "");
  EXPECT_FALSE(plane_->Agents()[x].unhealthy);
  EXPECT_FALSE(plane_->Agents()[x].lost);
  EXPECT_FALSE(plane_->Nodes()[x].cordoned);
  EXPECT_TRUE(Has(node_events().back(), "healthy: its agent reports again"));
}

// A job placed where the agent cannot reach its container engine says so while it waits to
// start (berth up on a machine without Docker), in inspect and in listings alike.
TEST_F(ControlPlaneAgentTest, AScheduledJobSaysItsAgentCannotReachTheEngine) {
  std::string away, alive;
  int x = 0;
  const int64_t a = PlaceOnOneOfTwo(8, &away, &alive, &x);
  ASSERT_EQ(State(a), "scheduled");
  EXPECT_EQ(plane_->WhyWaiting(a), "");
  AgentReport r;
  r.applied_version = Set(away).version;
  r.runtime_error = "cannot reach the Docker engine at /var/run/docker.sock";
  plane_->Report(away, r);
  const std::string why = plane_->WhyWaiting(a);
  EXPECT_TRUE(Has(why, "; not started: the agent of node " + away +
                           " cannot reach its container engine (cannot reach the Docker engine "
                           "at /var/run/docker.sock)"))
      << why;
  EXPECT_TRUE(Has(why, "placed on " + away)) << why;  // the placement's reason comes first
  std::vector<StoredJob> listed = plane_->List(JobFilter());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].reason, why);
  EXPECT_EQ(plane_->Get(a).reason.find("not started"), std::string::npos);  // not stored

  ReportAll(away, "running");  // the engine is back, and the job starts
  ASSERT_EQ(State(a), "running");
  EXPECT_EQ(plane_->WhyWaiting(a), "");
  EXPECT_EQ(plane_->List(JobFilter())[0].reason, plane_->Get(a).reason);
}

// An outage that began as silence and goes on as an engine away is one outage: no "healthy" in
// between, the cordon kept; an agent restarted meanwhile does not lift it either.
TEST_F(ControlPlaneAgentTest, AnOutageStaysOneAcrossSilenceAnEngineAwayAndARestart) {
  std::string down, alive;
  int x = 0;
  const int64_t job = PlaceOnOneOfTwo(8, &down, &alive, &x);
  ReportAll(down, "running");
  AgentReport away;
  away.runtime_error = "cannot reach the Docker engine";
  const auto healthy_events = [&] {
    int n = 0;
    for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
      n += e.state == "healthy";
    return n;
  };
  // Silent past the unhealthy delay, then reporting the engine away.
  for (int i = 0; i < 20; ++i) {
    now_ += 1;
    ReportAll(alive, "running");
    plane_->Cycle();
  }
  ASSERT_TRUE(plane_->Agents()[x].unhealthy);
  away.applied_version = Set(down).version;
  plane_->Report(down, away);
  EXPECT_TRUE(plane_->Agents()[x].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  // The agent restarts, the engine still away.
  Register(down);
  plane_->Report(down, away);
  EXPECT_TRUE(plane_->Agents()[x].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  EXPECT_EQ(healthy_events(), 0);
  // Lost on the outage's clock (from the silence's start); the job goes to the other node, and
  // nothing new goes to the lost one.
  while (!plane_->Agents()[x].lost) {
    now_ += 5;
    away.applied_version = Set(down).version;
    plane_->Report(down, away);
    ReportAll(alive, "running");
    plane_->Cycle();
    ASSERT_LE(now_, 1000 + 125);
  }
  plane_->Cycle();
  EXPECT_EQ(NodeOf(job), alive);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  EXPECT_EQ(healthy_events(), 0);
  // The engine back: healthy once.
  ReportNone(down, Set(down).version);
  EXPECT_FALSE(plane_->Nodes()[x].cordoned);
  EXPECT_EQ(healthy_events(), 1);
}

// A host back from a reboot without its engine: silent, registered again, then reporting the
// engine away. The node stays down through it all, on the clock of the silence's start.
TEST_F(ControlPlaneAgentTest, ANodeBackWithoutItsEngineStaysDown) {
  std::string down, alive;
  int x = 0;
  PlaceOnOneOfTwo(8, &down, &alive, &x);
  for (int i = 0; i < 20; ++i) {
    now_ += 1;
    ReportAll(alive, "running");
    plane_->Cycle();
  }
  ASSERT_TRUE(plane_->Agents()[x].unhealthy);
  Register(down);
  EXPECT_TRUE(plane_->Agents()[x].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  AgentReport away;
  away.applied_version = Set(down).version;
  away.runtime_error = "cannot reach the Docker engine";
  plane_->Report(down, away);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
    EXPECT_NE(e.state, "healthy");
  while (!plane_->Agents()[x].lost) {  // lost 120 s after the silence began, not the report
    now_ += 5;
    plane_->Report(down, away);
    ReportAll(alive, "running");
    plane_->Cycle();
    ASSERT_LE(now_, 1000 + 125);
  }
}

// A blip shorter than the unhealthy delay leaves no trace: no cordon, no event.
TEST_F(ControlPlaneAgentTest, AShortContainerEngineOutageIsForgotten) {
  Open(Dgx(1), 15, 120);
  Register("dgx-0");
  AgentReport away;
  away.runtime_error = "cannot reach the Docker engine";
  for (int round = 0; round < 3; ++round) {
    away.applied_version = Set("dgx-0").version;
    for (int i = 0; i < 10; ++i) {
      now_ += 1;
      plane_->Report("dgx-0", away);
      plane_->Cycle();
    }
    ReportNone("dgx-0", Set("dgx-0").version);  // back before 15 s, and the clock restarts
    plane_->Cycle();
    EXPECT_FALSE(plane_->Agents()[0].unhealthy);
    EXPECT_FALSE(plane_->Nodes()[0].cordoned);
  }
  for (const StoredEvent& e : plane_->EventsAfter(0, 100, Caller(), 0).events)
    EXPECT_EQ(e.state, "agent-registered");
}

TEST_F(ControlPlaneAgentTest, RegisteringAgainBringsAnUnhealthyNodeBack) {
  Open(Dgx(1), 15, 120);
  Register("dgx-0");
  now_ += 20;
  plane_->Cycle();
  ASSERT_TRUE(plane_->Agents()[0].unhealthy);
  ASSERT_TRUE(plane_->Nodes()[0].cordoned);
  // Registering says nothing of its engine: its first report brings it back.
  Register("dgx-0");
  EXPECT_TRUE(plane_->Agents()[0].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
  ReportNone("dgx-0", Set("dgx-0").version);
  EXPECT_FALSE(plane_->Agents()[0].unhealthy);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 1})");
  plane_->Cycle();
  EXPECT_EQ(State(id), "scheduled");
}

TEST_F(ControlPlaneAgentTest, AnOperatorsCordonIsNotLiftedByTheAgentComingBack) {
  Open(Dgx(2), 15, 120);
  Register("dgx-0");
  Register("dgx-1");
  // Cordoned by the operator, then silent.
  plane_->NodeAction("dgx-0", "cordon");
  now_ += 20;
  plane_->Cycle();
  ASSERT_TRUE(plane_->Agents()[0].unhealthy);
  ReportNone("dgx-0", Set("dgx-0").version);
  EXPECT_FALSE(plane_->Agents()[0].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
  // Silent, then cordoned by the operator while it is unhealthy.
  now_ += 20;
  plane_->Cycle();
  ASSERT_TRUE(plane_->Agents()[1].unhealthy);
  ASSERT_TRUE(plane_->Nodes()[1].cordoned);
  plane_->NodeAction("dgx-1", "cordon");
  ReportNone("dgx-1", Set("dgx-1").version);
  EXPECT_FALSE(plane_->Agents()[1].unhealthy);
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
  // Both cordons are the operator's, and survive a restart.
  Open(Dgx(2), 15, 120);
  EXPECT_TRUE(plane_->Nodes()[0].cordoned);
  EXPECT_TRUE(plane_->Nodes()[1].cordoned);
}

TEST_F(ControlPlaneAgentTest, TheUnhealthyCordonIsNotKeptAcrossARestart) {
  Open(Dgx(1), 15, 120);
  Register("dgx-0");
  now_ += 20;
  plane_->Cycle();
  ASSERT_TRUE(plane_->Nodes()[0].cordoned);
  Open(Dgx(1), 15, 120);
  EXPECT_FALSE(plane_->Nodes()[0].cordoned);
}

// The refusal of a second agent names the one that holds the node and its Docker engine: a
// refused agent on another engine (the node moved to another host while it was down) removes
// its own copies of the node's containers, which would run the jobs twice.
TEST_F(ControlPlaneAgentTest, ASecondAgentsRefusalNamesTheHoldersEngine) {
  Open(Dgx(1), 15, 120);
  NodeRegistration first;
  first.gpu_uuids = Uuids("dgx-0", 8);
  first.instance = "first";
  first.engine = "engine-a";
  plane_->RegisterAgent("dgx-0", first);
  NodeRegistration second = first;
  second.instance = "second";
  second.engine = "engine-b";
  try {
    plane_->RegisterAgent("dgx-0", second);
    ADD_FAILURE() << "a second agent got in while the first is in touch";
  } catch (const ApiError& e) {
    ASSERT_EQ(e.status, 409);
    EXPECT_EQ(e.detail.value("heldBy", nlohmann::json()),
              (nlohmann::json{
                  {"instance", "first"}, {"engine", "engine-a"}, {"replaceableAfterMs", 3000}}))
        << e.detail.dump();
    EXPECT_FALSE(e.detail.contains("keep")) << e.detail.dump();  // its containers: not ours to say
  }
}

// Two agents under one node name (one started twice by mistake, with its own Docker engine)
// would run the node's jobs twice: the second is refused while the first reports, and let in
// once the first has missed three reports (an agent restarted after a kill -9); the process it
// replaced is refused from then on.
TEST_F(ControlPlaneAgentTest, ASecondAgentUnderOneNodeNameIsRefusedWhileTheFirstReports) {
  Open(Dgx(1), 15, 120);
  Register("dgx-0", 8, "first");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ReportAll("dgx-0", "running");
  ASSERT_EQ(State(id), "running");
  std::string message;
  for (int i = 0; i < 10; ++i) {
    now_ += 1;
    ReportAll("dgx-0", "running");
    plane_->Cycle();
    EXPECT_EQ(Status([&] { Register("dgx-0", 8, "second"); }, &message), 409);
  }
  EXPECT_TRUE(Has(message, "started twice")) << message;
  // One without a name (an older agent) is another process too, and erases nothing.
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, ""); }, &message), 409);
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, "first"); }, &message), 200) << message;

  // The first goes silent: after three missed reports the second gets in.
  now_ += 2.5;
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, "second"); }, &message), 409);
  now_ += 0.5;
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, "second"); }, &message), 200) << message;
  AgentReport old;
  old.instance = "first";
  old.applied_version = Set("dgx-0").version;
  EXPECT_EQ(Status([&] { plane_->Report("dgx-0", old); }, &message), 409);
  EXPECT_TRUE(Has(message, "another agent")) << message;
  AgentReport adopted = old;
  adopted.instance = "second";
  adopted.containers = {Container(Of("dgx-0", id).at(0), "running")};
  EXPECT_EQ(Status([&] { plane_->Report("dgx-0", adopted); }, &message), 200) << message;
  EXPECT_EQ(State(id), "running");
  // An agent that says it reports every 5 s is waited for three times as long.
  Open(Dgx(1), 15, 120);
  // One that reports less often than twice in the unhealthy window is refused: between its
  // reports its node would turn unhealthy, then lost (review).
  NodeRegistration rare;
  rare.gpu_uuids = Uuids("dgx-0", 8);
  rare.instance = "rare";
  rare.report_every_ms = 8000;
  EXPECT_EQ(Status([&] { plane_->RegisterAgent("dgx-0", rare); }, &message), 400);
  EXPECT_TRUE(Has(message, "reportEveryMs: node dgx-0's agent reports every 8 s")) << message;
  EXPECT_TRUE(Has(message, "berth agent --heartbeat 7.5 or less")) << message;
  NodeRegistration slow;
  slow.gpu_uuids = Uuids("dgx-0", 8);
  slow.instance = "slow";
  slow.report_every_ms = 5000;
  plane_->RegisterAgent("dgx-0", slow);
  now_ += 14;
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, "other"); }, &message), 409);
  now_ += 1;
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, "other"); }, &message), 200) << message;
  // A node down for want of its container engine still has its agent in touch: a twin is
  // refused there too (review: two such agents pushed each other out twice a second).
  AgentReport away;
  away.instance = "other";
  away.runtime_error = "cannot reach the Docker engine";
  for (int i = 0; i < 20; ++i) {
    now_ += 1;
    away.applied_version = Set("dgx-0").version;
    plane_->Report("dgx-0", away);
    plane_->Cycle();
  }
  ASSERT_TRUE(plane_->Agents()[0].unhealthy);
  EXPECT_EQ(Status([&] { Register("dgx-0", 8, "twin"); }, &message), 409);
  // Registering again, without reports, does not keep a node healthy (review: it did).
  Open(Dgx(1), 15, 120);
  Register("dgx-0", 8, "lone");
  for (int i = 0; i < 8; ++i) {
    now_ += 2;
    Register("dgx-0", 8, "lone");
    plane_->Cycle();
  }
  EXPECT_TRUE(plane_->Agents()[0].unhealthy);
}

// A job stopped while its preemption waits out its grace period stays stopped, whatever
// becomes of its preemptor (found by the fleet test: a victim stopped, then its preemptor
// stopped, went back to running). A preemptor left waiting is placed once the victim's
// container is gone.
TEST_F(ControlPlaneAgentTest, AVictimStoppedDuringItsGracePeriodStaysStopped) {
  for (const bool preemptor_stopped : {true, false}) {
    SCOPED_TRACE(preemptor_stopped ? "preemptor stopped too" : "preemptor waiting");
    Assignment old;
    int64_t preemptor = 0;
    const int64_t victim = PreemptAWholeNodeJob(&old, &preemptor);
    ASSERT_EQ(State(victim), "preempted");
    // Named by the id users know (review: the engine's own id named another job).
    EXPECT_TRUE(Has(plane_->Get(victim).reason, "(job " + std::to_string(preemptor) + ")"))
        << plane_->Get(victim).reason;
    plane_->Stop(victim);
    if (preemptor_stopped) plane_->Stop(preemptor);
    AgentReport running;
    running.containers = {Container(old, "running")};
    for (int i = 0; i < 40; ++i) {  // past the grace period (30 s): the container ignores SIGTERM
      now_ += 1;
      running.applied_version = Set("dgx-0").version;
      plane_->Report("dgx-0", running);
      plane_->Cycle();
      ASSERT_EQ(State(victim), "stopped") << "cycle " << i;
      ASSERT_TRUE(Of("dgx-0", victim).empty()) << "cycle " << i;
      ASSERT_EQ(State(preemptor), preemptor_stopped ? "stopped" : "pending") << "cycle " << i;
    }
    AgentReport stopped;
    stopped.applied_version = Set("dgx-0").version;
    stopped.containers = {Container(old, "exited", 137)};
    plane_->Report("dgx-0", stopped);
    plane_->Cycle();
    EXPECT_EQ(State(victim), "stopped");
    EXPECT_EQ(State(preemptor), preemptor_stopped ? "stopped" : "scheduled");
  }
}

// A replaced agent process learns it from its watch too, and at once where it waits: the
// refusal names the new process and its engine, so that the old one stops its work (review: it
// followed its watch and kept starting containers, so a job could run on two engines).
TEST_F(ControlPlaneAgentTest, AReplacedAgentsWatchEndsWithWhoReplacedIt) {
  Open(Dgx(1), 15, 120);
  Register("dgx-0", 8, "first");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  ReportAll("dgx-0", "running");
  const uint64_t version = plane_->Assignments("dgx-0", 0, 0, "first").version;
  // The first agent's watch waits; another process registers once it has been silent 3 s.
  auto watch = std::async(std::launch::async, [&] {
    try {
      plane_->Assignments("dgx-0", version, 30, "first");
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(200, "the watch ended without a refusal");
  });
  now_ += 3;
  NodeRegistration second;
  second.gpu_uuids = Uuids("dgx-0", 8);
  second.instance = "second";
  second.engine = "engine-B";
  plane_->RegisterAgent("dgx-0", second);
  ASSERT_EQ(watch.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the replaced agent's watch goes on";
  const ApiError refused = watch.get();
  EXPECT_EQ(refused.status, 409) << refused.what();
  EXPECT_EQ(refused.detail["replacedBy"]["instance"], "second") << refused.detail.dump();
  EXPECT_EQ(refused.detail["replacedBy"]["engine"], "engine-B") << refused.detail.dump();
  // A new watch of the old process is refused at once; the new one's and an unnamed one's
  // (an older agent) are served.
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Assignments("dgx-0", 0, 0, "first"); }, &message), 409);
  EXPECT_TRUE(Has(message, "this one must stop")) << message;
  EXPECT_EQ(plane_->Assignments("dgx-0", 0, 0, "second").assignments.size(), 1u);
  EXPECT_EQ(plane_->Assignments("dgx-0", 0, 0).assignments.size(), 1u);
  EXPECT_EQ(State(id), "running");
  // How long an agent goes silent before it may be replaced, which the agent is told.
  EXPECT_DOUBLE_EQ(plane_->ReplaceableAfterS(second), 3);
  second.report_every_ms = 10000;
  EXPECT_DOUBLE_EQ(plane_->ReplaceableAfterS(second), 15);  // --node-unhealthy-after
}

// An agent that registers again just before its node would be lost is back: the report that
// follows its registration lifts the outage, and its jobs are not placed again (review: they
// were, and a healthy container was stopped and started anew).
TEST_F(ControlPlaneAgentTest, AnAgentThatRegistersBeforeTheLostDeadlineKeepsItsJobs) {
  std::string at, other;
  int x = 0;
  const int64_t id = PlaceOnOneOfTwo(8, &at, &other, &x);
  ReportAll(at, "running");
  now_ += 119;
  ReportAll(other, "running");
  plane_->Cycle();
  ASSERT_TRUE(plane_->Agents()[x].unhealthy);
  Register(at);
  now_ += 2;
  ReportAll(other, "running");
  plane_->Cycle();
  EXPECT_FALSE(plane_->Agents()[x].lost);
  ReportAll(at, "running");
  plane_->Cycle();
  EXPECT_FALSE(plane_->Agents()[x].unhealthy);
  EXPECT_EQ(State(id), "running");
  for (const std::string& state : States(id)) EXPECT_NE(state, "lost");
  // Registered, then silent again: lost once as long has passed since the registration.
  now_ += 121;
  plane_->Cycle();
  EXPECT_TRUE(plane_->Agents()[x].lost);
}

// --- Restart -----------------------------------------------------------------------------------

// With a cluster file, a node where jobs ran before a restart and whose agent never comes back
// turns unhealthy, then lost, and its jobs are placed again (review: they read `running` for
// ever, and new jobs were placed on it).
TEST_F(ControlPlaneAgentTest, AClusterFileNodeWhoseAgentNeverComesBackIsLostAfterARestart) {
  std::string at, other;
  int x = 0;
  const int64_t id = PlaceOnOneOfTwo(8, &at, &other, &x);
  ReportAll(at, "running");
  ASSERT_EQ(State(id), "running");
  Open(Dgx(2), 15, 120);
  Register(other);
  for (int i = 0; i < 26; ++i) {
    now_ += 5;
    ReportAll(other, "running");
    plane_->Cycle();
  }
  EXPECT_TRUE(plane_->Agents()[x].lost);
  EXPECT_TRUE(plane_->Nodes()[x].cordoned);
  std::vector<std::string> states = States(id);
  EXPECT_NE(std::find(states.begin(), states.end(), "lost"), states.end());
  EXPECT_FALSE(Of(other, id).empty());  // placed again on the node whose agent is back
  // The other node was never down.
  EXPECT_FALSE(plane_->Agents()[1 - x].unhealthy);
}

// With --expect-agents, a restart keeps the running jobs of a node whose agent comes back
// late, past the unhealthy timeout but before the lost one: they are neither lost nor placed
// twice, and the node takes jobs again.
TEST_F(ControlPlaneAgentTest, WithExpectAgentsARestartKeepsTheJobsOfAnAgentBackLate) {
  expect_agents_ = true;
  const auto [a, b] = RunOnePerNode(15, 120);
  const std::string late = NodeOf(b), early = NodeOf(a);
  ASSERT_NE(late, early);
  Open(Dgx(2), 15, 120);
  Register(early);
  for (int i = 0; i < 6; ++i) {  // 30 s: past unhealthy, well before lost
    now_ += 5;
    ReportAll(early, "running");
    plane_->Cycle();
  }
  const int x = late == "dgx-0" ? 0 : 1;
  EXPECT_TRUE(plane_->Agents()[x].unhealthy);
  EXPECT_FALSE(plane_->Agents()[x].lost);
  Register(late);
  ReportAll(late, "running");
  plane_->Cycle();
  EXPECT_FALSE(plane_->Agents()[x].unhealthy);
  EXPECT_FALSE(plane_->Nodes()[x].cordoned);
  for (const int64_t job : {a, b}) {
    EXPECT_EQ(State(job), "running") << job;
    EXPECT_EQ(States(job), (std::vector<std::string>{"pending", "scheduled", "running"})) << job;
  }
  EXPECT_EQ(Of(late, b).size(), 1u);
  EXPECT_TRUE(Of(early, b).empty());
  // The late node takes jobs again once its job ends.
  AgentReport r;
  r.applied_version = Set(late).version;
  r.containers = {Container(Of(late, b).at(0), "exited", 0)};
  plane_->Report(late, r);
  EXPECT_EQ(State(b), "succeeded");
  const int64_t c = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  EXPECT_EQ(NodeOf(c), late);
}

TEST_F(ControlPlaneAgentTest, ARestartAdoptsRunningJobsWithTheirPlacements) {
  const auto [a, b] = RunOnePerNode();
  std::map<std::string, AssignmentSet> before;
  for (const std::string node : {"dgx-0", "dgx-1"}) before[node] = Set(node);

  now_ += 30;
  Open(Dgx(2));  // the first is closed
  EXPECT_EQ(State(a), "running");
  EXPECT_EQ(State(b), "running");
  for (const std::string node : {"dgx-0", "dgx-1"}) {
    std::string message;
    // The agent must register with the new server before it reports.
    EXPECT_EQ(Status([&] { ReportNone(node, before[node].version); }, &message), 409) << node;
    Register(node);
    // Its watch with the old version returns at once, above it, with the same placements.
    const auto started = Clock::now();
    const AssignmentSet after = plane_->Assignments(node, before[node].version, 30);
    EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
    EXPECT_GT(after.version, before[node].version) << node;
    ASSERT_EQ(after.assignments.size(), before[node].assignments.size()) << node;
    for (size_t i = 0; i < after.assignments.size(); ++i) {
      EXPECT_EQ(after.assignments[i].job, before[node].assignments[i].job);
      EXPECT_EQ(after.assignments[i].placement, before[node].assignments[i].placement);
      EXPECT_EQ(after.assignments[i].gpus, before[node].assignments[i].gpus);
    }
    // A report of the old version without the containers (the agent restarted too, before
    // it saw the new set) loses nothing.
    ReportNone(node, before[node].version);
  }
  EXPECT_EQ(State(a), "running");
  EXPECT_EQ(State(b), "running");
  ReportAll("dgx-0", "running");
  ReportAll("dgx-1", "running");
  EXPECT_EQ(State(a), "running");
  EXPECT_EQ(States(a), (std::vector<std::string>{"pending", "scheduled", "running"}));
  // And the reports go on moving them.
  const Assignment x = Of(NodeOf(a), a).at(0);
  AgentReport r;
  r.applied_version = Set(NodeOf(a)).version;
  r.containers = {Container(x, "exited", 0)};
  plane_->Report(NodeOf(a), r);
  EXPECT_EQ(State(a), "succeeded");
}

// A victim still stopping at a restart holds its GPUs until its containers are gone, then waits
// again, and its preemptor starts.
TEST_F(ControlPlaneAgentTest, ARestartWhileAJobStopsQueuesItOnceItsContainersAreGone) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t victim = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1})");
  plane_->Cycle();
  ReportAll("dgx-0", "running");
  const int64_t preemptor = plane_->Submit(R"({"image": "x", "gpus": 8, "priority": 1000})");
  for (int i = 0; i < 3 && State(victim) != "preempted"; ++i) {
    now_ += 1;
    plane_->Cycle();
  }
  ASSERT_EQ(State(victim), "preempted");
  now_ += 1;
  Open(Dgx(1));
  EXPECT_EQ(State(victim), "preempted");
  Register("dgx-0");
  now_ += 1;
  plane_->Cycle();
  EXPECT_EQ(State(preemptor), "pending");
  EXPECT_EQ(plane_->Nodes()[0].free_gpus, 0);
  ReportNone("dgx-0", Set("dgx-0").version);
  now_ += 1;
  plane_->Cycle();
  EXPECT_EQ(State(victim), "pending");
  EXPECT_EQ(State(preemptor), "scheduled");
  EXPECT_EQ(Of("dgx-0", preemptor).size(), 1u);
  EXPECT_TRUE(Of("dgx-0", victim).empty());
}

// --- Logs --------------------------------------------------------------------------------------

TEST_F(ControlPlaneAgentTest, LogsOfTheJobsPlacementAreKept) {
  Open(Dgx(2));
  Register("dgx-0");
  Register("dgx-1");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const std::string node = NodeOf(id);
  ASSERT_FALSE(node.empty());
  const std::string other = node == "dgx-0" ? "dgx-1" : "dgx-0";
  const Assignment a = Of(node, id).at(0);
  const auto chunk = [&](const std::string& placement, const std::string& until,
                         const std::string& text, const StderrSpans& stderr_spans = {}) {
    AgentReport r;
    r.applied_version = Set(node).version;
    r.containers = {Container(a, "running")};
    // As an agent in step with the server sends it: read on from where the server's copy ends.
    const std::string from = logs_->Cursor(id, a.replica, placement);
    r.logs = {{id, a.replica, placement, from, until, text, stderr_spans}};
    return r;
  };
  plane_->Report(node, chunk(a.placement, "2026-12-02T03:40:46.1Z", "one\n"));
  plane_->Report(node, chunk(a.placement, "2026-12-02T03:40:46.1Z", "one\n"));  // resent
  plane_->Report(node, chunk("p-other", "2026-12-02T03:40:47Z", "wrong placement\n"));
  AgentReport elsewhere = chunk(a.placement, "2026-12-02T03:40:48Z", "wrong node\n");
  elsewhere.containers.clear();
  plane_->Report(other, elsewhere);
  plane_->Report(node, chunk(a.placement, "2026-12-02T03:40:46.25Z", "two\n", {{0, 4}}));
  ASSERT_EQ(State(id), "running");
  int64_t next = -1;
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\ntwo\n");
  EXPECT_EQ(next, 8);
  StderrSpans stderr_spans;
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next, &stderr_spans), "one\ntwo\n");
  EXPECT_EQ(stderr_spans, (StderrSpans{{4, 8}}));  // "two" went to stderr
  EXPECT_EQ(plane_->Logs(id, 4, 1 << 20, 0, &next), "two\n");
  // The assignment tells the agent where the server's copy ends (normalized).
  EXPECT_EQ(Of(node, id).at(0).log_since, "2026-12-02T03:40:46.250000000Z");
  // Nothing new: back after the wait, empty.
  const auto started = Clock::now();
  EXPECT_EQ(plane_->Logs(id, 8, 100, 0.2, &next), "");
  EXPECT_EQ(next, 8);
  EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(150));
  std::string message;
  EXPECT_EQ(Status([&] { plane_->Logs(999, 0, 10, 0, &next); }, &message), 404);

  // The last lines come with the end, and are kept before it is seen.
  AgentReport end = chunk(a.placement, "2026-12-02T03:40:49Z", "bye\n");
  end.containers = {Container(a, "exited", 0)};
  plane_->Report(node, end);
  EXPECT_EQ(State(id), "succeeded");
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\ntwo\nbye\n");
  // After the job ended, its last placement's lines are still taken (a stopped container's
  // last words come after the stop), and a resend of them is not.
  plane_->Report(node, chunk(a.placement, "2026-12-02T03:40:50Z", "late\n"));
  plane_->Report(node, chunk(a.placement, "2026-12-02T03:40:50Z", "late\n"));
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\ntwo\nbye\nlate\n");
  plane_->Report(node, chunk("another-placement", "2026-12-02T03:40:51Z", "stray\n"));
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\ntwo\nbye\nlate\n");
  // Removing the job removes its log.
  plane_->Remove(id);
  EXPECT_EQ(logs_->Read(id, 0, 100, &next), "");
  EXPECT_EQ(logs_->Cursor(id, a.replica, a.placement), "");
}

// A report the server took whose answer the agent never got (the server was killed as it
// answered, the connection broke): the agent reads on from its older cursor, so its next chunk
// repeats lines the server holds. The server takes none of it, says where its copy ends, and
// holds the job running though its container exited, until the rest comes from there.
// A replica whose output the server stored ran, though a restarted server has no report of it:
// an agent that finds its container gone (removed while server and agent were both down) is
// told not to run it again under the same placement (review: it ran twice). A replica with no
// output stored is not taken for run: it may never have started.
TEST_F(ControlPlaneAgentTest, AfterARestartAReplicaWithStoredOutputCountsAsRun) {
  const int64_t id = PlaceAGangOnTwoNodes();
  const Assignment a = Of("dgx-0", id).at(0), b = Of("dgx-1", id).at(0);
  AgentReport r;
  r.applied_version = Set("dgx-0").version;
  r.containers = {Container(a, "running", 0)};
  r.logs = {{id, a.replica, a.placement, "", "2026-12-02T03:40:46.1Z", "hello\n", {}}};
  plane_->Report("dgx-0", r);
  ASSERT_EQ(State(id), "running");
  EXPECT_TRUE(Of("dgx-0", id).at(0).ran);
  EXPECT_FALSE(Of("dgx-1", id).at(0).ran);  // still pulling its image, say

  Open(Dgx(2));  // the server restarts
  Register("dgx-0");
  Register("dgx-1");
  EXPECT_TRUE(Of("dgx-0", id).at(0).ran);
  EXPECT_EQ(Of("dgx-0", id).at(0).placement, a.placement);
  EXPECT_FALSE(Of("dgx-1", id).at(0).ran);
  EXPECT_EQ(Of("dgx-1", id).at(0).placement, b.placement);
}

TEST_F(ControlPlaneAgentTest, AChunkOverlappingTheServersCopyIsRefusedAndTheJobWaitsForTheRest) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const Assignment a = Of("dgx-0", id).at(0);
  const auto chunk = [&](const std::string& from, const std::string& until, const std::string& text,
                         const std::string& state) {
    AgentReport r;
    r.applied_version = Set("dgx-0").version;
    r.containers = {Container(a, state, 0)};
    r.logs = {{id, a.replica, a.placement, from, until, text, {}}};
    return r;
  };
  const std::string t1 = "2026-12-02T03:40:46.100000000Z", t2 = "2026-12-02T03:40:47.000000000Z";
  EXPECT_TRUE(plane_->Report("dgx-0", chunk("", t1, "one\n", "running")).log_cursors.empty());
  // The agent missed that answer: it sends from the start again, now with the end.
  const ReportReply reply = plane_->Report("dgx-0", chunk("", t2, "one\ntwo\n", "exited"));
  ASSERT_EQ(reply.log_cursors.size(), 1u);
  EXPECT_EQ(reply.log_cursors[0].job, id);
  EXPECT_EQ(reply.log_cursors[0].placement, a.placement);
  EXPECT_EQ(reply.log_cursors[0].cursor, t1);
  int64_t next = -1;
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\n");
  EXPECT_EQ(State(id), "running");  // not ended without its last line
  // From where the server's copy ends: taken, and the job ends with all of it.
  EXPECT_TRUE(plane_->Report("dgx-0", chunk(t1, t2, "two\n", "exited")).log_cursors.empty());
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\ntwo\n");
  EXPECT_EQ(State(id), "succeeded");
  // An agent older than `from` sends none: its chunk goes on from the server's copy, as it did.
  AgentReport older = chunk("", "2026-12-02T03:40:48Z", "three\n", "exited");
  older.logs[0].from.reset();
  EXPECT_TRUE(plane_->Report("dgx-0", older).log_cursors.empty());
  EXPECT_EQ(plane_->Logs(id, 0, 1 << 20, 0, &next), "one\ntwo\nthree\n");
}

// A job's log past its bound: the server keeps no more, and says so, so that the agent reads
// and sends no more of it (it shipped a job's whole output, however large, while the job held
// its GPUs).
TEST_F(ControlPlaneAgentTest, TheAgentIsToldWhenAJobsLogIsFull) {
  Open(Dgx(1));
  Register("dgx-0");
  const int64_t id = plane_->Submit(R"({"image": "x", "gpus": 8})");
  plane_->Cycle();
  const Assignment a = Of("dgx-0", id).at(0);
  AgentReport r;
  r.applied_version = Set("dgx-0").version;
  r.containers = {Container(a, "running")};
  r.logs = {{id, a.replica, a.placement, "", "2026-12-02T03:40:46.1Z", "small\n", {}}};
  EXPECT_TRUE(plane_->Report("dgx-0", r).logs_full.empty());
  r.logs = {{id,
             a.replica,
             a.placement,
             "2026-12-02T03:40:46.100000000Z",
             "2026-12-02T03:40:47Z",
             std::string(LogStore::kMaxJobLogBytes, 'x'),
             {}}};
  const ReportReply reply = plane_->Report("dgx-0", r);
  ASSERT_EQ(reply.logs_full.size(), 1u);
  EXPECT_EQ(reply.logs_full[0].job, id);
  EXPECT_EQ(reply.logs_full[0].placement, a.placement);
  EXPECT_TRUE(reply.log_cursors.empty());
  // Any chunk after it is answered the same way, and the job ends when its container does.
  r.containers = {Container(a, "exited", 0)};
  r.logs = {{id, a.replica, a.placement, "", "2026-12-02T03:40:48Z", "more\n", {}}};
  EXPECT_EQ(plane_->Report("dgx-0", r).logs_full.size(), 1u);
  EXPECT_EQ(State(id), "succeeded");
}

// A container its engine stopped unasked by the agent (the engine's shutdown) says nothing of
// the job: the job is placed again rather than failed with the code of the engine's signal.
TEST_F(ControlPlaneAgentTest, AContainerStoppedByItsEngineGetsItsJobPlacedAgain) {
  Assignment a;
  const int64_t id = RunWholeNodeJob(&a);
  AgentReport r;
  r.applied_version = Set("dgx-0").version;
  r.containers = {Container(a, "interrupted", 143)};
  plane_->Report("dgx-0", r);
  const std::vector<std::string> states = States(id);
  ASSERT_GE(states.size(), 2u);
  EXPECT_EQ(states[states.size() - 2], "lost");
  EXPECT_EQ(states.back(), "pending");
  EXPECT_TRUE(Has(plane_->Events(id).events[states.size() - 2].reason,
                  "was stopped by the node's container engine, not by berth"));
  EXPECT_TRUE(Of("dgx-0", id).empty());
  // After a back-off: placed at once, it went back to the engine still stopping (review).
  plane_->Cycle();
  EXPECT_EQ(State(id), "pending");
  now_ += 400;
  plane_->Cycle();
  EXPECT_EQ(State(id), "scheduled");
  EXPECT_EQ(Of("dgx-0", id).size(), 1u);
}

}  // namespace
}  // namespace berth
