#include "k8s/apiserver_standin.h"

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <utility>

namespace berth::testing {

using nlohmann::json;

struct ApiServerStandIn::Kind {
  std::string resource;     // "pods"
  std::string kind;         // "Pod"
  std::string api_version;  // "v1"
  std::string base;         // the path the resource's paths start with
  bool namespaced;
  bool built_in;  // list items of built-in kinds carry no kind/apiVersion
};

struct ApiServerStandIn::Result {
  int code;
  json body;
};

namespace {

constexpr size_t kMaxRequestBytes = 4 << 20;
constexpr int kDefaultWatchSeconds = 30;
constexpr int kMaxWatchSeconds = 600;

// One equality requirement of a label or field selector.
struct Requirement {
  std::string key;
  bool equal;
  std::string value;
};

struct Selectors {
  std::vector<Requirement> labels;
  std::vector<Requirement> fields;  // key is the field's path, e.g. "spec.nodeName"
};

json Status(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

json NotFound(const std::string& resource, const std::string& name) {
  json status = Status(404, "NotFound", resource + " \"" + name + "\" not found");
  status["details"] = {{"name", name}, {"kind", resource}};
  return status;
}

// For the library's own errors, the only ones without a Status body of ours.
std::string ReasonFor(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 404:
      return "NotFound";
    case 413:
      return "RequestEntityTooLarge";
    case 414:
      return "RequestURITooLong";
    default:
      return "InternalError";
  }
}

// A string field by its dotted path ("spec.nodeName"); "" where absent, as the API server has it.
std::string FieldValue(const json& object, const std::string& path) {
  const json* at = &object;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string step = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!at->is_object() || !at->contains(step)) return "";
    at = &(*at)[step];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return at->is_string() ? at->get<std::string>() : "";
}

std::string Name(const json& object) { return FieldValue(object, "metadata.name"); }
std::string Namespace(const json& object) { return FieldValue(object, "metadata.namespace"); }
std::string NodeName(const json& object) { return FieldValue(object, "spec.nodeName"); }

std::string Now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// UUID-shaped and unique within the process; random across runs so that a client cannot mistake
// an object of an earlier run for the same one.
std::string NewUid(uint64_t counter) {
  static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ULL;
  auto mix = [](uint64_t x) {  // splitmix64
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  };
  const uint64_t high = mix(salt ^ counter);
  const uint64_t low = mix(high + counter);
  char text[40];
  std::snprintf(text, sizeof text, "%08x-%04x-4%03x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xffff),
                static_cast<unsigned>(high & 0xfff),
                static_cast<unsigned>(0x8000 | ((low >> 48) & 0x3fff)),
                static_cast<unsigned long long>(low & 0xffffffffffffULL));
  return text;
}

// "k=v,k2!=v2" (and "=="): the equality-based selectors, which is what informers and the
// scheduler send. Answers false on anything else.
bool ParseSelector(const std::string& text, std::vector<Requirement>* out) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string term = text.substr(start, end - start);
    start = end + 1;
    Requirement requirement;
    size_t op = term.find("!=");
    size_t value_at = op + 2;
    requirement.equal = op == std::string::npos;
    if (requirement.equal) {
      op = term.find('=');
      if (op == std::string::npos) return false;
      value_at = term.compare(op, 2, "==") == 0 ? op + 2 : op + 1;
    }
    requirement.key = term.substr(0, op);
    requirement.value = term.substr(value_at);
    if (requirement.key.empty()) return false;
    out->push_back(std::move(requirement));
  }
  return true;
}

bool Matches(const Selectors& selectors, const json& object) {
  const json* labels = nullptr;
  if (object.contains("metadata") && object["metadata"].contains("labels")) {
    labels = &object["metadata"]["labels"];
  }
  for (const Requirement& r : selectors.labels) {
    const bool has = labels != nullptr && labels->is_object() && labels->contains(r.key) &&
                     (*labels)[r.key] == r.value;
    // As in Kubernetes, "k!=v" also selects objects without the label.
    if (has != r.equal) return false;
  }
  for (const Requirement& r : selectors.fields) {
    if ((FieldValue(object, r.key) == r.value) != r.equal) return false;
  }
  return true;
}

// The fields the real API server lets a selector name (for these kinds, the common ones).
bool FieldSupported(const std::string& resource, const std::string& field) {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  return resource == "pods" && (field == "spec.nodeName" || field == "status.phase");
}

