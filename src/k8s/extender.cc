#include "k8s/extender.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <stdexcept>

#include "config/placement_json.h"
#include "k8s/gpu_ids_signature.h"

namespace berth {
namespace {

using nlohmann::json;

// kube-scheduler sends the Go field names (no json tags) and decodes case-insensitively, so a
// member is looked up ignoring case.
const json* Arg(const json& args, const std::string& key) {
  if (!args.is_object()) return nullptr;
  for (auto it = args.begin(); it != args.end(); ++it) {
    const std::string& name = it.key();
    if (name.size() == key.size() &&
        std::equal(name.begin(), name.end(), key.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        }))
      return it->is_null() ? nullptr : &*it;
  }
  return nullptr;
}

std::string ArgText(const json& args, const std::string& key) {
  const json* value = Arg(args, key);
  return value != nullptr && value->is_string() &&
                 value->get_ref<const std::string&>().size() <= 253
             ? value->get<std::string>()
             : "";
}

// The nodes of a request: NodeNames (nodeCacheCapable) or the names of Nodes.items, whose
// objects are kept to be answered in kind.
bool RequestNodes(const json& args, FilterRequest* request, std::string* why) {
  std::vector<std::string>* names = &request->names;
  std::vector<const json*>* objects = &request->objects;
  if (const json* list = Arg(args, "NodeNames"); list != nullptr) {
    request->node_names = true;
    if (!list->is_array() || list->size() > static_cast<size_t>(kMaxK8sNodes)) {
      *why = "ExtenderArgs.NodeNames: expected a list of at most " + std::to_string(kMaxK8sNodes) +
             " node names";
      return false;
    }
    for (const json& name : *list) {
      if (!name.is_string()) {
        *why = "ExtenderArgs.NodeNames: expected strings";
        return false;
      }
      names->push_back(name.get<std::string>());
    }
    return true;
  }
  const json* nodes = Arg(args, "Nodes");
  if (nodes == nullptr) return true;  // no nodes: nothing passes
  const json* items = nodes->is_object() ? Arg(*nodes, "items") : nullptr;
  if (items == nullptr) return true;
  if (!items->is_array() || items->size() > static_cast<size_t>(kMaxK8sNodes)) {
    *why = "ExtenderArgs.Nodes.items: expected a list of at most " + std::to_string(kMaxK8sNodes) +
           " nodes";
    return false;
  }
  for (const json& node : *items) {
    const json* meta = node.is_object() ? Arg(node, "metadata") : nullptr;
    const std::string name = meta == nullptr ? "" : ArgText(*meta, "name");
    if (name.empty()) {
      *why = "ExtenderArgs.Nodes.items[].metadata.name: expected every node's name";
      return false;
    }
    names->push_back(name);
    objects->push_back(&node);
  }
  return true;
}

// `text` as a JSON string, appended. Request strings were valid UTF-8 when parsed; other bytes
// pass through (the engine's reasons are ASCII).
void AppendString(std::string* out, const std::string& text) {
  out->push_back('"');
  size_t plain = 0;  // the common case, a name without anything to escape, is appended whole
  while (plain < text.size() && text[plain] != '"' && text[plain] != '\\' &&
         static_cast<unsigned char>(text[plain]) >= 0x20)
    ++plain;
  out->append(text, 0, plain);
  for (size_t i = plain; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      *out += escaped;
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// ExtenderFilterResult for `answer`, written directly: with thousands of nodes a JSON object
// per failed node would cost more than the decision.
std::string WriteFilterResult(const FilterRequest& request, const FilterAnswer& answer) {
  std::string out;
  out.reserve(64 + request.names.size() * (24 + answer.reason.size()));
  const auto passes = [&](size_t i) {
    return answer.error.empty() &&
           (answer.pass == FilterAnswer::Pass::kAll ||
            (answer.pass == FilterAnswer::Pass::kOne && request.names[i] == answer.node));
  };
  // Answer in the request's form: NodeNames to a nodeCacheCapable scheduler, Nodes otherwise.
  const bool nodes_mode = !request.node_names && !request.objects.empty();
  std::string passed = "[";
  for (size_t i = 0; i < request.names.size(); ++i) {
    if (!passes(i)) continue;
    if (passed.size() > 1) passed.push_back(',');
    if (nodes_mode) {
      passed += request.objects[i]->dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      AppendString(&passed, request.names[i]);
    }
  }
  passed.push_back(']');
  if (!answer.error.empty()) {
    out = "{\"Nodes\":null,\"NodeNames\":null";
  } else if (nodes_mode) {
    out = "{\"Nodes\":{\"apiVersion\":\"v1\",\"kind\":\"NodeList\",\"items\":" + passed +
          "},\"NodeNames\":null";
  } else {
    out = "{\"Nodes\":null,\"NodeNames\":" + passed;
  }
  for (const bool unresolvable : {false, true}) {
    out += unresolvable ? ",\"FailedAndUnresolvableNodes\":{" : ",\"FailedNodes\":{";
    bool first = true;
    if (answer.error.empty() && answer.unresolvable == unresolvable)
      for (size_t i = 0; i < request.names.size(); ++i) {
        if (passes(i)) continue;
        if (!first) out.push_back(',');
        first = false;
        AppendString(&out, request.names[i]);
        out.push_back(':');
        AppendString(&out, answer.reason);
      }
    out.push_back('}');
  }
  out += ",\"Error\":";
  AppendString(&out, answer.error);
  out.push_back('}');
  return out;
}

std::string NodeName(const json& node) {
  const json* meta = Arg(node, "metadata");
  return meta == nullptr ? "" : ArgText(*meta, "name");
}

std::string Signature(const json& node) {
  json shape = json::object();
  if (const json* meta = Arg(node, "metadata"); meta != nullptr) {
    if (const json* labels = Arg(*meta, "labels")) shape["labels"] = *labels;
  }
  if (const json* status = Arg(node, "status"); status != nullptr) {
    if (const json* allocatable = Arg(*status, "allocatable")) shape["allocatable"] = *allocatable;
  }
  return shape.dump();
}

}  // namespace

Extender::Extender(ExtenderOptions options, KubeActions* actions)
    : options_(std::move(options)), actions_(actions) {
  const bool has_default = std::any_of(options_.queues.begin(), options_.queues.end(),
                                       [](const QueueSpec& q) { return q.name == "default"; });
  if (!has_default) options_.queues.push_back({"default", 1, -1, {}});
}

Extender::~Extender() = default;

void Extender::Run(Actions& actions) {
  for (auto& action : actions) action();
  actions.clear();
}

void Extender::SetNodes(const std::vector<json>& objects) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, K8sNode> nodes;
    std::map<std::string, std::string> signatures;
    std::vector<GpuModel> models = models_;
    unreadable_nodes_.clear();
    for (const json& object : objects) {
      if (nodes.size() >= static_cast<size_t>(kMaxK8sNodes)) break;
      K8sNode node;
      std::string why;
      if (!ReadK8sNode(object, options_.declared, &models, &node, &why)) {
        unreadable_nodes_.insert(NodeName(object));
        continue;
      }
      signatures[node.node.name] = Signature(object);
      nodes[node.node.name] = std::move(node);
    }
    InstallNodes(std::move(nodes), std::move(signatures), std::move(models), &actions);
  }
  Run(actions);
}

