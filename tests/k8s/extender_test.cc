// The extender's verbs against real-shaped payloads: what kube-scheduler sends and what it
// accepts back (reference-specs 1.1-1.5), gangs, preemption, recovery and hostile input.
#include "k8s/extender.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "k8s/gpu_ids_signature.h"
#include "k8s_test_util.h"

namespace berth {
namespace {

using namespace k8s_test;

class ExtenderTest : public ::testing::Test {
 protected:
  void MakeExtender(std::vector<QueueSpec> queues = {}, std::string signing_key = "") {
    ExtenderOptions options;
    BuiltinPolicy("berth", &options.policy);
    options.queues = std::move(queues);
    options.signing_key = std::move(signing_key);
    options.clock = [this] { return now; };
    extender = std::make_unique<Extender>(std::move(options), &actions);
  }
  void SetUp() override {
    MakeExtender();
    for (int i = 0; i < 4; ++i) {
      node_names.push_back("gpu-" + std::to_string(i));
      nodes.push_back(GpuNode(node_names.back(), 8));
    }
    extender->SetNodes(nodes);
    extender->Resync();
  }
  // Filters `pod` over every node; the node it passes, or "" with the failure reason.
  std::string FilterOne(const json& pod, std::string* why = nullptr) {
    extender->PodChanged(pod);  // as berth's watch shows a new pod before kube-scheduler asks
    const json result = json::parse(extender->Filter(NodeNamesArgs(pod, node_names)));
    EXPECT_EQ(result["Error"], "") << result.dump();
    const json& passed = result["NodeNames"];
    EXPECT_LE(passed.size(), 1u);
    for (const json& name : passed)
      EXPECT_NE(std::find(node_names.begin(), node_names.end(), name), node_names.end());
    if (why != nullptr) {
      for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"})
        for (const auto& [node, reason] : result[map].items()) *why = reason;
    }
    return passed.empty() ? "" : passed[0].get<std::string>();
  }
  // Filter, bind, and the API server's view of the pod afterwards.
  json Schedule(const json& pod) {
    const std::string node = FilterOne(pod);
    EXPECT_FALSE(node.empty());
    const json bind = extender->Bind({{"PodName", pod["metadata"]["name"]},
                                      {"PodNamespace", pod["metadata"]["namespace"]},
                                      {"PodUID", Uid(pod)},
                                      {"Node", node}});
    EXPECT_EQ(bind["Error"], "") << bind.dump();
    const json bound = Bound(pod, actions.bindings.back());
    extender->PodChanged(bound);
    return bound;
  }