json EventLine(const std::string& type, const json& object) {
  return {{"type", type}, {"object", object}};
}

}  // namespace

struct ApiServerStandIn::Watch {
  const Kind* kind;
  std::string ns;  // empty: all namespaces
  Selectors selectors;
  uint64_t cursor;      // events up to this version were looked at
  std::string pending;  // lines to send first (the initial ADDED events)
  bool bookmarks;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::steady_clock::time_point next_bookmark;
  bool ended = false;
};

ApiStatusError::ApiStatusError(json status)
    : std::runtime_error(status.value("message", "error")), status_(std::move(status)) {}

ApiServerStandIn::ApiServerStandIn(size_t history) : history_limit_(history) {}

ApiServerStandIn::~ApiServerStandIn() { Stop(); }

const ApiServerStandIn::Kind* ApiServerStandIn::FindKind(const std::string& resource) {
  static const Kind kKinds[] = {
      {"pods", "Pod", "v1", "/api/v1", true, true},
      {"nodes", "Node", "v1", "/api/v1", false, true},
      {"podgroups", "PodGroup", "scheduling.x-k8s.io/v1alpha1",
       "/apis/scheduling.x-k8s.io/v1alpha1", true, false},
  };
  for (const Kind& kind : kKinds) {
    if (kind.resource == resource) return &kind;
  }
  return nullptr;
}

std::string ApiServerStandIn::Key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

void ApiServerStandIn::RecordLocked(const Kind& kind, const std::string& type, json object,
                                    json previous) {
  history_.push_back(
      {resource_version_, kind.resource, type, std::move(object), std::move(previous)});
  while (history_.size() > history_limit_) {
    compacted_ = history_.front().version;
    history_.pop_front();
  }
  changed_.notify_all();
}

ApiServerStandIn::Result ApiServerStandIn::DoCreate(const Kind& kind, const std::string& ns,
                                                    json object) {
  std::lock_guard lock(mu_);
  if (object.contains("kind") && object["kind"] != kind.kind) {
    return {400, Status(400, "BadRequest",
                        "the kind of the object (" + object["kind"].dump() +
                            ") does not match the resource " + kind.resource)};
  }
  json& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  const std::string name = Name(object);
  if (name.empty()) {
    return {422, Status(422, "Invalid",
                        kind.kind + " \"\" is invalid: metadata.name: Required value: name is "
                                    "required")};
  }
  if (kind.namespaced) {
    if (!Namespace(object).empty() && Namespace(object) != ns) {
      return {400, Status(400, "BadRequest",
                          "the namespace of the provided object does not match the namespace "
                          "sent on the request")};
    }
    metadata["namespace"] = ns;
  } else {
    metadata.erase("namespace");
  }
  auto& objects = objects_[kind.resource];
  const std::string key = Key(kind.namespaced ? ns : "", name);
  if (objects.count(key) != 0) {
    json status = Status(409, "AlreadyExists", kind.resource + " \"" + name + "\" already exists");
    status["details"] = {{"name", name}, {"kind", kind.resource}};
    return {409, status};
  }
  ++resource_version_;
  object["kind"] = kind.kind;
  object["apiVersion"] = kind.api_version;
  metadata["uid"] = NewUid(++uid_counter_);
  metadata["creationTimestamp"] = Now();
  metadata["resourceVersion"] = std::to_string(resource_version_);
  objects[key] = object;
  RecordLocked(kind, "ADDED", object, nullptr);
  return {201, object};
}

ApiServerStandIn::Result ApiServerStandIn::DoUpdate(const Kind& kind, const std::string& ns,
                                                    const std::string& name, json object) {
  std::lock_guard lock(mu_);
  return DoUpdateLocked(kind, ns, name, std::move(object));
}

