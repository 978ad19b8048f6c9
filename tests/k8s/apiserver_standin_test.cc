#include "k8s/apiserver_standin.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace berth::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr auto kWait = std::chrono::seconds(5);

json Pod(const std::string& ns, const std::string& name, json labels = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
}

json Node(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

json Binding(const std::string& pod, const std::string& node, json annotations = nullptr) {
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", pod}}},
                  {"target", {{"kind", "Node"}, {"name", node}}}};
  if (!annotations.is_null()) binding["metadata"]["annotations"] = annotations;
  return binding;
}

uint64_t Version(const json& object) {
  return std::stoull(object["metadata"]["resourceVersion"].get<std::string>());
}

// Reads a watch stream in a thread of its own, one event a line.
class WatchReader {
 public:
  WatchReader(const std::string& url, const std::string& path) : client_(url) {
    client_.set_read_timeout(10);
    thread_ = std::thread([this, path] {
      auto result = client_.Get(path, [this](const char* data, size_t size) {
        std::lock_guard lock(mu_);
        buffer_.append(data, size);
        for (size_t end; (end = buffer_.find('\n')) != std::string::npos;) {
          events_.push_back(json::parse(buffer_.substr(0, end)));
          buffer_.erase(0, end + 1);
        }
        changed_.notify_all();
        return true;
      });
      std::lock_guard lock(mu_);
      status_ = result ? result->status : -1;
      ended_ = true;
      changed_.notify_all();
    });
  }
  ~WatchReader() {
    client_.stop();
    thread_.join();
  }

  // The first count events, once they are in (fewer after kWait).
  std::vector<json> WaitFor(size_t count) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, kWait, [&] { return events_.size() >= count || ended_; });
    return events_;
  }
  // True once the stream ended (false after kWait).
  bool WaitForEnd() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kWait, [&] { return ended_; });
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::vector<json> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  httplib::Client client_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::string buffer_;
  std::vector<json> events_;
  int status_ = 0;
  bool ended_ = false;
  std::thread thread_;
};

class ApiServerStandInTest : public ::testing::Test {
 protected:
  void SetUp() override { url_ = server_.Start(); }

  json Call(const std::string& method, const std::string& path, const std::string& body = "",
            int* status = nullptr, const std::string& type = "application/json") {
    httplib::Client client(url_);
    httplib::Result result = method == "GET"     ? client.Get(path)
                             : method == "POST"  ? client.Post(path, body, type)
                             : method == "PUT"   ? client.Put(path, body, type)
                             : method == "PATCH" ? client.Patch(path, body, type)
                                                 : client.Delete(path);
    EXPECT_TRUE(result) << method << " " << path;
    if (!result) return nullptr;
    if (status != nullptr) *status = result->status;
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
    return json::parse(result->body);
  }

  ApiServerStandIn server_;
  std::string url_;
};

