// A stand-in for the Kubernetes API server, for tests of berth's scheduler extender where no
// real API server can run. It serves Pods, Nodes, Bindings and PodGroups
// (scheduling.x-k8s.io/v1alpha1) over HTTP on 127.0.0.1 at the real API paths, with the
// semantics an extender that lists, watches and binds relies on:
//
//   - One global resourceVersion (like etcd), bumped by every write; a PUT or merge PATCH whose
//     metadata.resourceVersion is stale answers 409 Conflict.
//   - Lists: {"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"N"},"items":[]};
//     items of built-in kinds (pods, nodes) carry no kind/apiVersion, PodGroup items do.
//     labelSelector=k=v,k2!=v2 on all kinds; fieldSelector on metadata.name, metadata.namespace,
//     and for pods spec.nodeName and status.phase ("spec.nodeName=" selects unbound pods).
//   - Watches (?watch=1): newline-separated {"type","object"} events in a chunked stream. From
//     resourceVersion N the kept events after N come first, then live ones; without N (or "0")
//     an ADDED for each current object comes first. N older than the kept history: HTTP 200 with
//     one ERROR event holding a 410 Expired Status, then the end, so a client must relist.
//     allowWatchBookmarks=true adds BOOKMARK events when idle; timeoutSeconds ends the stream.
//     Under a selector, an object that stops matching arrives as DELETED.
//   - POST .../pods/NAME/binding sets spec.nodeName and writes the Binding's annotations onto
//     the pod (201 Status); a name mismatch is 400, an unknown pod 404, a bound pod 409.
//   - Errors are Status objects (code, reason, message), as client libraries expect.
//
// Thread-safe: watches and writers may run at once; Stop() ends open watches at once.

#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace berth::testing {

// What a direct call throws where the HTTP verb would answer an error: the Status object.
class ApiStatusError : public std::runtime_error {
 public:
  explicit ApiStatusError(nlohmann::json status);
  int code() const { return status_.value("code", 0); }
  const nlohmann::json& status() const { return status_; }

 private:
  nlohmann::json status_;
};

class ApiServerStandIn {
 public:
  // history: how many watch events are kept for watches that resume from a resourceVersion;
  // resuming from before the oldest kept one is answered 410 Gone. The history is one for all
  // kinds, so writes of one kind age the versions of another sooner than the real server's
  // per-resource watch caches would: a client must relist on 410 either way.
  explicit ApiServerStandIn(size_t history = 1000);
  ~ApiServerStandIn();  // Stop()s

  ApiServerStandIn(const ApiServerStandIn&) = delete;
  ApiServerStandIn& operator=(const ApiServerStandIn&) = delete;

  // Listens on 127.0.0.1, serving from a thread of its own; returns
  // "http://127.0.0.1:PORT". With a token, every request needs "Authorization: Bearer TOKEN"
  // (else 401). port 0 picks a free one. Once per object.
  std::string Start(const std::string& token = "", int port = 0);
  // Ends open watches, stops serving and joins the thread. Safe to call twice.
  void Stop();

  // Direct access for tests, with the same effects as the HTTP verbs (events are emitted).
  // kind is the resource: "pods", "nodes" or "podgroups"; ns is ignored for nodes, and taken
  // from the object's metadata.namespace ("default" where absent) by Create and Update. Errors
  // throw ApiStatusError with the Status the HTTP verb would answer (std::invalid_argument for
  // an unknown kind).
  nlohmann::json Create(const std::string& kind, nlohmann::json object);
  // The object's metadata names it; an empty metadata.resourceVersion updates unconditionally.
  nlohmann::json Update(const std::string& kind, nlohmann::json object);
  // An RFC 7386 merge patch, as PATCH with application/merge-patch+json.
  nlohmann::json Patch(const std::string& kind, const std::string& ns, const std::string& name,
                       const nlohmann::json& patch);
  // False where there was no such object.
  bool Delete(const std::string& kind, const std::string& ns, const std::string& name);
  std::optional<nlohmann::json> Get(const std::string& kind, const std::string& ns,
                                    const std::string& name) const;
  // Every object of the kind (in ns, where not empty), ordered by namespace and name.
  std::vector<nlohmann::json> List(const std::string& kind, const std::string& ns = "") const;
  // As POST .../pods/POD/binding would (annotations merged into the pod's).
  void Bind(const std::string& ns, const std::string& pod, const std::string& node,
            const nlohmann::json& annotations = nlohmann::json::object());

  // Forgets every kept event: a watch resuming from an older resourceVersion gets 410 Gone,
  // as after an etcd compaction.
  void CompactHistory();
  // How often an idle watch that allows bookmarks gets one (default 1 s).
  void set_bookmark_interval(std::chrono::milliseconds interval);

  uint64_t resource_version() const;
  int bindings() const;  // successful bindings so far
  // Requests seen (before the token check) for "METHOD /path", query string excluded.
  int requests(const std::string& method, const std::string& path) const;
  int open_watches() const;

 private:
  struct Kind;
  struct Watch;
  struct Result;
  // A write as watches see it: previous is the object before it (null for ADDED), so a
  // selector can tell an object that stopped matching.
  struct Event {
    uint64_t version;
    std::string resource;
    std::string type;
    nlohmann::json object;
    nlohmann::json previous;
  };

  static const Kind* FindKind(const std::string& resource);
  static std::string Key(const std::string& ns, const std::string& name);

  // The verbs, under mu_ (taken inside). Each answers an object or an error Status.
  Result DoCreate(const Kind& kind, const std::string& ns, nlohmann::json object);
  Result DoUpdate(const Kind& kind, const std::string& ns, const std::string& name,
                  nlohmann::json object);
  Result DoPatch(const Kind& kind, const std::string& ns, const std::string& name,
                 const nlohmann::json& patch);
  Result DoDelete(const Kind& kind, const std::string& ns, const std::string& name);
  Result DoBind(const std::string& ns, const std::string& pod, const nlohmann::json& binding);
  Result DoUpdateLocked(const Kind& kind, const std::string& ns, const std::string& name,
                        nlohmann::json object);
  void RecordLocked(const Kind& kind, const std::string& type, nlohmann::json object,
                    nlohmann::json previous);

  void AddRoutes();
  void ServeCollection(const Kind& kind, const std::string& ns, const httplib::Request& req,
                       httplib::Response& res);
  void StartWatch(const Kind& kind, const std::string& ns, const httplib::Request& req,
                  httplib::Response& res);
  // Blocks until the watch has something to send (or ends); answers the lines to write.
  std::string NextWatchChunk(Watch& watch);

  const size_t history_limit_;
  mutable std::mutex mu_;
  std::condition_variable changed_;  // a write, or Stop()
  uint64_t resource_version_ = 1;
  // Watches may resume from this version on; older ones were compacted away.
  uint64_t compacted_ = 0;
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;  // resource -> key
  std::deque<Event> history_;
  std::map<std::string, int> requests_;
  int bindings_ = 0;
  int open_watches_ = 0;
  std::chrono::milliseconds bookmark_interval_{1000};
  uint64_t uid_counter_ = 0;
  bool stopping_ = false;

  std::string token_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace berth::testing
