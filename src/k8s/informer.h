// Keeps the extender in step with the API server: lists nodes, PodGroups and pods, then watches
// each from the list's resourceVersion. A watch that ends is resumed from the last version seen
// (bookmarks included); one answered 410 Gone lists again, and the pods missing from the new list
// are handed over as deleted. Failures back off from 1 s to 30 s, with jitter, so that a restarted
// API server is not met by every extender at once.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "k8s/extender.h"
#include "k8s/kube_client.h"

namespace berth {

class Informers {
 public:
  Informers(KubeClient* client, Extender* extender) : client_(client), extender_(extender) {}
  ~Informers();
  // The first lists, then adoption of bound pods (Extender::Resync). "" or why a list failed.
  std::string Sync();
  // Starts the watches (after Sync), resuming from the versions last seen; they run until Stop.
  void Start();
  void Stop();
  bool synced() const { return synced_; }
  uint64_t relists() const { return relists_; }

 private:
  struct Kind {
    std::string path;
    std::string version;
    std::map<std::string, nlohmann::json> objects;  // pods: by UID, names only (for relists)
  };
  std::string ListPods();
  std::string ListNodes();
  std::string ListGroups();
  void Loop(Kind* kind, std::string (Informers::*relist)(),
            void (Informers::*on_event)(const std::string&, const nlohmann::json&));
  void OnPod(const std::string& type, const nlohmann::json& object);
  void OnNode(const std::string& type, const nlohmann::json& object);
  void OnGroup(const std::string& type, const nlohmann::json& object);

  KubeClient* client_;
  Extender* extender_;
  Kind pods_{"/api/v1/pods", "", {}};
  Kind nodes_{"/api/v1/nodes", "", {}};
  Kind groups_{"/apis/scheduling.x-k8s.io/v1alpha1/podgroups", "", {}};
  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> relists_{0};
  std::vector<std::thread> threads_;
};

}  // namespace berth