TEST_F(ApiServerStandInTest, CreatesGetsListsAndDeletes) {
  int status = 0;
  const json node = Call("POST", "/api/v1/nodes", Node("n1").dump(), &status);
  EXPECT_EQ(status, 201);
  EXPECT_EQ(node["kind"], "Node");
  EXPECT_FALSE(node["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(node["metadata"]["creationTimestamp"].get<std::string>().empty());
  EXPECT_EQ(node["metadata"].count("namespace"), 0u);

  const json again = Call("POST", "/api/v1/nodes", Node("n1").dump(), &status);
  EXPECT_EQ(status, 409);
  EXPECT_EQ(again["kind"], "Status");
  EXPECT_EQ(again["reason"], "AlreadyExists");
  EXPECT_EQ(again["code"], 409);

  const json got = Call("GET", "/api/v1/nodes/n1", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(got, node);

  Call("POST", "/api/v1/namespaces/a/pods", Pod("a", "p1").dump(), &status);
  EXPECT_EQ(status, 201);
  const json p2 = Call("POST", "/api/v1/namespaces/b/pods", Pod("", "p2").dump(), &status);
  EXPECT_EQ(status, 201);
  EXPECT_EQ(p2["metadata"]["namespace"], "b");
  EXPECT_GT(Version(p2), Version(node));
  Call("POST", "/api/v1/namespaces/b/pods", Pod("a", "p3").dump(), &status);
  EXPECT_EQ(status, 400) << "namespace in the body differs from the path's";

  const json all = Call("GET", "/api/v1/pods", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(all["kind"], "PodList");
  EXPECT_EQ(all["apiVersion"], "v1");
  EXPECT_EQ(all["metadata"]["resourceVersion"], std::to_string(server_.resource_version()));
  ASSERT_EQ(all["items"].size(), 2u);
  EXPECT_EQ(all["items"][0].count("kind"), 0u) << "built-in list items carry no kind";
  EXPECT_EQ(all["items"][0].count("apiVersion"), 0u);
  const json in_b = Call("GET", "/api/v1/namespaces/b/pods");
  ASSERT_EQ(in_b["items"].size(), 1u);
  EXPECT_EQ(in_b["items"][0]["metadata"]["name"], "p2");
  EXPECT_EQ(Call("GET", "/api/v1/nodes")["kind"], "NodeList");

  const json deleted =
      Call("DELETE", "/api/v1/namespaces/b/pods/p2?gracePeriodSeconds=0", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(deleted["metadata"]["name"], "p2");
  const json missing = Call("GET", "/api/v1/namespaces/b/pods/p2", "", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(missing["reason"], "NotFound");
  Call("DELETE", "/api/v1/namespaces/b/pods/p2", "", &status);
  EXPECT_EQ(status, 404);
  EXPECT_FALSE(server_.Get("pods", "b", "p2"));
  EXPECT_TRUE(server_.Get("pods", "a", "p1"));

  const json unknown = Call("GET", "/api/v1/secrets", "", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(unknown["kind"], "Status");
  Call("POST", "/api/v1/nodes", "{not json", &status);
  EXPECT_EQ(status, 400);
  Call("POST", "/api/v1/nodes", std::string(5 << 20, ' '), &status);
  EXPECT_EQ(status, 413);
  EXPECT_EQ(server_.requests("GET", "/api/v1/pods"), 1);
}

TEST_F(ApiServerStandInTest, PodGroupListItemsCarryKind) {
  const json group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                      {"kind", "PodGroup"},
                      {"metadata", {{"name", "g"}, {"namespace", "a"}}},
                      {"spec", {{"minMember", 2}}}};
  int status = 0;
  Call("POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/a/podgroups", group.dump(), &status);
  EXPECT_EQ(status, 201);
  const json list = Call("GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups");
  EXPECT_EQ(list["kind"], "PodGroupList");
  EXPECT_EQ(list["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["kind"], "PodGroup");
  EXPECT_EQ(list["items"][0]["spec"]["minMember"], 2);
  EXPECT_EQ(Call("GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/a/podgroups/g")["kind"],
            "PodGroup");
}

TEST_F(ApiServerStandInTest, ListSelectors) {
  server_.Create("pods", Pod("a", "p1", {{"app", "x"}, {"tier", "1"}}));
  server_.Create("pods", Pod("a", "p2", {{"app", "x"}}));
  server_.Create("pods", Pod("a", "p3", {{"app", "y"}}));
  server_.Bind("a", "p2", "n1");
  auto names = [&](const std::string& query) {
    std::vector<std::string> out;
    const json list = Call("GET", "/api/v1/pods?" + query);
    for (const json& item : list["items"]) {
      out.push_back(item["metadata"]["name"]);
    }
    return out;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3D"), (Names{"p1", "p3"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dn1"), (Names{"p2"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName!%3D"), (Names{"p2"}));
  EXPECT_EQ(names("labelSelector=app%3Dx"), (Names{"p1", "p2"}));
  EXPECT_EQ(names("labelSelector=app%3Dx,tier%3D1"), (Names{"p1"}));
  EXPECT_EQ(names("labelSelector=app!%3Dx"), (Names{"p3"}));
  int status = 0;
  Call("GET", "/api/v1/pods?fieldSelector=spec.hostname%3Dx", "", &status);
  EXPECT_EQ(status, 400);
}

TEST_F(ApiServerStandInTest, BindingSetsNodeAndAnnotations) {
  json pod = Pod("a", "p");
  pod["metadata"]["annotations"] = {{"kept", "yes"}};
  server_.Create("pods", pod);
  int status = 0;
  const json answer = Call("POST", "/api/v1/namespaces/a/pods/p/binding",
                           Binding("p", "n1", {{"berth.io/gpu-ids", "0,1"}}).dump(), &status);
  EXPECT_EQ(status, 201);
  EXPECT_EQ(answer, json({{"kind", "Status"},
                          {"apiVersion", "v1"},
                          {"metadata", json::object()},
                          {"status", "Success"},
                          {"code", 201}}));
  const json bound = *server_.Get("pods", "a", "p");
  EXPECT_EQ(bound["spec"]["nodeName"], "n1");
  EXPECT_EQ(bound["metadata"]["annotations"], json({{"kept", "yes"}, {"berth.io/gpu-ids", "0,1"}}));
  EXPECT_EQ(bound["status"]["conditions"][0]["type"], "PodScheduled");
  EXPECT_EQ(server_.bindings(), 1);
}

TEST_F(ApiServerStandInTest, BindingErrors) {
  server_.Create("pods", Pod("a", "p"));
  int status = 0;
  json answer =
      Call("POST", "/api/v1/namespaces/a/pods/p/binding", Binding("q", "n1").dump(), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(answer["reason"], "BadRequest");
  answer = Call("POST", "/api/v1/namespaces/a/pods/q/binding", Binding("q", "n1").dump(), &status);
  EXPECT_EQ(status, 404);
  Call("POST", "/api/v1/namespaces/a/pods/p/binding", Binding("p", "n1").dump(), &status);
  EXPECT_EQ(status, 201);
  answer = Call("POST", "/api/v1/namespaces/a/pods/p/binding", Binding("p", "n2").dump(), &status);
  EXPECT_EQ(status, 409);
  EXPECT_EQ(answer["reason"], "Conflict");
  EXPECT_EQ((*server_.Get("pods", "a", "p"))["spec"]["nodeName"], "n1");
  EXPECT_EQ(server_.bindings(), 1);
  EXPECT_THROW(server_.Bind("a", "p", "n3"), ApiStatusError);
}

TEST_F(ApiServerStandInTest, WatchReplaysThenStreamsLive) {
  const json n1 = server_.Create("nodes", Node("n1"));
  server_.Create("nodes", Node("n2"));
  server_.Create("pods", Pod("a", "p"));  // another kind: not in the node watch
  WatchReader watch(url_, "/api/v1/nodes?watch=1&resourceVersion=" +
                              n1["metadata"]["resourceVersion"].get<std::string>());
  std::vector<json> events = watch.WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "n2");
  EXPECT_EQ(events[0]["object"]["kind"], "Node");
  EXPECT_EQ(events[0]["object"]["apiVersion"], "v1");

  json changed = *server_.Get("nodes", "", "n1");
  changed["metadata"]["labels"] = {{"gpu", "h100"}};
  server_.Update("nodes", changed);
  server_.Delete("nodes", "", "n2");
  events = watch.WaitFor(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["type"], "MODIFIED");
  EXPECT_EQ(events[1]["object"]["metadata"]["labels"]["gpu"], "h100");
  EXPECT_EQ(events[2]["type"], "DELETED");
  EXPECT_EQ(events[2]["object"]["metadata"]["name"], "n2");
  EXPECT_EQ(Version(events[2]["object"]), server_.resource_version());
  EXPECT_EQ(watch.status(), 0) << "the stream is still open";
}

TEST_F(ApiServerStandInTest, WatchWithoutVersionStartsWithEveryObject) {
  server_.Create("pods", Pod("a", "p1"));
  server_.Create("pods", Pod("b", "p2"));
  WatchReader watch(url_, "/api/v1/namespaces/a/pods?watch=true");
  std::vector<json> events = watch.WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "p1");
  server_.Create("pods", Pod("a", "p3"));
  events = watch.WaitFor(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "p3");
}

TEST_F(ApiServerStandInTest, WatchFromCompactedVersionIsGone) {
  const uint64_t old = Version(server_.Create("pods", Pod("a", "p1")));
  server_.Create("pods", Pod("a", "p2"));
  server_.CompactHistory();
  const uint64_t now = server_.resource_version();
  WatchReader watch(url_, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(old));
  ASSERT_TRUE(watch.WaitForEnd());
  EXPECT_EQ(watch.status(), 200);
  const std::vector<json> events = watch.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  const json& status = events[0]["object"];
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["status"], "Failure");
  EXPECT_EQ(status["reason"], "Expired");
  EXPECT_EQ(status["code"], 410);
  EXPECT_EQ(status["message"],
            "too old resource version: " + std::to_string(old) + " (" + std::to_string(now) + ")");

  // From the current version it works: nothing was missed.
  WatchReader fresh(url_, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(now));
  server_.Delete("pods", "a", "p1");
  const std::vector<json> live = fresh.WaitFor(1);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0]["type"], "DELETED");
}

TEST(ApiServerStandInHistory, WatchBeyondKeptHistoryIsGone) {
  ApiServerStandIn server(2);
  const std::string url = server.Start();
  const uint64_t first = Version(server.Create("nodes", Node("n1")));
  server.Create("nodes", Node("n2"));
  server.Create("nodes", Node("n3"));
  server.Create("nodes", Node("n4"));
  WatchReader gone(url, "/api/v1/nodes?watch=1&resourceVersion=" + std::to_string(first));
  ASSERT_TRUE(gone.WaitForEnd());
  ASSERT_EQ(gone.events().size(), 1u);
  EXPECT_EQ(gone.events()[0]["object"]["code"], 410);
  // The last two writes are kept: resuming from the one before them replays both.
  WatchReader kept(url, "/api/v1/nodes?watch=1&resourceVersion=" + std::to_string(first + 1));
  const std::vector<json> events = kept.WaitFor(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "n3");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "n4");
}

TEST_F(ApiServerStandInTest, IdleWatchGetsBookmarks) {
  server_.set_bookmark_interval(milliseconds(50));
  server_.Create("pods", Pod("a", "p"));
  const uint64_t version = server_.resource_version();
  WatchReader watch(url_, "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" +
                              std::to_string(version));
  const std::vector<json> events = watch.WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "BOOKMARK");
  EXPECT_EQ(events[0]["object"],
            json({{"kind", "Pod"},
                  {"apiVersion", "v1"},
                  {"metadata", {{"resourceVersion", std::to_string(version)}}}}));
}

TEST_F(ApiServerStandInTest, WatchWithoutBookmarksEndsAtItsTimeout) {
  WatchReader watch(url_, "/api/v1/pods?watch=1&timeoutSeconds=1");
  ASSERT_TRUE(watch.WaitForEnd());
  EXPECT_EQ(watch.status(), 200);
  EXPECT_TRUE(watch.events().empty());
}

TEST_F(ApiServerStandInTest, SelectorWatchSeesObjectsLeaveAndEnter) {
  server_.Create("pods", Pod("a", "p"));
  server_.Create("pods", Pod("a", "q"));
  const uint64_t version = server_.resource_version();
  WatchReader unbound(url_, "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3D&resourceVersion=" +
                                std::to_string(version));
  WatchReader labelled(url_, "/api/v1/pods?watch=1&labelSelector=team%3Dml&resourceVersion=" +
                                 std::to_string(version));
  server_.Bind("a", "p", "n1");
  server_.Patch("pods", "a", "q", {{"metadata", {{"labels", {{"team", "ml"}}}}}});
  server_.Patch("pods", "a", "q", {{"metadata", {{"labels", {{"team", "web"}}}}}});

  std::vector<json> events = unbound.WaitFor(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "DELETED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "p");
  EXPECT_EQ(events[1]["type"], "MODIFIED");  // q stays unbound
  EXPECT_EQ(events[2]["type"], "MODIFIED");

  events = labelled.WaitFor(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["labels"]["team"], "ml");
  EXPECT_EQ(events[1]["type"], "DELETED");
  EXPECT_EQ(events[1]["object"]["metadata"]["labels"]["team"], "ml") << "the last matching state";
  EXPECT_EQ(Version(events[1]["object"]), server_.resource_version());
}

TEST_F(ApiServerStandInTest, MergePatch) {
  json pod = Pod("a", "p", {{"app", "x"}, {"old", "1"}});
  server_.Create("pods", pod);
  int status = 0;
  const std::string path = "/api/v1/namespaces/a/pods/p";
  const json patched = Call("PATCH", path, R"({"metadata":{"labels":{"new":"2","old":null}}})",
                            &status, "application/merge-patch+json");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(patched["metadata"]["labels"], json({{"app", "x"}, {"new", "2"}}));
  EXPECT_EQ(patched["spec"], pod["spec"]);
  EXPECT_EQ(*server_.Get("pods", "a", "p"), patched);

  Call("PATCH", path, R"({"metadata":{"labels":{"a":"b"}}})", &status,
       "application/strategic-merge-patch+json");
  EXPECT_EQ(status, 415);
  Call("PATCH", path, R"([{"op":"add","path":"/x","value":1}])", &status,
       "application/json-patch+json");
  EXPECT_EQ(status, 415);
  const json refused =
      Call("PATCH", path, R"({"spec":{"nodeName":"n1"}})", &status, "application/merge-patch+json");
  EXPECT_EQ(status, 422);
  EXPECT_EQ(refused["reason"], "Invalid");
  Call("PATCH", path, "{oops", &status, "application/merge-patch+json");
  EXPECT_EQ(status, 400);
  Call("PATCH", path + "x", "{}", &status, "application/merge-patch+json");
  EXPECT_EQ(status, 404);
  Call("PATCH", path, R"({"metadata":{"resourceVersion":"1"}})", &status,
       "application/merge-patch+json");
  EXPECT_EQ(status, 409) << "a patch naming a stale version conflicts";
}

TEST_F(ApiServerStandInTest, StaleUpdateConflicts) {
  const json created = server_.Create("pods", Pod("a", "p"));
  json first = created;
  first["metadata"]["labels"] = {{"v", "1"}};
  int status = 0;
  const json updated = Call("PUT", "/api/v1/namespaces/a/pods/p", first.dump(), &status);
  EXPECT_EQ(status, 200);
  EXPECT_GT(Version(updated), Version(created));
  EXPECT_EQ(updated["metadata"]["uid"], created["metadata"]["uid"]);

  json stale = created;  // still the version before the update
  stale["metadata"]["labels"] = {{"v", "2"}};
  const json conflict = Call("PUT", "/api/v1/namespaces/a/pods/p", stale.dump(), &status);
  EXPECT_EQ(status, 409);
  EXPECT_EQ(conflict["reason"], "Conflict");
  EXPECT_EQ((*server_.Get("pods", "a", "p"))["metadata"]["labels"]["v"], "1");
  try {
    server_.Update("pods", stale);
    ADD_FAILURE() << "a stale direct update went through";
  } catch (const ApiStatusError& e) {
    EXPECT_EQ(e.code(), 409);
  }
  Call("PUT", "/api/v1/namespaces/a/pods/other", first.dump(), &status);
  EXPECT_EQ(status, 400) << "name in the body differs from the path's";
}

TEST_F(ApiServerStandInTest, ConcurrentWritersAndWatchesSeeEveryWriteInOrder) {
  const uint64_t from = server_.resource_version();
  std::vector<std::unique_ptr<WatchReader>> watches;
  for (int i = 0; i < 3; ++i) {
    watches.push_back(std::make_unique<WatchReader>(
        url_, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(from)));
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([this, w] {
      httplib::Client client(url_);
      for (int i = 0; i < 25; ++i) {
        const std::string name = "p" + std::to_string(w) + "-" + std::to_string(i);
        const auto result =
            client.Post("/api/v1/namespaces/a/pods", Pod("a", name).dump(), "application/json");
        EXPECT_TRUE(result && result->status == 201) << name;
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  for (const auto& watch : watches) {
    const std::vector<json> events = watch->WaitFor(100);
    ASSERT_EQ(events.size(), 100u);
    uint64_t last = from;
    for (const json& event : events) {
      EXPECT_EQ(event["type"], "ADDED");
      EXPECT_GT(Version(event["object"]), last);
      last = Version(event["object"]);
    }
  }
  EXPECT_EQ(server_.List("pods", "a").size(), 100u);
}

TEST(ApiServerStandInAuth, TokenRequired) {
  ApiServerStandIn server;
  const std::string url = server.Start("secret");
  httplib::Client client(url);
  httplib::Result result = client.Get("/api/v1/nodes");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 401);
  EXPECT_EQ(json::parse(result->body)["reason"], "Unauthorized");
  client.set_bearer_token_auth("wrong");
  EXPECT_EQ(client.Get("/api/v1/nodes")->status, 401);
  client.set_bearer_token_auth("secret");
  result = client.Get("/api/v1/nodes");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(server.requests("GET", "/api/v1/nodes"), 3);
}

TEST_F(ApiServerStandInTest, StopEndsOpenWatchesPromptly) {
  server_.Create("nodes", Node("n1"));
  WatchReader watch(url_, "/api/v1/nodes?watch=1&timeoutSeconds=600");
  ASSERT_EQ(watch.WaitFor(1).size(), 1u);
  EXPECT_EQ(server_.open_watches(), 1);
  const auto start = std::chrono::steady_clock::now();
  server_.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(watch.WaitForEnd());
  EXPECT_EQ(server_.open_watches(), 0);
}

}  // namespace
}  // namespace berth::testing