ApiServerStandIn::Result ApiServerStandIn::DoUpdateLocked(const Kind& kind, const std::string& ns,
                                                          const std::string& name, json object) {
  json& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  if (!Name(object).empty() && Name(object) != name) {
    return {400, Status(400, "BadRequest",
                        "the name of the object (" + Name(object) +
                            ") does not match the name on the URL (" + name + ")")};
  }
  if (kind.namespaced && !Namespace(object).empty() && Namespace(object) != ns) {
    return {400, Status(400, "BadRequest",
                        "the namespace of the provided object does not match the namespace "
                        "sent on the request")};
  }
  auto& objects = objects_[kind.resource];
  const auto found = objects.find(Key(kind.namespaced ? ns : "", name));
  if (found == objects.end()) {
    return {404, NotFound(kind.resource, name)};
  }
  const json& current = found->second;
  const std::string wanted = FieldValue(object, "metadata.resourceVersion");
  if (!wanted.empty() && wanted != FieldValue(current, "metadata.resourceVersion")) {
    json status = Status(409, "Conflict",
                         "Operation cannot be fulfilled on " + kind.resource + " \"" + name +
                             "\": the object has been modified; please apply your changes to "
                             "the latest version and try again");
    status["details"] = {{"name", name}, {"kind", kind.resource}};
    return {409, status};
  }
  // Only a binding places a pod: kube-scheduler relies on it happening once.
  if (kind.resource == "pods" && NodeName(object) != NodeName(current)) {
    return {422, Status(422, "Invalid",
                        "Pod \"" + name +
                            "\" is invalid: spec.nodeName: Forbidden: pod updates may not "
                            "change spec.nodeName; bind the pod instead")};
  }
  ++resource_version_;
  object["kind"] = kind.kind;
  object["apiVersion"] = kind.api_version;
  metadata["name"] = name;
  if (kind.namespaced) metadata["namespace"] = ns;
  metadata["uid"] = current["metadata"]["uid"];
  metadata["creationTimestamp"] = current["metadata"]["creationTimestamp"];
  metadata["resourceVersion"] = std::to_string(resource_version_);
  json previous = std::exchange(found->second, object);
  RecordLocked(kind, "MODIFIED", object, std::move(previous));
  return {200, object};
}

ApiServerStandIn::Result ApiServerStandIn::DoPatch(const Kind& kind, const std::string& ns,
                                                   const std::string& name, const json& patch) {
  if (!patch.is_object()) {
    return {400, Status(400, "BadRequest", "a merge patch must be a JSON object")};
  }
  std::lock_guard lock(mu_);
  const auto& objects = objects_[kind.resource];
  const auto found = objects.find(Key(kind.namespaced ? ns : "", name));
  if (found == objects.end()) {
    return {404, NotFound(kind.resource, name)};
  }
  // The current resourceVersion stays in the patched object unless the patch names one: a patch
  // without it applies unconditionally, one with a stale one is a conflict.
  json patched = found->second;
  patched.merge_patch(patch);
  return DoUpdateLocked(kind, ns, name, std::move(patched));
}

ApiServerStandIn::Result ApiServerStandIn::DoDelete(const Kind& kind, const std::string& ns,
                                                    const std::string& name) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[kind.resource];
  const auto found = objects.find(Key(kind.namespaced ? ns : "", name));
  if (found == objects.end()) {
    return {404, NotFound(kind.resource, name)};
  }
  json last = std::move(found->second);
  objects.erase(found);
  ++resource_version_;
  last["metadata"]["resourceVersion"] = std::to_string(resource_version_);
  RecordLocked(kind, "DELETED", last, last);
  return {200, last};
}

