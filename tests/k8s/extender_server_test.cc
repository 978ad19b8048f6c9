// The extender end to end: kube-scheduler's calls over HTTP to berth's routes, berth's informers
// and bindings against the API-server stand-in (real list/watch, 410 Gone, Bindings), through
// restarts.
#include "k8s/extender_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <set>
#include <thread>

#include "k8s/apiserver_standin.h"
#include "k8s/informer.h"
#include "k8s/kube_client.h"
#include "k8s_test_util.h"

namespace berth {
namespace {

using namespace k8s_test;

// Generous: under the sanitizers on a loaded 2-core machine a watch may take seconds to see
// its API server gone, and then backs off (1 s, 2 s, ...) before it lists again.
bool WaitFor(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

KubeConfig At(const std::string& server) {
  KubeConfig config;
  config.server = server;
  return config;
}

double Wall() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// berth as `berth server --k8s` runs it, in process: client, extender, informers and routes.
struct Berth {
  Berth(const std::string& api, std::vector<QueueSpec> queues = {}) : client(At(api)) {
    ExtenderOptions options;
    BuiltinPolicy("berth", &options.policy);
    options.queues = std::move(queues);
    options.clock = Wall;
    extender = std::make_unique<Extender>(std::move(options), &client);
    informers = std::make_unique<Informers>(&client, extender.get());
    ConfigureExtenderServer(server);
    AddExtenderRoutes(server, *extender, metrics, ready);
    port = server.bind_to_any_port("127.0.0.1");
    serving = std::thread([this] { server.listen_after_bind(); });
    EXPECT_EQ(informers->Sync(), "");
    informers->Start();
    ready = true;
  }
  ~Berth() {
    server.stop();
    serving.join();
    informers->Stop();
  }
  json Call(const std::string& verb, const json& args, int* status = nullptr) {
    httplib::Client http("127.0.0.1", port);
    const auto res = http.Post("/k8s/" + verb, args.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    if (status != nullptr) *status = res->status;
    return json::parse(res->body, nullptr, false);
  }
  KubeClient client;
  std::unique_ptr<Extender> extender;
  std::unique_ptr<Informers> informers;
  httplib::Server server;
  MetricsRegistry metrics;
  std::atomic<bool> ready{false};
  int port = 0;
  std::thread serving;
};

class ExtenderServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api.set_bookmark_interval(std::chrono::milliseconds(100));  // watches end soon after Stop
    url = api.Start();
    for (int i = 0; i < 4; ++i) {
      names.push_back("gpu-" + std::to_string(i));
      api.Create("nodes", GpuNode(names.back(), 8));
    }
  }
  // A pod created in the API server, as kube-scheduler would then see it.
  json Create(const json& pod) { return api.Create("pods", pod); }
  // kube-scheduler's cycle for one pod: filter, prioritize when several pass, bind.
  std::string ScheduleOnce(Berth& berth, const json& pod) {
    // kube-scheduler may ask before berth's watch shows the pod; it retries then.
    json filtered;
    WaitFor([&] {
      filtered = berth.Call("filter", NodeNamesArgs(pod, names));
      return filtered["FailedNodes"].dump().find("has not shown this pod") == std::string::npos;
    });
    EXPECT_EQ(filtered["Error"], "") << filtered.dump();
    if (filtered["NodeNames"].empty()) return "";
    const std::string node = filtered["NodeNames"][0];
    const json bind = berth.Call("bind", {{"PodName", pod["metadata"]["name"]},
                                          {"PodNamespace", pod["metadata"]["namespace"]},
                                          {"PodUID", pod["metadata"]["uid"]},
                                          {"Node", node}});
    EXPECT_EQ(bind["Error"], "") << bind.dump();
    return node;
  }

  testing::ApiServerStandIn api;
  std::string url;
  std::vector<std::string> names;
};

TEST_F(ExtenderServerTest, FilterBindAndTheBindingCarriesTheGpus) {
  Berth berth(url);
  ASSERT_TRUE(WaitFor([&] { return berth.extender->status().nodes == 4; }))
      << berth.extender->status().cluster_error << " unreadable "
      << berth.extender->status().unreadable_nodes;
  const json pod = Create(GpuPod("train", 4));
  const std::string node = ScheduleOnce(berth, pod);
  ASSERT_FALSE(node.empty());
  const json stored = *api.Get("pods", "ml", "train");
  EXPECT_EQ(stored["spec"]["nodeName"], node);
  const std::string ids = stored["metadata"]["annotations"]["berth.io/gpu-ids"];
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 3) << ids;
  EXPECT_EQ(api.bindings(), 1);
  // Binding twice is the API server's 409, passed back in the Error field.
  const json again = berth.Call("bind", {{"PodName", "train"},
                                         {"PodNamespace", "ml"},
                                         {"PodUID", pod["metadata"]["uid"]},
                                         {"Node", node}});
  EXPECT_NE(again["Error"].get<std::string>().find("409"), std::string::npos) << again.dump();
}

TEST_F(ExtenderServerTest, MalformedPayloadsGetTheErrorFieldNeverABare500) {
  Berth berth(url);
  int status = 0;
  httplib::Client http("127.0.0.1", berth.port);
  for (const char* verb : {"filter", "bind"}) {
    const auto res = http.Post(std::string("/k8s/") + verb, "{not json", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_NE(json::parse(res->body)["Error"], "");
  }
  for (const char* verb : {"prioritize", "preempt"}) {
    const json answer = berth.Call(verb, json::array({1, 2}), &status);
    EXPECT_EQ(status, 400) << verb;
    EXPECT_NE(answer["Error"], "") << verb;
  }
  const json filter =
      berth.Call("filter", {{"Pod", {{"metadata", {{"name", "x"}}}}}, {"NodeNames", names}});
  EXPECT_NE(filter["Error"].get<std::string>().find("metadata.uid"), std::string::npos);
}

TEST_F(ExtenderServerTest, ReclaimDeletesTheVictimThroughTheApiAndTheWatchFreesItsGpus) {
  Berth berth(url, {{"a", 1, -1, {}}, {"b", 1, -1, {}}});
  for (int i = 0; i < 4; ++i)
    ASSERT_FALSE(
        ScheduleOnce(berth, Create(GpuPod("a-" + std::to_string(i), 8, {{"berth.io/queue", "a"}})))
            .empty());
  ASSERT_TRUE(WaitFor([&] { return berth.extender->status().bound == 4; }));
  const json reclaim = Create(GpuPod("b-0", 8, {{"berth.io/queue", "b"}}));
  std::string node;
  // kube-scheduler retries the pod with back-off; berth deletes one victim and waits for it.
  ASSERT_TRUE(WaitFor([&] {
    node = ScheduleOnce(berth, reclaim);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return !node.empty();
  }));
  EXPECT_EQ(api.List("pods", "ml").size(), 4u);  // 3 of a, and b's
  EXPECT_EQ((*api.Get("pods", "ml", "b-0"))["spec"]["nodeName"], node);
  EXPECT_EQ(berth.extender->CheckConsistency(), "");
}

TEST_F(ExtenderServerTest, PodGroupGangWaitsForMinMember) {
  Berth berth(url);
  api.Create("podgroups", {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                           {"kind", "PodGroup"},
                           {"metadata", {{"name", "pg"}, {"namespace", "ml"}}},
                           {"spec", {{"minMember", 2}}}});
  json first = GpuPod("w-0", 8), second = GpuPod("w-1", 8);
  for (json* pod : {&first, &second})
    (*pod)["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  first = Create(first);
  json waiting;
  ASSERT_TRUE(WaitFor([&] {
    waiting = berth.Call("filter", NodeNamesArgs(first, names));
    // The PodGroup's watch may come after the pod's: until then the gang's size is unknown.
    return waiting.dump().find("waiting for gang ml/pg: 1 of 2") != std::string::npos;
  }));
  EXPECT_TRUE(waiting["NodeNames"].empty());
  EXPECT_NE(waiting["FailedNodes"]["gpu-0"].get<std::string>().find("waiting for gang ml/pg"),
            std::string::npos)
      << waiting.dump();
  second = Create(second);
  const std::string a = ScheduleOnce(berth, second), b = ScheduleOnce(berth, first);
  EXPECT_FALSE(a.empty());
  EXPECT_FALSE(b.empty());
  EXPECT_NE(a, b);
}

TEST_F(ExtenderServerTest, ARestartRelistsAndHoldsTheSameGpus) {
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> before;
  {
    Berth berth(url);
    for (int i = 0; i < 5; ++i) {
      const json pod = Create(GpuPod("p-" + std::to_string(i), 3));
      ASSERT_FALSE(ScheduleOnce(berth, pod).empty());
      before[pod["metadata"]["uid"]] = berth.extender->PlacementOf(pod["metadata"]["uid"]);
    }
  }  // as after kill -9: nothing is kept but what the API server holds
  Berth berth(url);
  for (const auto& [uid, placement] : before)
    EXPECT_EQ(berth.extender->PlacementOf(uid), placement);
  EXPECT_EQ(berth.extender->status().bound, 5);
  // 8-GPU pods fit exactly the nodes the adopted pods left whole.
  std::set<std::string> used;
  for (const auto& [uid, placement] : before) used.insert(placement.first);
  int placed = 0;
  for (int i = 0; i < 4; ++i)
    placed += !ScheduleOnce(berth, Create(GpuPod("big-" + std::to_string(i), 8))).empty();
  EXPECT_EQ(placed, 4 - static_cast<int>(used.size()));
  EXPECT_EQ(berth.extender->CheckConsistency(), "");
}

TEST_F(ExtenderServerTest, AWatchTooOldRelistsAndSeesWhatWasDeleted) {
  Berth berth(url);
  const json pod = Create(GpuPod("gone-soon", 8));
  ASSERT_FALSE(ScheduleOnce(berth, pod).empty());
  berth.informers->Stop();
  // While no watch runs the pod is deleted and the history compacted: the resumed watch gets
  // 410 Gone and the relist shows the pod missing.
  api.Delete("pods", "ml", "gone-soon");
  api.CompactHistory();
  EXPECT_EQ(berth.extender->status().pods, 1);
  berth.informers->Start();
  ASSERT_TRUE(WaitFor([&] { return berth.extender->status().pods == 0; }));
  EXPECT_GE(berth.informers->relists(), 1u);
  // Its GPUs are free again: another 8-GPU pod fits where it was.
  EXPECT_FALSE(ScheduleOnce(berth, Create(GpuPod("next", 8))).empty());
}

TEST_F(ExtenderServerTest, AFreshApiServerIsListedAgainAfterTheWatchFails) {
  auto berth = std::make_unique<Berth>(url);
  ASSERT_FALSE(ScheduleOnce(*berth, Create(GpuPod("old", 8))).empty());
  // The API server restarts empty on the same port: its versions begin anew, and the pod berth
  // holds is not there. The failed watch lists again.
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  api.Stop();
  testing::ApiServerStandIn fresh;
  ASSERT_EQ(fresh.Start("", port), url);
  for (const std::string& name : names) fresh.Create("nodes", GpuNode(name, 8));
  ASSERT_TRUE(WaitFor([&] { return berth->extender->status().pods == 0; }));
  EXPECT_GE(berth->extender->status().relists, 1u);
  berth.reset();
}

}  // namespace
}  // namespace berth