void Extender::NodeChanged(const json& object) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<GpuModel> models = models_;
    K8sNode node;
    std::string why;
    const std::string name = NodeName(object);
    if (!ReadK8sNode(object, options_.declared, &models, &node, &why)) {
      unreadable_nodes_.insert(name);
      return;
    }
    unreadable_nodes_.erase(name);
    const std::string signature = Signature(object);
    const auto known = node_signatures_.find(name);
    const auto old = nodes_.find(name);
    if (engine_ != nullptr && known != node_signatures_.end() && known->second == signature &&
        old != nodes_.end()) {
      // The usual event (status, conditions, a cordon): no rebuild, no other node read again.
      const bool was_closed = old->second.unschedulable || !old->second.ready;
      const bool closed = node.unschedulable || !node.ready;
      old->second.unschedulable = node.unschedulable;
      old->second.ready = node.ready;
      old->second.gpu_uuids = node.gpu_uuids;
      if (closed != was_closed)
        Apply(engine_->SetNodeCordoned(cluster_->FindNode(name), closed, Now()), &actions);
    } else {
      std::map<std::string, K8sNode> nodes = nodes_;
      std::map<std::string, std::string> signatures = node_signatures_;
      nodes[name] = std::move(node);
      signatures[name] = signature;
      InstallNodes(std::move(nodes), std::move(signatures), std::move(models), &actions);
    }
  }
  Run(actions);
}

void Extender::NodeDeleted(const std::string& name) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    unreadable_nodes_.erase(name);
    if (nodes_.count(name) == 0) return;
    std::map<std::string, K8sNode> nodes = nodes_;
    std::map<std::string, std::string> signatures = node_signatures_;
    nodes.erase(name);
    signatures.erase(name);
    InstallNodes(std::move(nodes), std::move(signatures), models_, &actions);
  }
  Run(actions);
}