ApiServerStandIn::Result ApiServerStandIn::DoBind(const std::string& ns, const std::string& pod,
                                                  const json& binding) {
  if (Name(binding) != pod) {
    return {400, Status(400, "BadRequest", "name in URL does not match name in Binding object")};
  }
  const std::string target_kind = FieldValue(binding, "target.kind");
  const std::string node = FieldValue(binding, "target.name");
  if (node.empty() || (!target_kind.empty() && target_kind != "Node")) {
    return {422, Status(422, "Invalid",
                        "Binding \"" + pod +
                            "\" is invalid: target: a Node's name is required (kind empty or "
                            "\"Node\")")};
  }
  std::lock_guard lock(mu_);
  auto& pods = objects_["pods"];
  const auto found = pods.find(Key(ns, pod));
  if (found == pods.end()) {
    return {404, NotFound("pods", pod)};
  }
  if (!NodeName(found->second).empty()) {
    return {409,
            Status(409, "Conflict",
                   "Operation cannot be fulfilled on pods/binding \"" + pod + "\": pod " + pod +
                       " is already assigned to node \"" + NodeName(found->second) + "\"")};
  }
  json object = found->second;
  object["spec"]["nodeName"] = node;
  const json& metadata = binding["metadata"];
  if (metadata.contains("annotations") && metadata["annotations"].is_object()) {
    const json& annotations = metadata["annotations"];
    for (const auto& [key, value] : annotations.items()) {
      object["metadata"]["annotations"][key] = value;
    }
  }
  // As the real binding does: the pod's PodScheduled condition turns True.
  json& conditions = object["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  json kept = json::array();
  for (const json& condition : conditions) {
    if (condition.value("type", "") != "PodScheduled") kept.push_back(condition);
  }
  kept.push_back({{"type", "PodScheduled"}, {"status", "True"}});
  conditions = std::move(kept);
  ++resource_version_;
  object["metadata"]["resourceVersion"] = std::to_string(resource_version_);
  json previous = std::exchange(found->second, object);
  RecordLocked(*FindKind("pods"), "MODIFIED", object, std::move(previous));
  ++bindings_;
  return {201,
          {{"kind", "Status"},
           {"apiVersion", "v1"},
           {"metadata", json::object()},
           {"status", "Success"},
           {"code", 201}}};
}

json ApiServerStandIn::Create(const std::string& resource, json object) {
  const Kind* kind = FindKind(resource);
  if (kind == nullptr) throw std::invalid_argument("unknown resource " + resource);
  std::string ns = kind->namespaced ? Namespace(object) : "";
  if (kind->namespaced && ns.empty()) ns = "default";
  Result result = DoCreate(*kind, ns, std::move(object));
  if (result.code >= 300) throw ApiStatusError(std::move(result.body));
  return result.body;
}

json ApiServerStandIn::Update(const std::string& resource, json object) {
  const Kind* kind = FindKind(resource);
  if (kind == nullptr) throw std::invalid_argument("unknown resource " + resource);
  std::string ns = kind->namespaced ? Namespace(object) : "";
  if (kind->namespaced && ns.empty()) ns = "default";
  const std::string name = Name(object);
  Result result = DoUpdate(*kind, ns, name, std::move(object));
  if (result.code >= 300) throw ApiStatusError(std::move(result.body));
  return result.body;
}

json ApiServerStandIn::Patch(const std::string& resource, const std::string& ns,
                             const std::string& name, const json& patch) {
  const Kind* kind = FindKind(resource);
  if (kind == nullptr) throw std::invalid_argument("unknown resource " + resource);
  Result result = DoPatch(*kind, ns, name, patch);
  if (result.code >= 300) throw ApiStatusError(std::move(result.body));
  return result.body;
}

bool ApiServerStandIn::Delete(const std::string& resource, const std::string& ns,
                              const std::string& name) {
  const Kind* kind = FindKind(resource);
  if (kind == nullptr) throw std::invalid_argument("unknown resource " + resource);
  return DoDelete(*kind, ns, name).code == 200;
}

std::optional<json> ApiServerStandIn::Get(const std::string& resource, const std::string& ns,
                                          const std::string& name) const {
  const Kind* kind = FindKind(resource);
  if (kind == nullptr) throw std::invalid_argument("unknown resource " + resource);
  std::lock_guard lock(mu_);
  const auto objects = objects_.find(resource);
  if (objects == objects_.end()) return std::nullopt;
  const auto found = objects->second.find(Key(kind->namespaced ? ns : "", name));
  if (found == objects->second.end()) return std::nullopt;
  return found->second;
}

std::vector<json> ApiServerStandIn::List(const std::string& resource, const std::string& ns) const {
  if (FindKind(resource) == nullptr) throw std::invalid_argument("unknown resource " + resource);
  std::lock_guard lock(mu_);
  std::vector<json> items;
  const auto objects = objects_.find(resource);
  if (objects == objects_.end()) return items;
  for (const auto& [key, object] : objects->second) {
    if (ns.empty() || Namespace(object) == ns) items.push_back(object);
  }
  return items;
}

void ApiServerStandIn::Bind(const std::string& ns, const std::string& pod, const std::string& node,
                            const json& annotations) {
  const json binding = {{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", {{"name", pod}, {"annotations", annotations}}},
                        {"target", {{"kind", "Node"}, {"name", node}}}};
  Result result = DoBind(ns, pod, binding);
  if (result.code >= 300) throw ApiStatusError(std::move(result.body));
}

void ApiServerStandIn::CompactHistory() {
  std::lock_guard lock(mu_);
  history_.clear();
  compacted_ = resource_version_;
  // Open watches that fell behind find out on their next look.
  changed_.notify_all();
}

void ApiServerStandIn::set_bookmark_interval(std::chrono::milliseconds interval) {
  std::lock_guard lock(mu_);
  bookmark_interval_ = interval;
}

uint64_t ApiServerStandIn::resource_version() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

int ApiServerStandIn::bindings() const {
  std::lock_guard lock(mu_);
  return bindings_;
}

int ApiServerStandIn::requests(const std::string& method, const std::string& path) const {
  std::lock_guard lock(mu_);
  const auto found = requests_.find(method + " " + path);
  return found == requests_.end() ? 0 : found->second;
}

int ApiServerStandIn::open_watches() const {
  std::lock_guard lock(mu_);
  return open_watches_;
}

std::string ApiServerStandIn::NextWatchChunk(Watch& watch) {
  std::unique_lock lock(mu_);
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (stopping_ || now >= watch.deadline) {
      watch.ended = true;
      return std::exchange(watch.pending, "");
    }
    if (!watch.pending.empty()) return std::exchange(watch.pending, "");
    // Events the watch still needed were forgotten: as the real server, it must relist.
    if (watch.cursor < compacted_) {
      watch.ended = true;
      return EventLine("ERROR", Status(410, "Expired",
                                       "too old resource version: " + std::to_string(watch.cursor) +
                                           " (" + std::to_string(compacted_) + ")"))
                 .dump() +
             "\n";
    }
    std::string lines;
    auto next = std::upper_bound(history_.begin(), history_.end(), watch.cursor,
                                 [](uint64_t v, const Event& e) { return v < e.version; });
    for (; next != history_.end(); ++next) {
      const Event& event = *next;
      watch.cursor = event.version;
      if (event.resource != watch.kind->resource) continue;
      auto passes = [&](const json& object) {
        return (watch.ns.empty() || Namespace(object) == watch.ns) &&
               Matches(watch.selectors, object);
      };
      const bool now_passes = event.type != "DELETED" && passes(event.object);
      const bool passed = !event.previous.is_null() && passes(event.previous);
      if (now_passes) {
        lines += EventLine(passed ? "MODIFIED" : "ADDED", event.object).dump() + "\n";
      } else if (passed) {
        // The last state that matched, at the version of the write that ended the match.
        json gone = event.previous;
        gone["metadata"]["resourceVersion"] = std::to_string(event.version);
        lines += EventLine("DELETED", gone).dump() + "\n";
      }
    }
    if (!lines.empty()) {
      watch.next_bookmark = now + bookmark_interval_;
      return lines;
    }
    if (watch.bookmarks && now >= watch.next_bookmark) {
      watch.next_bookmark = now + bookmark_interval_;
      const json bookmark = {{"kind", watch.kind->kind},
                             {"apiVersion", watch.kind->api_version},
                             {"metadata", {{"resourceVersion", std::to_string(watch.cursor)}}}};
      return EventLine("BOOKMARK", bookmark).dump() + "\n";
    }
    changed_.wait_until(
        lock, watch.bookmarks ? std::min(watch.deadline, watch.next_bookmark) : watch.deadline);
  }
}

namespace {

void Reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

// A request's JSON body; answers 400 itself when it is not a JSON object.
std::optional<json> Body(const httplib::Request& req, httplib::Response& res) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    Reply(res, 400, Status(400, "BadRequest", "the body of the request is not a JSON object"));
    return std::nullopt;
  }
  return body;
}