  double now = 1000;
  RecordingActions actions;
  std::unique_ptr<Extender> extender;
  std::vector<json> nodes;
  std::vector<std::string> node_names;
};

TEST(PodJobTest, ReadsResourcesAnnotationsAndGangs) {
  json pod = GpuPod("w-0", 2,
                    {{"berth.io/queue", "research"},
                     {"berth.io/priority", "7"},
                     {"berth.io/gang", "job-a"},
                     {"berth.io/gang-size", "4"},
                     {"berth.io/affinity", "switch"}});
  pod["spec"]["initContainers"] = {
      {{"name", "init"}, {"resources", {{"requests", {{"cpu", "16"}, {"memory", "1Gi"}}}}}}};
  Pod read;
  std::string why;
  ASSERT_TRUE(ReadPod(pod, &read, &why)) << why;
  EXPECT_TRUE(read.wants_gpus);
  EXPECT_EQ(read.spec.queue, "research");
  EXPECT_EQ(read.spec.priority, 7);
  EXPECT_EQ(read.spec.user, "ml");
  EXPECT_EQ(read.gang, "ml/job-a");
  EXPECT_EQ(read.gang_size, 4);
  const Demand& demand = read.spec.groups[0].demand;
  EXPECT_EQ(demand.gpus, 2);
  EXPECT_EQ(demand.cpu_milli, 16000);  // the init container needs more than the containers
  EXPECT_EQ(demand.memory_mib, 16384);
  ASSERT_TRUE(demand.affinity.has_value());
  EXPECT_EQ(*demand.affinity, Level::kSwitch);
}

TEST(PodJobTest, SharesMigAndPodGroups) {
  Pod read;
  std::string why;
  ASSERT_TRUE(ReadPod(GpuPod("s", 0, {{"berth.io/gpu-share", "250"}}), &read, &why)) << why;
  EXPECT_EQ(read.spec.groups[0].demand.gpu_milli, 250);
  json mig = GpuPod("m", 0);
  mig["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/mig-3g.40gb", 1}};
  mig["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  ASSERT_TRUE(ReadPod(mig, &read, &why)) << why;
  EXPECT_EQ(read.spec.groups[0].demand.mig_profile, "3g.40gb");
  EXPECT_EQ(read.gang, "ml/pg");
  EXPECT_EQ(read.gang_size, 0);  // the PodGroup's minMember says
  ASSERT_TRUE(ReadPod(GpuPod("cpu", 0), &read, &why));
  EXPECT_FALSE(read.wants_gpus);
}

// A share pod asks berth's device plugin for one seat (berth.io/gpu-share: 1) beside the
// annotation that says how much of the GPU it uses.
TEST(PodJobTest, ASharePodAsksForOneSeat) {
  const auto share_pod = [](const std::string& seats, const std::string& milli, int gpus = 0) {
    json pod =
        GpuPod("s", gpus,
               milli.empty() ? std::map<std::string, std::string>{}
                             : std::map<std::string, std::string>{{"berth.io/gpu-share", milli}});
    pod["spec"]["containers"][0]["resources"]["limits"]["berth.io/gpu-share"] = seats;
    return pod;
  };
  Pod read;
  std::string why;
  ASSERT_TRUE(ReadPod(share_pod("1", "300"), &read, &why)) << why;
  EXPECT_TRUE(read.wants_gpus);
  EXPECT_EQ(read.spec.groups[0].demand.gpu_milli, 300);
  EXPECT_FALSE(ReadPod(share_pod("1", ""), &read, &why));  // how much of the GPU?
  EXPECT_NE(why.find("annotation berth.io/gpu-share"), std::string::npos) << why;
  EXPECT_FALSE(ReadPod(share_pod("2", "300"), &read, &why));
  EXPECT_NE(why.find("ask for 1"), std::string::npos) << why;
  EXPECT_FALSE(ReadPod(share_pod("1", "300", 1), &read, &why));
  EXPECT_NE(why.find("not both"), std::string::npos) << why;
}

TEST(PodJobTest, RefusalsNameTheField) {
  Pod read;
  std::string why;
  json pod = GpuPod("p", 1);
  pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots";
  EXPECT_FALSE(ReadPod(pod, &read, &why));
  EXPECT_NE(why.find("Pod.spec.containers[0].resources.requests.cpu"), std::string::npos) << why;
  EXPECT_FALSE(ReadPod(GpuPod("p", 1, {{"berth.io/gpu-share", "1001"}}), &read, &why));
  EXPECT_NE(why.find("berth.io/gpu-share"), std::string::npos) << why;
  EXPECT_FALSE(ReadPod(GpuPod("p", 1, {{"berth.io/gang", "g"}}), &read, &why));
  EXPECT_NE(why.find("berth.io/gang-size"), std::string::npos) << why;
  // A share with nvidia.com/gpu: 1 (the device slot) is a share; with 2 it is ambiguous.
  ASSERT_TRUE(ReadPod(GpuPod("p", 1, {{"berth.io/gpu-share", "500"}}), &read, &why)) << why;
  EXPECT_EQ(read.spec.groups[0].demand.gpu_milli, 500);
  EXPECT_FALSE(ReadPod(GpuPod("p", 2, {{"berth.io/gpu-share", "500"}}), &read, &why));
  EXPECT_NE(why.find("not several"), std::string::npos) << why;
  pod = GpuPod("p", 1);
  pod["metadata"].erase("uid");
  EXPECT_FALSE(ReadPod(pod, &read, &why));
  EXPECT_NE(why.find("metadata.uid"), std::string::npos) << why;
  for (const char* bad : {"1e999", "nan", "0x10", "-1", "5Qi", ""}) {
    int64_t value = 0;
    EXPECT_FALSE(ParseQuantity(bad, 1, &value)) << bad;
  }
  int64_t value = 0;
  ASSERT_TRUE(ParseQuantity("1500m", 1000, &value));
  EXPECT_EQ(value, 1500);
  ASSERT_TRUE(ParseQuantityMib("1Gi", &value));
  EXPECT_EQ(value, 1024);
}

TEST(NodeShapeTest, LabelsGiveTheShapeAndACordonFollows) {
  std::vector<GpuModel> models;
  K8sNode node;
  std::string why;
  json object = GpuNode("n1", 4, "NVIDIA-H100-80GB-HBM3", "r1");
  object["spec"]["unschedulable"] = true;
  object["metadata"]["annotations"] = {{"berth.io/gpu-uuids", "GPU-a,GPU-b,GPU-c,GPU-d"}};
  object["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed";
  object["status"]["allocatable"]["nvidia.com/gpu"] = "1";  // mixed: 1 whole GPU, 3 in MIG mode
  ASSERT_TRUE(ReadK8sNode(object, nullptr, &models, &node, &why)) << why;
  EXPECT_EQ(node.node.gpus.size(), 4u);
  EXPECT_EQ(node.node.rack, "r1");
  EXPECT_EQ(node.node.cpu_milli, 128000);
  EXPECT_TRUE(node.unschedulable);
  EXPECT_EQ(node.gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b", "GPU-c", "GPU-d"}));
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].name, "H100-80GB-HBM3");
  EXPECT_EQ(models[0].memory_mib, 81920);
  EXPECT_FALSE(node.node.gpus[0].mig_enabled);
  EXPECT_TRUE(node.node.gpus[3].mig_enabled);
  // A UUID list that does not name every GPU is not used: ids by index instead.
  object["metadata"]["annotations"]["berth.io/gpu-uuids"] = "GPU-a,GPU-b";
  ASSERT_TRUE(ReadK8sNode(object, nullptr, &models, &node, &why)) << why;
  EXPECT_TRUE(node.gpu_uuids.empty());
  object["status"]["allocatable"]["nvidia.com/gpu"] = "100000";
  EXPECT_FALSE(ReadK8sNode(object, nullptr, &models, &node, &why));
  EXPECT_NE(why.find("nvidia.com/gpu"), std::string::npos) << why;
}

TEST_F(ExtenderTest, FilterAnswersOneOfferedNodeAndBindWritesTheGpus) {
  const json pod = GpuPod("train", 2);
  const std::string node = FilterOne(pod);
  ASSERT_FALSE(node.empty());
  // Prioritize agrees, and only names the request's nodes.
  const json scores = json::parse(extender->Prioritize(NodeNamesArgs(pod, node_names)));
  ASSERT_EQ(scores.size(), node_names.size());
  for (const json& score : scores) EXPECT_EQ(score["Score"], score["Host"] == node ? 10 : 0);
  // A bind to another node is refused; to berth's node it writes the GPUs.
  const std::string other = node == "gpu-0" ? "gpu-1" : "gpu-0";
  const json refused = extender->Bind(
      {{"PodName", "train"}, {"PodNamespace", "ml"}, {"PodUID", Uid(pod)}, {"Node", other}});
  EXPECT_NE(refused["Error"].get<std::string>().find("berth placed pod"), std::string::npos);
  EXPECT_TRUE(actions.bindings.empty());
  const json bound = Schedule(pod);
  ASSERT_EQ(actions.bindings.size(), 1u);
  const auto& binding = actions.bindings[0];
  EXPECT_EQ(binding.node, node);
  EXPECT_EQ(std::count(binding.annotations.at("berth.io/gpu-ids").begin(),
                       binding.annotations.at("berth.io/gpu-ids").end(), ','),
            1);
  // The default queue has no guarantee: its pods borrow, and a reclaim may take them back.
  EXPECT_EQ(binding.annotations.at("berth.io/borrowed"), "true");
  EXPECT_NE(binding.annotations.at("berth.io/placement").find("\"node\":\"" + node + "\""),
            std::string::npos);
  EXPECT_EQ(extender->status().bound, 1);
}

// With a signing key, the binding carries a signature of the pod's UID, node and GPU ids that
// berth's device plugins check; without one, none.
TEST_F(ExtenderTest, BindSignsTheGpuIdsWithTheKey) {
  Schedule(GpuPod("unsigned", 1));
  EXPECT_EQ(actions.bindings.back().annotations.count("berth.io/gpu-ids-signature"), 0u);
  const std::string key = "a-key-of-enough-bytes";
  MakeExtender({}, key);
  extender->SetNodes(nodes);
  extender->Resync();
  const json pod = GpuPod("signed", 2);
  Schedule(pod);
  const auto& binding = actions.bindings.back();
  EXPECT_TRUE(GpuIdsSigned(key, Uid(pod), binding.node, binding.annotations.at("berth.io/gpu-ids"),
                           binding.annotations.at("berth.io/gpu-ids-signature")));
}

TEST_F(ExtenderTest, ANodeKubeSchedulerRefusesIsReplacedByAnOfferedOne) {
  const json pod = GpuPod("p", 8);
  const std::string chosen = FilterOne(pod);
  ASSERT_FALSE(chosen.empty());
  std::vector<std::string> others;
  for (const std::string& n : node_names)
    if (n != chosen) others.push_back(n);
  const json result = json::parse(extender->Filter(NodeNamesArgs(pod, others)));
  // The GPUs berth held on the node kube-scheduler did not offer went back, and the pod was
  // placed on one of the offered nodes instead: the answer names it.
  ASSERT_EQ(result["NodeNames"].size(), 1u) << result.dump();
  const std::string placed = result["NodeNames"][0];
  EXPECT_NE(placed, chosen);
  EXPECT_EQ(extender->PlacementOf(Uid(pod)).first, placed);
  EXPECT_EQ(extender->CheckConsistency(), "");
  // Offered nothing that holds it: it fails, and holds nothing.
  for (int i = 0; i < 3; ++i) FilterOne(GpuPod("fill-" + std::to_string(i), 8));
  const json full = GpuPod("q", 8);
  extender->PodChanged(full);
  const json none = json::parse(extender->Filter(NodeNamesArgs(full, {placed})));
  EXPECT_TRUE(none["NodeNames"].empty());
  EXPECT_EQ(extender->PlacementOf(Uid(full)).first, "");
}

TEST_F(ExtenderTest, NodesModeAnswersNodeObjects) {
  json args = {{"Pod", GpuPod("p", 1)}, {"Nodes", {{"items", nodes}}}, {"NodeNames", nullptr}};
  extender->PodChanged(args["Pod"]);
  const json result = json::parse(extender->Filter(args));
  EXPECT_TRUE(result["NodeNames"].is_null());
  ASSERT_EQ(result["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(result["Nodes"]["items"][0]["metadata"]["labels"]["nvidia.com/gpu.count"], "8");
  EXPECT_EQ(result["FailedNodes"].size(), 3u);
}

TEST_F(ExtenderTest, GangMembersWaitThenLandTogether) {
  std::vector<json> members;
  for (int i = 0; i < 3; ++i)
    members.push_back(GpuPod("g-" + std::to_string(i), 8,
                             {{"berth.io/gang", "big"}, {"berth.io/gang-size", "3"}}));
  std::string why;
  EXPECT_EQ(FilterOne(members[0], &why), "");
  EXPECT_NE(why.find("waiting for gang ml/big: 1 of 3"), std::string::npos) << why;
  EXPECT_EQ(FilterOne(members[1], &why), "");
  std::set<std::string> used;
  // The last member places the whole gang; every member then gets its own node.
  for (int i = 2; i >= 0; --i) used.insert(FilterOne(members[i]));
  EXPECT_EQ(used.size(), 3u);
  EXPECT_EQ(used.count(""), 0u);
  // A fourth gang of 8 fits the one node left; a fifth does not.
  EXPECT_FALSE(FilterOne(GpuPod("x", 8)).empty());
  EXPECT_EQ(FilterOne(GpuPod("y", 8), &why), "");
  EXPECT_FALSE(why.empty());
}

TEST_F(ExtenderTest, DeletingAPendingGangMemberTakesTheGangApart) {
  std::vector<json> members;
  for (int i = 0; i < 2; ++i)
    members.push_back(GpuPod("g-" + std::to_string(i), 8,
                             {{"berth.io/gang", "pair"}, {"berth.io/gang-size", "2"}}));
  // Fill the cluster so that the gang stays pending once formed.
  std::vector<json> fillers;
  for (int i = 0; i < 4; ++i) fillers.push_back(Schedule(GpuPod("f-" + std::to_string(i), 8)));
  EXPECT_EQ(FilterOne(members[0]), "");
  EXPECT_EQ(FilterOne(members[1]), "");
  extender->PodDeleted(members[1]);
  extender->PodDeleted(fillers[0]);
  extender->PodDeleted(fillers[1]);
  std::string why;
  EXPECT_EQ(FilterOne(members[0], &why), "");
  EXPECT_NE(why.find("1 of 2"), std::string::npos) << why;
  const json replacement =
      GpuPod("g-1b", 8, {{"berth.io/gang", "pair"}, {"berth.io/gang-size", "2"}});
  EXPECT_FALSE(FilterOne(replacement).empty());
  EXPECT_FALSE(FilterOne(members[0]).empty());
  EXPECT_EQ(extender->CheckConsistency(), "");
}

TEST_F(ExtenderTest, ReclaimDeletesBorrowersAndNominatesTheNode) {
  MakeExtender({{"a", 1, -1, {}}, {"b", 1, -1, {}}});
  extender->SetNodes(nodes);
  // Queue a borrows all 32 GPUs while b is idle.
  std::vector<json> borrowed;
  for (int i = 0; i < 4; ++i)
    borrowed.push_back(Schedule(GpuPod("a-" + std::to_string(i), 8, {{"berth.io/queue", "a"}})));
  // b's fair share is half: its pod reclaims one node, and only one.
  const json reclaim = GpuPod("b-0", 8, {{"berth.io/queue", "b"}});
  std::string why;
  // kube-scheduler retries an unschedulable pod after a back-off of a second or more.
  for (int retry = 0; retry < 5 && actions.deleted.empty(); ++retry) {
    EXPECT_EQ(FilterOne(reclaim, &why), "");
    now += 1;
  }
  ASSERT_EQ(actions.deleted.size(), 1u) << why;
  const json preempt =
      extender->Preempt({{"Pod", reclaim}, {"NodeNameToMetaVictims", json::object()}});
  const json& victims = preempt["NodeNameToMetaVictims"];
  ASSERT_EQ(victims.size(), 1u) << preempt.dump();
  const std::string node = victims.begin().key();
  ASSERT_EQ(victims[node]["Pods"].size(), 1u);
  EXPECT_EQ(victims[node]["NumPDBViolations"], 0);
  const std::string victim_uid = victims[node]["Pods"][0]["UID"];
  // Until the victim is gone nothing takes its GPUs, not even a pod of a.
  EXPECT_EQ(FilterOne(reclaim), "");
  EXPECT_EQ(FilterOne(GpuPod("a-late", 8, {{"berth.io/queue", "a"}})), "");
  for (const json& pod : borrowed)
    if (Uid(pod) == victim_uid) extender->PodDeleted(pod);
  EXPECT_EQ(FilterOne(reclaim), node);
  // Cycles later nothing else is preempted: the shares settled at 16/16.
  for (int i = 0; i < 20; ++i) {
    now += 1;
    FilterOne(GpuPod("a-more-" + std::to_string(i), 8, {{"berth.io/queue", "a"}}));
  }
  EXPECT_EQ(actions.deleted.size(), 1u);
  EXPECT_EQ(extender->CheckConsistency(), "");
}

TEST_F(ExtenderTest, ARestartedExtenderAdoptsWhatItBound) {
  std::vector<json> bound;
  for (int i = 0; i < 3; ++i) bound.push_back(Schedule(GpuPod("p-" + std::to_string(i), 3)));
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> before;
  for (const json& pod : bound) before[Uid(pod)] = extender->PlacementOf(Uid(pod));
  // A new extender lists nodes and pods, as after kill -9.
  RecordingActions fresh_actions;
  ExtenderOptions options;
  BuiltinPolicy("berth", &options.policy);
  options.clock = [this] { return now; };
  Extender fresh(std::move(options), &fresh_actions);
  fresh.SetNodes(nodes);
  for (const json& pod : bound) fresh.PodChanged(pod);
  fresh.Resync();
  for (const json& pod : bound) EXPECT_EQ(fresh.PlacementOf(Uid(pod)), before[Uid(pod)]);
  EXPECT_EQ(fresh.status().bound, 3);
  EXPECT_EQ(fresh.CheckConsistency(), "");
  // New pods go around what it adopted: 9 GPUs are held, 23 free, so 23 one-GPU pods fit.
  std::set<std::pair<std::string, std::string>> gpus;
  for (const auto& [uid, placement] : before)
    for (const std::string& id : placement.second) gpus.insert({placement.first, id});
  int placed = 0;
  for (int i = 0; i < 24; ++i) {
    const json pod = GpuPod("n-" + std::to_string(i), 1);
    fresh.PodChanged(pod);
    const json result = json::parse(fresh.Filter(NodeNamesArgs(pod, node_names)));
    if (result["NodeNames"].empty()) continue;
    ++placed;
    const auto placement = fresh.PlacementOf(Uid(pod));
    EXPECT_TRUE(gpus.insert({placement.first, placement.second.at(0)}).second)
        << "GPU handed out twice: " << placement.first << "/" << placement.second.at(0);
  }
  EXPECT_EQ(placed, 23);
}

TEST_F(ExtenderTest, APodOnlyInTheRequestIsNotPlaced) {
  const json ghost = GpuPod("ghost", 8);
  const json result = json::parse(extender->Filter(NodeNamesArgs(ghost, node_names)));
  EXPECT_TRUE(result["NodeNames"].empty());
  EXPECT_EQ(extender->status().pods, 0);
  EXPECT_EQ(extender->PlacementOf(Uid(ghost)).first, "");
}

TEST_F(ExtenderTest, GangMembersThatAskForDifferentThingsAreRefused) {
  const json a = GpuPod("m-0", 8, {{"berth.io/gang", "odd"}, {"berth.io/gang-size", "2"}});
  const json b = GpuPod("m-1", 4, {{"berth.io/gang", "odd"}, {"berth.io/gang-size", "2"}});
  FilterOne(a);
  std::string why;
  EXPECT_EQ(FilterOne(b, &why), "");
  EXPECT_NE(why.find("every member of a gang must ask for the same"), std::string::npos) << why;
  // A third member past the gang's size waits, and says why.
  const json c = GpuPod("m-2", 8, {{"berth.io/gang", "odd"}, {"berth.io/gang-size", "2"}});
  EXPECT_EQ(FilterOne(c, &why), "");
  EXPECT_NE(why.find("has its 2 members already"), std::string::npos) << why;
}

// A fresh extender fed what the API server holds, as after kill -9.
std::unique_ptr<Extender> Restarted(RecordingActions* actions, double* now) {
  ExtenderOptions options;
  BuiltinPolicy("berth", &options.policy);
  options.clock = [now] { return *now; };
  return std::make_unique<Extender>(std::move(options), actions);
}

TEST_F(ExtenderTest, ABoundPodOnANodeUnreadableAtRestartIsAdoptedOnceItIsRead) {
  const json bound = Schedule(GpuPod("run", 8));
  const std::string node = bound["spec"]["nodeName"];
  RecordingActions fresh_actions;
  auto fresh = Restarted(&fresh_actions, &now);
  std::vector<json> broken = nodes;
  for (json& n : broken)
    if (n["metadata"]["name"] == node) n["status"]["allocatable"]["nvidia.com/gpu"] = "junk";
  fresh->SetNodes(broken);
  fresh->PodChanged(bound);
  fresh->Resync();
  EXPECT_EQ(fresh->status().unreadable_nodes, 1);
  EXPECT_EQ(fresh->PlacementOf(Uid(bound)).first, "");
  fresh->NodeChanged(GpuNode(node, 8));  // readable again
  EXPECT_EQ(fresh->PlacementOf(Uid(bound)).first, node);
  // The node is full: a second 8-GPU pod offered only that node is not placed there.
  const json second = GpuPod("second", 8);
  fresh->PodChanged(second);
  const json result = json::parse(fresh->Filter(NodeNamesArgs(second, {node})));
  EXPECT_TRUE(result["NodeNames"].empty()) << result.dump();
  EXPECT_EQ(fresh->CheckConsistency(), "");
}

TEST_F(ExtenderTest, AGangHalfBoundAtRestartPlacesOnlyTheRest) {
  const std::map<std::string, std::string> gang = {{"berth.io/gang", "g"},
                                                   {"berth.io/gang-size", "2"}};
  const json m1 = GpuPod("m1", 4, gang), m2 = GpuPod("m2", 4, gang);
  FilterOne(m1);
  FilterOne(m2);
  const json bound = Schedule(m1);  // m2 is not bound when berth is killed
  RecordingActions fresh_actions;
  auto fresh = Restarted(&fresh_actions, &now);
  fresh->SetNodes(nodes);
  fresh->PodChanged(bound);
  fresh->PodChanged(m2);
  fresh->Resync();
  const json placed = json::parse(fresh->Filter(NodeNamesArgs(m2, node_names)));
  ASSERT_EQ(placed["NodeNames"].size(), 1u) << placed.dump();
  // 8 of 32 GPUs held: three 8-GPU pods still fit, as in a gang placed once.
  int fits = 0;
  for (int i = 0; i < 4; ++i) {
    const json big = GpuPod("big-" + std::to_string(i), 8);
    fresh->PodChanged(big);
    fits += !json::parse(fresh->Filter(NodeNamesArgs(big, node_names)))["NodeNames"].empty();
  }
  EXPECT_GE(fits, 2);
  EXPECT_LE(fits, 3);
  const auto status = fresh->status();
  EXPECT_EQ(status.placed, 2 + fits);
  EXPECT_EQ(fresh->CheckConsistency(), "");
}

TEST_F(ExtenderTest, ADeletedPodFreesItsGpusEvenWhenItsLastVersionIsUnreadable) {
  json pod = Schedule(GpuPod("a1", 8));
  pod["metadata"]["annotations"]["berth.io/priority"] = "oops";
  extender->PodChanged(pod);
  EXPECT_EQ(extender->status().unreadable_pods, 1);
  EXPECT_FALSE(extender->PlacementOf(Uid(pod)).first.empty());  // still held while it runs
  extender->PodDeleted(pod);
  EXPECT_EQ(extender->status().unreadable_pods, 0);
  EXPECT_EQ(extender->status().placed, 0);
}

TEST_F(ExtenderTest, GpuPodsBoundByAnotherSchedulerHoldTheirGpus) {
  RecordingActions fresh_actions;
  auto fresh = Restarted(&fresh_actions, &now);
  fresh->SetNodes(nodes);
  for (const std::string& node : node_names) {
    json foreign = GpuPod("other-" + node, 8);
    foreign["spec"]["nodeName"] = node;
    foreign["status"]["phase"] = "Running";
    fresh->PodChanged(foreign);
  }
  fresh->Resync();
  const json mine = GpuPod("mine", 1);
  fresh->PodChanged(mine);
  const json result = json::parse(fresh->Filter(NodeNamesArgs(mine, node_names)));
  EXPECT_TRUE(result["NodeNames"].empty()) << result.dump();
  EXPECT_TRUE(fresh_actions.deleted.empty());  // never preempted: berth does not own them
}

TEST_F(ExtenderTest, BindChecksThePodByNameWhateverTheUidSays) {
  const json pod = GpuPod("named", 8);
  const std::string node = FilterOne(pod);
  const std::string other = node == "gpu-0" ? "gpu-1" : "gpu-0";
  const json answer = extender->Bind(
      {{"PodName", "named"}, {"PodNamespace", "ml"}, {"PodUID", ""}, {"Node", other}});
  EXPECT_NE(answer["Error"], "");
  EXPECT_TRUE(actions.bindings.empty());
}

TEST_F(ExtenderTest, HostileRequestsGetTheErrorField) {
  EXPECT_NE(json::parse(extender->Filter(json::array()))["Error"], "");
  EXPECT_NE(json::parse(extender->Filter({{"NodeNames", node_names}}))["Error"], "");
  EXPECT_NE(json::parse(extender->Filter({{"Pod", "x"}, {"NodeNames", node_names}}))["Error"], "");
  EXPECT_NE(
      json::parse(extender->Filter({{"Pod", GpuPod("p", 1)}, {"NodeNames", {1, 2}}}))["Error"], "");
  json huge = json::array();
  for (int i = 0; i <= kMaxK8sNodes; ++i) huge.push_back("n");
  EXPECT_NE(json::parse(extender->Filter({{"Pod", GpuPod("p", 1)}, {"NodeNames", huge}}))["Error"],
            "");
  json bad = GpuPod("p", 1);
  bad["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1e30";
  const std::string error = json::parse(extender->Filter(NodeNamesArgs(bad, node_names)))["Error"];
  EXPECT_NE(error.find("nvidia.com/gpu"), std::string::npos) << error;
  // A pod berth does not know asks for no GPUs: bound where kube-scheduler says, as it is.
  EXPECT_EQ(extender->Bind({{"PodName", "web"},
                            {"Node", "gpu-0"},
                            {"PodUID", "cpu-pod"},
                            {"PodNamespace", "ml"}})["Error"],
            "");
  ASSERT_EQ(actions.bindings.size(), 1u);
  EXPECT_TRUE(actions.bindings[0].annotations.empty());
  EXPECT_EQ(actions.bindings[0].node, "gpu-0");
  EXPECT_THROW(extender->Prioritize({{"Pod", 1}}), std::invalid_argument);
  EXPECT_THROW(extender->Preempt(json::array()), std::invalid_argument);
  // Keys in any case, as Go decodes them.
  extender->PodChanged(GpuPod("q", 1));
  const json lower =
      json::parse(extender->Filter({{"pod", GpuPod("q", 1)}, {"nodenames", node_names}}));
  EXPECT_EQ(lower["NodeNames"].size(), 1u);
}

TEST_F(ExtenderTest, ChurnOverManyStepsKeepsEveryGpuOnce) {
  // kube-scheduler's loop: new pods arrive, pending ones are retried, running ones end, and
  // some pending ones are deleted by their owners.
  std::mt19937 rng(7);
  std::vector<json> running, pending;
  int started = 0;
  for (int step = 0; step < 400; ++step) {
    now += 1;
    pending.push_back(GpuPod("c-" + std::to_string(step), 1 << (rng() % 4)));
    std::vector<json> still;
    for (const json& pod : pending) {
      if (!FilterOne(pod).empty()) {
        running.push_back(Schedule(pod));
        ++started;
      } else if (rng() % 20 == 0) {
        extender->PodDeleted(pod);
      } else {
        still.push_back(pod);
      }
    }
    pending = std::move(still);
    if (!running.empty() && rng() % 3 != 0) {
      const size_t i = rng() % running.size();
      json done = running[i];
      done["status"]["phase"] = rng() % 2 ? "Succeeded" : "Failed";
      extender->PodChanged(done);
      running.erase(running.begin() + static_cast<long>(i));
    }
    std::set<std::pair<std::string, std::string>> held;
    for (const json& pod : running) {
      const auto placement = extender->PlacementOf(Uid(pod));
      ASSERT_FALSE(placement.first.empty()) << "step " << step;
      for (const std::string& id : placement.second)
        ASSERT_TRUE(held.insert({placement.first, id}).second) << "step " << step;
    }
    ASSERT_EQ(extender->CheckConsistency(), "") << "step " << step;
    // Every pod berth placed is bound, or a pending one kube-scheduler retries next.
    int placed_pending = 0;
    for (const json& pod : pending)
      placed_pending += !extender->PlacementOf(Uid(pod)).first.empty();
    ASSERT_EQ(extender->status().placed, static_cast<int>(running.size()) + placed_pending)
        << "step " << step;
  }
  EXPECT_GT(started, 250);
}

}  // namespace
}  // namespace berth