void Extender::InstallNodes(std::map<std::string, K8sNode> nodes,
                            std::map<std::string, std::string> signatures,
                            std::vector<GpuModel> models, Actions* actions) {
  const bool reshaped = signatures != node_signatures_ || engine_ == nullptr;
  bool rebuilt = false;
  if (reshaped) {
    auto cluster = std::make_unique<Cluster>();
    std::string why = BuildK8sCluster(nodes, models, cluster.get());
    if (why.empty() && engine_ == nullptr) {
      auto engine = std::make_unique<Scheduler>(cluster.get(), options_.queues, options_.policy);
      why = engine->error();
      if (why.empty()) engine_ = std::move(engine);
    } else if (why.empty()) {
      why = engine_->SetCluster(cluster.get(), Now());
    }
    counts_.cluster_error = why;
    if (why.empty()) {
      previous_cluster_ = std::move(cluster_);
      cluster_ = std::move(cluster);
      models_ = std::move(models);
      node_signatures_ = std::move(signatures);
      rebuilt = true;
    }
  }
  if (cluster_ == nullptr) return;
  // Cordons and readiness follow without a rebuild, and even when a new node list is refused;
  // a node that is not ready takes no new pods, and its pods are left to Kubernetes' eviction.
  for (size_t n = 0; n < cluster_->nodes.size(); ++n) {
    const auto it = nodes.find(cluster_->nodes[n].name);
    if (it == nodes.end()) continue;
    const bool closed = it->second.unschedulable || !it->second.ready;
    const auto old = nodes_.find(it->first);
    const bool was_closed =
        old != nodes_.end() && (old->second.unschedulable || !old->second.ready);
    if (closed != was_closed || (rebuilt && closed))
      Apply(engine_->SetNodeCordoned(static_cast<int>(n), closed, Now()), actions);
  }
  if (!reshaped || rebuilt) {
    nodes_ = std::move(nodes);
    // Pods bound on a node berth could not read before are adopted now that it can.
    if (rebuilt && synced_) AdoptBound(actions);
  } else {
    for (const auto& [name, node] : nodes)
      if (const auto old = nodes_.find(name); old != nodes_.end()) {
        old->second.unschedulable = node.unschedulable;
        old->second.ready = node.ready;
      }
  }
}

void Extender::PodGroupChanged(const json& group) {
  std::lock_guard<std::mutex> lock(mu_);
  const json* meta = Arg(group, "metadata");
  const json* spec = Arg(group, "spec");
  if (meta == nullptr || spec == nullptr) return;
  const json* min_member = Arg(*spec, "minMember");
  if (min_member == nullptr || !min_member->is_number_integer()) return;
  std::string ns = ArgText(*meta, "namespace");
  if (ns.empty()) ns = "default";
  const int64_t size = min_member->get<int64_t>();
  if (size < 1 || size > kMaxGangSize) return;
  const std::string key = ns + "/" + ArgText(*meta, "name");
  group_sizes_[key] = static_cast<int>(size);
  if (const auto it = gangs_.find(key); it != gangs_.end() && it->second.size == 0)
    it->second.size = static_cast<int>(size);
}

void Extender::PodChanged(const json& object) {
  Pod pod;
  std::string why;
  const bool readable = ReadPod(object, &pod, &why);
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const json* meta = Arg(object, "metadata");
    const std::string uid = meta == nullptr ? "" : ArgText(*meta, "uid");
    // A pod berth knows keeps its entry (and its GPUs) while one of its versions is unreadable.
    if (!readable) {
      if (!uid.empty() && unreadable_pods_.size() < static_cast<size_t>(kMaxK8sNodes))
        unreadable_pods_.insert(uid);
      return;
    }
    unreadable_pods_.erase(uid);
    SeePod(pod, &actions);
  }
  Run(actions);
}

void Extender::PodDeleted(const json& object) {
  // By UID alone: a deleted pod frees its GPUs whatever else its last version holds.
  const json* meta = Arg(object, "metadata");
  const std::string uid = meta == nullptr ? "" : ArgText(*meta, "uid");
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    unreadable_pods_.erase(uid);
    ForgetPod(uid, &actions);
  }
  Run(actions);
}

void Extender::SeePod(const Pod& pod, Actions* actions) {
  if (!pod.wants_gpus) return;
  const bool ended = pod.phase == "Succeeded" || pod.phase == "Failed";
  auto it = pods_.find(pod.uid);
  if (it == pods_.end()) {
    if (ended) return;
    it = pods_.emplace(pod.uid, PodEntry{}).first;
    it->second.pod = pod;
    if (!pod.gang.empty()) {
      Gang& gang = gangs_[pod.gang];
      gang.members.push_back(pod.uid);
      if (pod.gang_size > 0) gang.size = pod.gang_size;
      if (gang.size == 0)
        if (const auto size = group_sizes_.find(pod.gang); size != group_sizes_.end())
          gang.size = size->second;
    }
  } else {
    const int job = it->second.job, replica = it->second.replica;
    const bool bind_sent = it->second.bind_sent;
    it->second.pod = pod;
    it->second.job = job;
    it->second.replica = replica;
    it->second.bind_sent = bind_sent || !pod.node.empty();
  }
  if (ended) {
    ForgetPod(pod.uid, actions);
  } else if (synced_ && !pod.node.empty() && it->second.job < 0) {
    AdoptBound(actions);  // bound while berth could not hold it (a node not readable then)
  }
}