// The request's label and field selectors; answers 400 itself when they cannot be used.
std::optional<Selectors> RequestSelectors(const std::string& resource, const httplib::Request& req,
                                          httplib::Response& res) {
  Selectors selectors;
  if (!ParseSelector(req.get_param_value("labelSelector"), &selectors.labels) ||
      !ParseSelector(req.get_param_value("fieldSelector"), &selectors.fields)) {
    Reply(res, 400, Status(400, "BadRequest", "unable to parse the selector"));
    return std::nullopt;
  }
  for (const Requirement& r : selectors.fields) {
    if (!FieldSupported(resource, r.key)) {
      Reply(res, 400, Status(400, "BadRequest", "field label not supported: " + r.key));
      return std::nullopt;
    }
  }
  return selectors;
}

}  // namespace

void ApiServerStandIn::StartWatch(const Kind& kind, const std::string& ns,
                                  const httplib::Request& req, httplib::Response& res) {
  auto watch = std::make_shared<Watch>();
  watch->kind = &kind;
  watch->ns = ns;
  const std::optional<Selectors> selectors = RequestSelectors(kind.resource, req, res);
  if (!selectors) return;
  watch->selectors = *selectors;
  int seconds = kDefaultWatchSeconds;
  if (req.has_param("timeoutSeconds")) {
    try {
      seconds = std::clamp(std::stoi(req.get_param_value("timeoutSeconds")), 1, kMaxWatchSeconds);
    } catch (const std::exception&) {
      return Reply(res, 400, Status(400, "BadRequest", "timeoutSeconds: not a number"));
    }
  }
  const std::string from = req.get_param_value("resourceVersion");
  uint64_t version = 0;
  if (!from.empty() && from != "0") {
    try {
      size_t used = 0;
      version = std::stoull(from, &used);
      if (used != from.size()) throw std::invalid_argument(from);
    } catch (const std::exception&) {
      return Reply(res, 400,
                   Status(400, "BadRequest", "resourceVersion: invalid value \"" + from + "\""));
    }
  }
  const auto now = std::chrono::steady_clock::now();
  watch->deadline = now + std::chrono::seconds(seconds);
  const std::string bookmarks = req.get_param_value("allowWatchBookmarks");
  watch->bookmarks = bookmarks == "true" || bookmarks == "1";
  {
    std::lock_guard lock(mu_);
    watch->next_bookmark = now + bookmark_interval_;
    if (version == 0) {
      // The current state as ADDED events, then what changes after it.
      watch->cursor = resource_version_;
      for (const auto& [key, object] : objects_[kind.resource]) {
        if ((ns.empty() || Namespace(object) == ns) && Matches(watch->selectors, object)) {
          watch->pending += EventLine("ADDED", object).dump() + "\n";
        }
      }
    } else {
      watch->cursor = version;
    }
    ++open_watches_;
  }
  res.set_chunked_content_provider(
      "application/json",
      [this, watch](size_t, httplib::DataSink& sink) {
        const std::string lines = NextWatchChunk(*watch);
        if (!lines.empty() && !sink.write(lines.data(), lines.size())) return false;
        if (watch->ended) sink.done();
        return true;
      },
      [this](bool) {
        std::lock_guard lock(mu_);
        --open_watches_;
      });
}

