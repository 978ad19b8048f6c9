#include "k8s/informer.h"

#include <chrono>
#include <iostream>
#include <random>
#include <set>

namespace berth {
namespace {

using nlohmann::json;

std::string KeyOf(const json& object, bool by_uid) {
  return MetadataText(object, by_uid ? "uid" : "name");
}

// What a pod missing from a relist needs to be handed over as deleted: its names, not its spec
// (a cluster's pods are kept by UID, so their specs would cost memory for nothing).
json Trimmed(const json& pod) {
  return {{"metadata",
           {{"uid", MetadataText(pod, "uid")},
            {"name", MetadataText(pod, "name")},
            {"namespace", MetadataText(pod, "namespace")}}}};
}

}  // namespace

Informers::~Informers() { Stop(); }

std::string Informers::ListNodes() {
  std::vector<json> items;
  std::string version;
  if (std::string why = client_->List(nodes_.path, &items, &version); !why.empty()) return why;
  extender_->SetNodes(items);
  nodes_.version = version;
  return "";
}

std::string Informers::ListGroups() {
  std::vector<json> items;
  std::string version;
  if (std::string why = client_->List(groups_.path, &items, &version, true); !why.empty())
    return why;
  for (const json& item : items) extender_->PodGroupChanged(item);
  groups_.version = version;
  return "";
}

std::string Informers::ListPods() {
  std::vector<json> items;
  std::string version;
  if (std::string why = client_->List(pods_.path, &items, &version); !why.empty()) return why;
  std::map<std::string, json> listed;
  for (json& item : items) {
    const std::string uid = KeyOf(item, true);
    extender_->PodChanged(item);
    listed[uid] = Trimmed(item);
  }
  // Pods deleted while no watch ran are only missing from the new list.
  for (const auto& [uid, object] : pods_.objects)
    if (listed.count(uid) == 0) extender_->PodDeleted(object);
  pods_.objects = std::move(listed);
  pods_.version = version;
  return "";
}

std::string Informers::Sync() {
  for (auto list : {&Informers::ListNodes, &Informers::ListGroups, &Informers::ListPods})
    if (std::string why = (this->*list)(); !why.empty()) return why;
  extender_->Resync();
  synced_ = true;
  return "";
}

void Informers::OnPod(const std::string& type, const json& object) {
  const std::string uid = KeyOf(object, true);
  if (type == "DELETED") {
    pods_.objects.erase(uid);
    extender_->PodDeleted(object);
  } else {
    pods_.objects[uid] = Trimmed(object);
    extender_->PodChanged(object);
  }
}

void Informers::OnNode(const std::string& type, const json& object) {
  if (type == "DELETED") {
    extender_->NodeDeleted(KeyOf(object, false));
  } else {
    extender_->NodeChanged(object);
  }
}

void Informers::OnGroup(const std::string& type, const json& object) {
  if (type != "DELETED") extender_->PodGroupChanged(object);
}

void Informers::Loop(Kind* kind, std::string (Informers::*relist)(),
                     void (Informers::*on_event)(const std::string&, const json&)) {
  std::mt19937 rng(std::random_device{}());
  double backoff = 1;
  bool list_first = false;
  while (!stop_) {
    std::string why;
    if (list_first) {
      ++relists_;
      extender_->CountRelist();
      why = (this->*relist)();
      list_first = !why.empty();
    }
    if (why.empty())
      why = client_->Watch(
          kind->path, &kind->version, 60,
          [&](const std::string& type, const json& object) { (this->*on_event)(type, object); },
          stop_);
    if (why.empty() || why == KubeClient::kExpired) {
      list_first = why == KubeClient::kExpired;
      backoff = 1;
      continue;
    }
    // A watch that failed (the API server restarted, the network) may have lost events, or the
    // versions may have begun anew: list again before watching.
    list_first = true;
    std::cerr << "berth server: watching " << kind->path << ": " << why << "\n";
    // Back off with jitter: half to all of the current step.
    const double wait = backoff * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
    backoff = std::min(backoff * 2, 30.0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
    while (!stop_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Informers::Start() {
  stop_ = false;
  threads_.emplace_back([this] { Loop(&nodes_, &Informers::ListNodes, &Informers::OnNode); });
  threads_.emplace_back([this] { Loop(&groups_, &Informers::ListGroups, &Informers::OnGroup); });
  threads_.emplace_back([this] { Loop(&pods_, &Informers::ListPods, &Informers::OnPod); });
}

void Informers::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace berth