void Extender::ForgetPod(const std::string& uid, Actions* actions) {
  const auto it = pods_.find(uid);
  if (it == pods_.end() || it->second.gone) return;
  PodEntry& entry = it->second;
  entry.gone = true;
  const std::string gang = entry.pod.gang;
  const int job = entry.job;
  if (job < 0) {
    if (!gang.empty()) {
      auto& members = gangs_[gang].members;
      members.erase(std::remove(members.begin(), members.end(), uid), members.end());
      if (members.empty()) gangs_.erase(gang);
    }
    pods_.erase(it);
    return;
  }
  const JobRecord* record = engine_ == nullptr ? nullptr : engine_->job(job);
  const std::vector<std::string>& members = job_pods_[job];
  const bool all_gone = std::all_of(members.begin(), members.end(), [&](const std::string& m) {
    const auto p = pods_.find(m);
    return p == pods_.end() || p->second.gone;
  });
  // A gang not started yet cannot start without this member: it is taken apart, and forms
  // again when the member is replaced.
  if (all_gone || (record != nullptr && record->state == JobState::kPending)) JobGone(job, actions);
}

void Extender::JobGone(int job, Actions* actions) {
  const JobRecord* record = engine_->job(job);
  // Finished, not Stopped: a stopped mover would be started again on its destination. Finish
  // wakes a stopping job's preemptor, which the cycle below starts.
  if (record != nullptr && record->state != JobState::kDone)
    engine_->Finish(job, Now(), JobEnd::kCancelled);
  std::string gang;
  for (const std::string& uid : job_pods_[job]) {
    const auto p = pods_.find(uid);
    if (p == pods_.end()) continue;
    gang = p->second.pod.gang;
    if (p->second.gone) {
      pods_.erase(p);
    } else {
      p->second.job = -1;  // waits for its gang to form again
      p->second.replica = -1;
    }
  }
  job_pods_.erase(job);
  if (!gang.empty()) {
    Gang& g = gangs_[gang];
    g.members.erase(std::remove_if(g.members.begin(), g.members.end(),
                                   [&](const std::string& m) { return pods_.count(m) == 0; }),
                    g.members.end());
    if (g.members.empty()) gangs_.erase(gang);
  }
  // What it freed may start others, a woken preemptor first.
  Apply(engine_->Schedule(Now()), actions);
}

void Extender::SubmitIfReady(PodEntry& entry) {
  std::vector<std::string> members = {entry.pod.uid};
  JobSpec spec = entry.pod.spec;
  if (!entry.pod.gang.empty()) {
    // The members not placed yet make up what the gang lacks (all of it, or what a restart or a
    // replaced member left out), placed together as one job.
    const Gang& gang = gangs_[entry.pod.gang];
    const int need = gang.size - GangPlaced(gang);
    std::vector<std::string> waiting;
    for (const std::string& uid : gang.members)
      if (const PodEntry& m = pods_.at(uid); !m.gone && m.job < 0) waiting.push_back(uid);
    if (gang.size == 0 || need <= 0 || static_cast<int>(waiting.size()) < need) return;
    members.assign(waiting.begin(), waiting.begin() + need);
    if (std::find(members.begin(), members.end(), entry.pod.uid) == members.end()) return;
    spec = pods_.at(members.front()).pod.spec;
    // One job holds the gang: its members must ask for the same, or none would be placed right.
    for (const std::string& uid : members) {
      const JobSpec& other = pods_.at(uid).pod.spec;
      if (other.groups[0].demand == spec.groups[0].demand && other.queue == spec.queue &&
          other.priority == spec.priority)
        continue;
      entry.refused = "gang " + entry.pod.gang + ": pod " + pods_.at(uid).pod.name +
                      " asks for other resources, queue or priority than pod " +
                      pods_.at(members.front()).pod.name +
                      "; every member of a gang must ask for the same";
      return;
    }
    spec.name = entry.pod.gang;
    spec.groups[0].name = entry.pod.gang.substr(entry.pod.gang.find('/') + 1);
    spec.groups[0].replicas = need;
  }
  std::string why;
  const int job = engine_->Submit(spec, Now(), &why);
  if (job < 0) {
    entry.refused = why;
    return;
  }
  engine_->SetExternalId(job, entry.pod.gang.empty() ? entry.pod.uid : entry.pod.gang);
  for (size_t r = 0; r < members.size(); ++r) {
    PodEntry& member = pods_.at(members[r]);
    member.job = job;
    member.replica = static_cast<int>(r);
  }
  job_pods_[job] = members;
}