void ApiServerStandIn::ServeCollection(const Kind& kind, const std::string& ns,
                                       const httplib::Request& req, httplib::Response& res) {
  const std::string watch = req.get_param_value("watch");
  if (watch == "1" || watch == "true") return StartWatch(kind, ns, req, res);
  const std::optional<Selectors> selectors = RequestSelectors(kind.resource, req, res);
  if (!selectors) return;
  json items = json::array();
  std::string version;
  {
    std::lock_guard lock(mu_);
    version = std::to_string(resource_version_);
    for (const auto& [key, object] : objects_[kind.resource]) {
      if ((!ns.empty() && Namespace(object) != ns) || !Matches(*selectors, object)) continue;
      items.push_back(object);
      if (kind.built_in) {
        items.back().erase("kind");
        items.back().erase("apiVersion");
      }
    }
  }
  Reply(res, 200,
        {{"kind", kind.kind + "List"},
         {"apiVersion", kind.api_version},
         {"metadata", {{"resourceVersion", version}}},
         {"items", std::move(items)}});
}

void ApiServerStandIn::AddRoutes() {
  httplib::Server& server = *server_;
  for (const char* resource : {"pods", "nodes", "podgroups"}) {
    const Kind* kind = FindKind(resource);
    // Groups 1 and 2 of an item path: namespace and name (cluster-scoped kinds: name only).
    const std::string in_ns = kind->base + "/namespaces/([^/]+)/" + kind->resource;
    const std::string collection = kind->namespaced ? in_ns : kind->base + "/" + kind->resource;
    const std::string item = collection + "/([^/]+)";
    auto ns_of = [kind](const httplib::Request& req) {
      return kind->namespaced ? std::string(req.matches[1]) : std::string();
    };
    auto name_of = [kind](const httplib::Request& req) {
      return std::string(req.matches[kind->namespaced ? 2 : 1]);
    };
    if (kind->namespaced) {  // every namespace at once
      server.Get(kind->base + "/" + kind->resource,
                 [this, kind](const httplib::Request& req, httplib::Response& res) {
                   ServeCollection(*kind, "", req, res);
                 });
    }
    server.Get(collection,
               [this, kind, ns_of](const httplib::Request& req, httplib::Response& res) {
                 ServeCollection(*kind, ns_of(req), req, res);
               });
    server.Post(collection,
                [this, kind, ns_of](const httplib::Request& req, httplib::Response& res) {
                  if (const auto body = Body(req, res)) {
                    const Result result = DoCreate(*kind, ns_of(req), *body);
                    Reply(res, result.code, result.body);
                  }
                });
    server.Get(item,
               [this, kind, ns_of, name_of](const httplib::Request& req, httplib::Response& res) {
                 if (const auto object = Get(kind->resource, ns_of(req), name_of(req))) {
                   return Reply(res, 200, *object);
                 }
                 Reply(res, 404, NotFound(kind->resource, name_of(req)));
               });
    server.Put(item,
               [this, kind, ns_of, name_of](const httplib::Request& req, httplib::Response& res) {
                 if (const auto body = Body(req, res)) {
                   const Result result = DoUpdate(*kind, ns_of(req), name_of(req), *body);
                   Reply(res, result.code, result.body);
                 }
               });
    server.Patch(
        item, [this, kind, ns_of, name_of](const httplib::Request& req, httplib::Response& res) {
          std::string type = req.get_header_value("Content-Type");
          type = type.substr(0, type.find(';'));
          if (type != "application/merge-patch+json") {
            return Reply(res, 415,
                         Status(415, "UnsupportedMediaType",
                                "the body of the request was in an unknown format - accepted media "
                                "types include: application/merge-patch+json"));
          }
          if (const auto body = Body(req, res)) {
            const Result result = DoPatch(*kind, ns_of(req), name_of(req), *body);
            Reply(res, result.code, result.body);
          }
        });
    // gracePeriodSeconds and a DeleteOptions body are accepted and ignored: deletion is at once.
    server.Delete(
        item, [this, kind, ns_of, name_of](const httplib::Request& req, httplib::Response& res) {
          const Result result = DoDelete(*kind, ns_of(req), name_of(req));
          Reply(res, result.code, result.body);
        });
  }
  server.Post("/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (const auto body = Body(req, res)) {
                  const Result result = DoBind(req.matches[1], req.matches[2], *body);
                  Reply(res, result.code, result.body);
                }
              });
}