int Extender::GangPlaced(const Gang& gang) const {
  int placed = 0;
  for (const std::string& uid : gang.members)
    if (const PodEntry& m = pods_.at(uid); !m.gone && m.job >= 0) ++placed;
  return placed;
}

void Extender::Apply(const std::vector<Decision>& decisions, Actions* actions) {
  for (const Decision& d : decisions) {
    if (d.kind != Decision::Kind::kPreempt && d.kind != Decision::Kind::kEvict &&
        d.kind != Decision::Kind::kKill && d.kind != Decision::Kind::kShrink)
      continue;
    // The engine's stop decisions are carried out by deleting the pods; the watch's DELETED
    // events then tell the engine they stopped.
    const auto members = job_pods_.find(d.job);
    if (members == job_pods_.end()) continue;
    for (const std::string& uid : members->second) {
      const auto p = pods_.find(uid);
      if (p == pods_.end() || p->second.gone) continue;
      const std::string ns = p->second.pod.ns, name = p->second.pod.name;
      const double grace = d.kind == Decision::Kind::kPreempt ? d.grace_period_s
                           : d.kind == Decision::Kind::kKill  ? 0
                                                              : p->second.pod.spec.grace_period_s;
      KubeActions* kube = actions_;
      // A deletion that fails is tried again when the victim's grace ends (kKill).
      actions->push_back([kube, ns, name, grace] {
        if (const std::string failed = kube->DeletePod(ns, name, grace); !failed.empty())
          std::cerr << "berth server: cannot delete pod " << ns << "/" << name
                    << " to preempt it: " << failed << "\n";
      });
    }
  }
}

const ReplicaPlacement* Extender::PlacedAt(const PodEntry& entry) const {
  if (engine_ == nullptr || entry.job < 0) return nullptr;
  const JobRecord* record = engine_->job(entry.job);
  if (record == nullptr || record->state != JobState::kRunning || entry.replica < 0 ||
      entry.replica >= static_cast<int>(record->placements.size()))
    return nullptr;
  return &record->placements[entry.replica];
}

std::vector<std::string> Extender::GpuIdsOf(const ReplicaPlacement& placement) const {
  const std::string& name = cluster_->nodes[placement.node].name;
  const auto node = nodes_.find(name);
  std::vector<std::string> ids;
  for (int g : placement.gpus) {
    const bool named = node != nodes_.end() && g < static_cast<int>(node->second.gpu_uuids.size());
    ids.push_back(named ? node->second.gpu_uuids[g] : std::to_string(g));
  }
  return ids;
}

std::string Extender::Filter(const json& args) {
  FilterRequest request;
  FilterAnswer answer;
  Pod pod;
  // The request is read before the lock: thousands of node names cost no one else's wait.
  if (!args.is_object()) {
    answer.error = "ExtenderArgs: expected a JSON object with Pod and NodeNames or Nodes";
  } else if (const json* pod_json = Arg(args, "Pod"); pod_json == nullptr) {
    answer.error = "ExtenderArgs.Pod: missing; kube-scheduler sends the pod being scheduled";
  } else if (RequestNodes(args, &request, &answer.error) &&
             ReadPod(*pod_json, &pod, &answer.error)) {
    answer.error.clear();
  }
  Actions actions;
  if (answer.error.empty() && !pod.wants_gpus) {
    answer.pass = FilterAnswer::Pass::kAll;  // not berth's to place
  } else if (answer.error.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    answer = FilterLocked(pod, request, &actions);
  }
  Run(actions);
  return WriteFilterResult(request, answer);
}

FilterAnswer Extender::FilterLocked(const Pod& pod, const FilterRequest& request,
                                    Actions* actions) {
  const auto fail = [](std::string reason, bool unresolvable = false) {
    FilterAnswer answer;
    answer.reason = std::move(reason);
    answer.unresolvable = unresolvable;
    return answer;
  };
  if (engine_ == nullptr)
    return fail("berth has no nodes yet (" +
                (counts_.cluster_error.empty() ? "none listed" : counts_.cluster_error) + ")");
  // Only pods the API server holds are placed: a request cannot make berth hold GPUs for a pod
  // that does not exist, and berth's memory grows with the cluster's pods, not with requests.
  const auto it = pods_.find(pod.uid);
  if (it == pods_.end() || it->second.gone)
    return fail(
        "berth's watch of the API server has not shown this pod (yet); kube-scheduler retries "
        "it");
  PodEntry& entry = it->second;
  if (entry.job < 0) SubmitIfReady(entry);
  if (entry.job < 0) {
    if (!entry.refused.empty()) return fail("berth refuses the pod: " + entry.refused, true);
    const Gang& gang = gangs_[pod.gang];
    int ahead = 0;  // members not placed yet that came before this pod
    for (const std::string& uid : gang.members) {
      if (uid == pod.uid) break;
      if (const PodEntry& m = pods_.at(uid); !m.gone && m.job < 0) ++ahead;
    }
    if (gang.size > 0 && GangPlaced(gang) + ahead >= gang.size)
      return fail("gang " + pod.gang + " has its " + std::to_string(gang.size) +
                  " members already; this pod waits for one of them to leave");
    const std::string size = gang.size > 0 ? std::to_string(gang.size) : "? (PodGroup not seen)";
    return fail("waiting for gang " + pod.gang + ": " + std::to_string(gang.members.size()) +
                " of " + size + " members");
  }
  const JobRecord* record = engine_->job(entry.job);
  if (record != nullptr && record->state == JobState::kPending)
    Apply(engine_->Schedule(Now()), actions);
  record = engine_->job(entry.job);
  if (const ReplicaPlacement* placed = PlacedAt(entry)) {
    const std::string& node = cluster_->nodes[placed->node].name;
    if (std::find(request.names.begin(), request.names.end(), node) == request.names.end()) {
      // kube-scheduler's own filters (taints, affinity, resources of pods berth does not place)
      // refused berth's node. Unless part of the job is bound already, its GPUs go back and the
      // job is placed again after a back-off, rather than held for a binding that cannot come.
      const std::vector<std::string>& members = job_pods_[entry.job];
      const bool any_bound = std::any_of(members.begin(), members.end(), [&](const auto& uid) {
        const auto p = pods_.find(uid);
        return p != pods_.end() && p->second.bind_sent;
      });
      const std::string why =
          "berth placed the pod on " + node + ", which kube-scheduler's own filters did not offer";
      if (any_bound || !PlaceAmong(entry.job, request.names, why)) return fail(why);
      return FilterLocked(pod, request, actions);
    }
    FilterAnswer answer = fail("berth placed the pod on " + node);
    answer.pass = FilterAnswer::Pass::kOne;
    answer.node = node;
    return answer;
  }
  if (record == nullptr) return fail("the pod's job ended", true);
  if (!record->never_fits.empty()) return fail(record->never_fits, true);
  return fail(record->reason.empty() ? "pending" : record->reason);
}

bool Extender::PlaceAmong(int job, const std::vector<std::string>& names, const std::string& why) {
  // Each candidate costs a trial placement: enough of the offered nodes to find room, not all
  // of thousands.
  constexpr size_t kMostTried = 100;
  std::vector<int> offered;
  for (const std::string& name : names) {
    if (offered.size() == kMostTried) break;
    if (const int n = cluster_->FindNode(name); n >= 0) offered.push_back(n);
  }
  engine_->StartFailed(job, Now(), why);
  const JobRecord* record = engine_->job(job);
  if (record == nullptr) return false;
  const std::vector<NodeVerdict> verdicts = engine_->Evaluate(record->spec, offered);
  const NodeVerdict* best = nullptr;
  for (const NodeVerdict& v : verdicts)
    if (v.feasible && (best == nullptr || v.score > best->score)) best = &v;
  std::string refused;
  return best != nullptr && engine_->StartAt(job, best->placements, Now(), &refused);
}

std::string Extender::Prioritize(const json& args) {
  FilterRequest request;
  std::string why;
  if (!args.is_object() || !RequestNodes(args, &request, &why))
    throw std::invalid_argument(why.empty() ? "ExtenderArgs: expected a JSON object" : why);
  const json* pod_json = Arg(args, "Pod");
  const json* meta = pod_json == nullptr ? nullptr : Arg(*pod_json, "metadata");
  const std::string uid = meta == nullptr ? "" : ArgText(*meta, "uid");
  if (uid.empty()) throw std::invalid_argument("ExtenderArgs.Pod.metadata.uid: missing");
  std::string chosen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto it = pods_.find(uid); it != pods_.end())
      if (const ReplicaPlacement* placed = PlacedAt(it->second))
        chosen = cluster_->nodes[placed->node].name;
  }
  // HostPriorityList, written directly (one object per node would cost more than the answer).
  std::string out = "[";
  out.reserve(32 * request.names.size());
  for (const std::string& name : request.names) {
    if (out.size() > 1) out.push_back(',');
    out += "{\"Host\":";
    AppendString(&out, name);
    out += name == chosen ? ",\"Score\":10}" : ",\"Score\":0}";
  }
  out.push_back(']');
  return out;
}