std::string ApiServerStandIn::Start(const std::string& token, int port) {
  if (server_) throw std::logic_error("ApiServerStandIn::Start called twice");
  token_ = token;
  server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *server_;
  // Each watch holds a worker for as long as it is open.
  server.new_task_queue = [] { return new httplib::ThreadPool(64); };
  server.set_payload_max_length(kMaxRequestBytes);
  // Without it, Nagle and delayed ACKs hold each small reply for 40 ms.
  server.set_tcp_nodelay(true);
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard lock(mu_);
      ++requests_[req.method + " " + req.path];
    }
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      Reply(res, 401, Status(401, "Unauthorized", "Unauthorized"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // The library's own errors (no route, body too large) as Status objects too.
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const std::string message = res.status == 404
                                        ? "the server could not find the requested resource"
                                        : "HTTP " + std::to_string(res.status);
        Reply(res, res.status, Status(res.status, ReasonFor(res.status), message));
        return httplib::Server::HandlerResponse::Handled;
      }));
  AddRoutes();
  const int bound = port == 0 ? server.bind_to_any_port("127.0.0.1")
                              : (server.bind_to_port("127.0.0.1", port) ? port : -1);
  if (bound < 0) throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port));
  thread_ = std::thread([&server] { server.listen_after_bind(); });
  // A stop() before the accept loop runs would be lost, and Stop() would wait forever.
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return "http://127.0.0.1:" + std::to_string(bound);
}

void ApiServerStandIn::Stop() {
  if (!server_) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    changed_.notify_all();
  }
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace berth::testing