json Extender::Preempt(const json& args) {
  if (!args.is_object()) throw std::invalid_argument("ExtenderPreemptionArgs: expected an object");
  const json* pod_json = Arg(args, "Pod");
  Pod pod;
  std::string why;
  if (pod_json == nullptr || !ReadPod(*pod_json, &pod, &why))
    throw std::invalid_argument(pod_json == nullptr ? "ExtenderPreemptionArgs.Pod: missing" : why);
  const std::string uid = pod.uid;
  json victims = json::object();
  // A pod that is not berth's to place keeps kube-scheduler's own choice of victims, as UIDs.
  if (!pod.wants_gpus) {
    if (const json* meta_victims = Arg(args, "NodeNameToMetaVictims");
        meta_victims != nullptr && meta_victims->is_object())
      return {{"NodeNameToMetaVictims", *meta_victims}};
    if (const json* full = Arg(args, "NodeNameToVictims"); full != nullptr && full->is_object())
      for (const auto& [node, list] : full->items()) {
        json& out = victims[node];
        out = {{"Pods", json::array()}, {"NumPDBViolations", 0}};
        if (const json* pods = Arg(list, "Pods"); pods != nullptr && pods->is_array())
          for (const json& victim : *pods)
            if (const json* meta = Arg(victim, "metadata"); meta != nullptr)
              out["Pods"].push_back({{"UID", ArgText(*meta, "uid")}});
        if (const json* pdb = Arg(list, "NumPDBViolations"); pdb != nullptr && pdb->is_number())
          out["NumPDBViolations"] = *pdb;
      }
    return {{"NodeNameToMetaVictims", victims}};
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = pods_.find(uid);
  const JobRecord* record = it == pods_.end() || it->second.job < 0 || engine_ == nullptr
                                ? nullptr
                                : engine_->job(it->second.job);
  if (record != nullptr && record->preempting) {
    for (int victim : record->waiting_for) {
      const auto members = job_pods_.find(victim);
      if (members == job_pods_.end()) continue;
      for (const std::string& member : members->second) {
        const auto p = pods_.find(member);
        if (p == pods_.end() || p->second.gone || p->second.pod.node.empty()) continue;
        json& node = victims[p->second.pod.node];
        if (node.is_null()) node = {{"Pods", json::array()}, {"NumPDBViolations", 0}};
        node["Pods"].push_back({{"UID", member}});
      }
    }
  }
  return {{"NodeNameToMetaVictims", victims}};
}

json Extender::Bind(const json& args) {
  const std::string ns = ArgText(args, "PodNamespace"), name = ArgText(args, "PodName"),
                    uid = ArgText(args, "PodUID"), node = ArgText(args, "Node");
  if (name.empty() || node.empty())
    return {{"Error", "ExtenderBindingArgs: PodName and Node are required"}};
  std::map<std::string, std::string> annotations;
  std::string known;  // the UID of the GPU pod berth binds
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_.find(uid);
    // The name decides which pod the API server binds: a GPU pod berth knows by that name is
    // bound only as berth placed it, whatever UID the request gives.
    if (it == pods_.end())
      it = std::find_if(pods_.begin(), pods_.end(), [&](const auto& entry) {
        return !entry.second.gone && entry.second.pod.name == name &&
               entry.second.pod.ns == (ns.empty() ? "default" : ns);
      });
    if (it != pods_.end() && !uid.empty() && it->first != uid)
      return {{"Error", "PodUID " + uid + " is not the UID of pod " + ns + "/" + name}};
    if (it != pods_.end()) {
      known = it->first;
      const ReplicaPlacement* placed = PlacedAt(it->second);
      if (placed == nullptr)
        return {{"Error", "berth has not placed pod " + ns + "/" + name + " (filter it first)"}};
      const std::string& chosen = cluster_->nodes[placed->node].name;
      if (chosen != node)
        return {
            {"Error", "berth placed pod " + ns + "/" + name + " on " + chosen + ", not " + node}};
      std::string ids;
      for (const std::string& id : GpuIdsOf(*placed)) ids += (ids.empty() ? "" : ",") + id;
      annotations[kGpuIdsAnnotation] = ids;
      if (!options_.signing_key.empty())
        annotations[kGpuIdsSignatureAnnotation] =
            SignGpuIds(options_.signing_key, it->first, node, ids);
      annotations[kPlacementAnnotation] = ReplicaPlacementJson(*cluster_, *placed).dump();
      annotations[kBorrowedAnnotation] = engine_->job(it->second.job)->borrowed ? "true" : "false";
    }
    // A pod berth does not know asks for no GPUs: it is bound where kube-scheduler chose.
  }
  const std::string failed = actions_->Bind(ns.empty() ? "default" : ns, name, node, annotations);
  if (!failed.empty()) return {{"Error", failed}};
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = pods_.find(known); it != pods_.end()) it->second.bind_sent = true;
  return {{"Error", ""}};
}

void Extender::Resync() {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_ = true;
    AdoptBound(&actions);
  }
  Run(actions);
}

void Extender::AdoptBound(Actions* actions) {
  if (engine_ == nullptr) return;
  // Bound pods berth placed, by gang (a pod alone is its own group), guaranteed work first:
  // the allocator binds guarantee cells as it adopts. Pods bound by another scheduler follow.
  std::map<std::string, std::vector<std::string>> groups;
  std::vector<std::string> foreign;
  for (const auto& [uid, entry] : pods_) {
    if (entry.job >= 0 || entry.pod.node.empty() || entry.gone) continue;
    if (entry.pod.placement.empty()) {
      foreign.push_back(uid);
    } else {
      groups[entry.pod.gang.empty() ? uid : entry.pod.gang].push_back(uid);
    }
  }
  const double now = Now();
  const auto adopted = [&](int job, const std::vector<std::string>& members) {
    for (size_t r = 0; r < members.size(); ++r) {
      PodEntry& member = pods_.at(members[r]);
      member.job = job;
      member.replica = static_cast<int>(r);
      member.bind_sent = true;
    }
    job_pods_[job] = members;
  };
  for (const bool borrowed : {false, true}) {
    for (const auto& [key, members] : groups) {
      const Pod& first = pods_.at(members.front()).pod;
      if (first.borrowed != borrowed) continue;
      std::vector<ReplicaPlacement> placements(members.size());
      bool readable = true;
      for (size_t r = 0; r < members.size() && readable; ++r)
        readable = ReadReplicaPlacement(
            *cluster_, json::parse(pods_.at(members[r]).pod.placement, nullptr, false),
            &placements[r]);
      // A node berth cannot read now: adopted once it can (SetNodes and later events retry).
      if (!readable) continue;
      JobSpec spec = first.spec;
      if (!first.gang.empty()) {
        spec.name = first.gang;
        spec.groups[0].replicas = static_cast<int>(members.size());
      }
      std::string why;
      const double since = first.created > 0 ? std::min(first.created, now) : now;
      const int job = engine_->Adopt(spec, placements, borrowed, since, since, &why);
      if (job < 0) continue;
      engine_->SetExternalId(job, key);
      adopted(job, members);
    }
  }
  // A GPU pod another scheduler bound holds GPUs berth cannot name: it holds as many on its
  // node as berth would give it, and berth never preempts it (berth does not own it).
  for (const std::string& uid : foreign) {
    const Pod& pod = pods_.at(uid).pod;
    const int node = cluster_->FindNode(pod.node);
    if (node < 0) continue;
    JobSpec spec = pod.spec;
    spec.preemptible = false;
    std::string why;
    const int job = engine_->Submit(spec, now, &why);
    if (job < 0) continue;
    const std::vector<NodeVerdict> verdicts = engine_->Evaluate(spec, {node});
    if (verdicts.empty() || !verdicts[0].feasible ||
        !engine_->StartAt(job, verdicts[0].placements, now, &why)) {
      engine_->Finish(job, now, JobEnd::kCancelled);
      continue;
    }
    engine_->SetExternalId(job, uid);
    adopted(job, {uid});
  }
  Apply(engine_->Schedule(now), actions);
}

Extender::Status Extender::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  Status status = counts_;
  status.unreadable_pods = static_cast<int>(unreadable_pods_.size());
  status.unreadable_nodes = static_cast<int>(unreadable_nodes_.size());
  status.nodes = cluster_ == nullptr ? 0 : static_cast<int>(cluster_->nodes.size());
  status.gpus = cluster_ == nullptr ? 0 : cluster_->gpu_count();
  for (const auto& [uid, entry] : pods_) {
    if (entry.gone) continue;
    ++status.pods;
    if (PlacedAt(entry) != nullptr) ++status.placed;
    if (entry.bind_sent) ++status.bound;
    if (PlacedAt(entry) == nullptr) ++status.pending;
  }
  return status;
}

std::pair<std::string, std::vector<std::string>> Extender::PlacementOf(
    const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = pods_.find(uid);
  if (it == pods_.end()) return {};
  const ReplicaPlacement* placed = PlacedAt(it->second);
  if (placed == nullptr) return {};
  return {cluster_->nodes[placed->node].name, GpuIdsOf(*placed)};
}

void Extender::CountRelist() {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.relists;
}

std::string Extender::CheckConsistency() const {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_ == nullptr ? "" : engine_->CheckConsistency();
}

}  // namespace berth
