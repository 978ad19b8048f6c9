// berth as kube-scheduler's extender: pods become berth jobs in one engine (scheduler.h), so
// cells, queues, fairness, gangs and preemption work on a Kubernetes fleet as on berth's own.
//
// The contract with kube-scheduler (reference-specs 1.1-1.5):
//  - Filter answers at most the one node berth chose for the pod, and never a node that was
//    not in the request. A pod berth has not placed yet is submitted and a scheduling cycle
//    runs; if it is still pending, every node fails with the engine's reason (unresolvable when
//    no node could ever hold it). Gang members are held (no node, "waiting for gang ...") until
//    the whole gang is known, then placed together; each member's filter then answers the node
//    of its replica.
//  - Prioritize gives the chosen node 10, others 0. Bind writes the chosen GPUs onto the pod
//    (berth.io/gpu-ids by UUID when the node publishes them, berth.io/placement for exact
//    recovery) in the Binding itself, and refuses a node that is not berth's choice.
//  - Preemption is berth's: victims its engine picks are deleted through the API server with
//    their grace period; the preempt verb answers those victims still present (and nothing
//    when berth chose none), so kube-scheduler nominates the node berth planned.
//  - The API server is the source of truth. Pods that end or are deleted free their GPUs; pods
//    bound with berth's annotations are adopted where they run, so a restarted extender that
//    lists pods and nodes again holds the state it had. Bad input gets the Error field (filter,
//    bind), or an error the caller turns into a 400 (prioritize, preempt).
//
// Threading: every method locks one mutex; calls to the API server (KubeActions) are made
// after it is released.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/policy.h"
#include "core/scheduler.h"
#include "k8s/node_shape.h"
#include "k8s/pod_job.h"

namespace berth {

// What the extender asks of the API server. Each returns "" or why it failed.
class KubeActions {
 public:
  virtual ~KubeActions() = default;
  // POST pods/{name}/binding with the annotations in the Binding's metadata.
  virtual std::string Bind(const std::string& ns, const std::string& name, const std::string& node,
                           const std::map<std::string, std::string>& annotations) = 0;
  virtual std::string DeletePod(const std::string& ns, const std::string& name,
                                double grace_period_s) = 0;
};

// A filter or prioritize request's nodes: NodeNames (nodeCacheCapable), or the names of
// Nodes.items with the objects, to answer in kind.
struct FilterRequest {
  std::vector<std::string> names;
  std::vector<const nlohmann::json*> objects;  // Nodes mode; point into the request
  bool node_names = false;                     // the request carried NodeNames
};

// A filter's decision before it is written out: which of the request's nodes pass (none, the
// one berth chose, or all for a pod that is not berth's), and why the others fail.
struct FilterAnswer {
  enum class Pass { kNone, kOne, kAll };
  Pass pass = Pass::kNone;
  std::string node;           // kOne
  std::string reason;         // for the nodes that fail
  bool unresolvable = false;  // FailedAndUnresolvableNodes: preemption would not help
  std::string error;          // the request is malformed
};

struct ExtenderOptions {
  Policy policy;
  std::vector<QueueSpec> queues;      // "default" is added when missing
  const Cluster* declared = nullptr;  // topology for nodes of the same name; may be null
  std::function<double()> clock;
  // Signs the berth.io/gpu-ids written at bind (gpu_ids_signature.h); "": unsigned.
  std::string signing_key;
};

class Extender {
 public:
  Extender(ExtenderOptions options, KubeActions* actions);
  ~Extender();

  // The informers' feed. SetNodes takes the whole node list (after a list), NodeChanged and
  // NodeDeleted one watch event; a node whose shape (labels, allocatable) did not change costs
  // no rebuild. Objects that cannot be read are skipped and counted in status().
  void SetNodes(const std::vector<nlohmann::json>& nodes);
  void NodeChanged(const nlohmann::json& node);
  void NodeDeleted(const std::string& name);
  void PodChanged(const nlohmann::json& pod);  // ADDED, MODIFIED, or a listed pod
  void PodDeleted(const nlohmann::json& pod);
  void PodGroupChanged(const nlohmann::json& group);  // scheduling.x-k8s.io PodGroup
  // After the first list of pods: adopts the bound ones, gangs as a whole.
  void Resync();

  // The verbs. Filter and Bind never throw; Prioritize and Preempt throw std::invalid_argument
  // for a malformed request. Filter and Prioritize answer JSON text: with thousands of nodes,
  // writing it directly costs less than building a JSON value.
  std::string Filter(const nlohmann::json& args);
  std::string Prioritize(const nlohmann::json& args);
  nlohmann::json Preempt(const nlohmann::json& args);
  nlohmann::json Bind(const nlohmann::json& args);

  // For /v1/cells-like views, metrics and tests.
  struct Status {
    int nodes = 0, gpus = 0, pods = 0, placed = 0, bound = 0, pending = 0;
    int unreadable_nodes = 0, unreadable_pods = 0;
    uint64_t relists = 0;       // watches resumed too late (410 Gone) and listed again
    std::string cluster_error;  // why the last node list was not taken
  };
  Status status() const;
  void CountRelist();
  // Where berth placed a pod: node and GPU ids; empty when it has not.
  std::pair<std::string, std::vector<std::string>> PlacementOf(const std::string& uid) const;
  std::string CheckConsistency() const;

 private:
  struct PodEntry {
    Pod pod;
    int job = -1;      // engine job, -1: none yet
    int replica = -1;  // its replica in the job
    bool bind_sent = false;
    bool gone = false;    // deleted or ended; kept until its job lets go
    std::string refused;  // why the engine refused its job
  };
  struct Gang {
    int size = 0;                      // 0: not known yet (a PodGroup not seen)
    std::vector<std::string> members;  // UIDs, in the order they came
  };
  using Actions = std::vector<std::function<void()>>;

  // Replaces the nodes: rebuilds the engine's cluster when a shape changed (keeping the old one
  // when the new one is invalid), then applies cordons and readiness.
  void InstallNodes(std::map<std::string, K8sNode> nodes,
                    std::map<std::string, std::string> signatures, std::vector<GpuModel> models,
                    Actions* actions);
  void SeePod(const Pod& pod, Actions* actions);
  void ForgetPod(const std::string& uid, Actions* actions);
  void SubmitIfReady(PodEntry& entry);
  int GangPlaced(const Gang& gang) const;  // members held by a job (placed or bound)
  // Adopts bound pods berth holds no job for: those it placed (berth.io/placement), where they
  // are; those another scheduler bound, on GPUs of their node, never preempted.
  void AdoptBound(Actions* actions);
  void Apply(const std::vector<Decision>& decisions, Actions* actions);
  void JobGone(int job, Actions* actions);  // a job's pods are all gone: the engine lets go
  void Run(Actions& actions);
  FilterAnswer FilterLocked(const Pod& pod, const FilterRequest& request, Actions* actions);
  // kube-scheduler did not offer the node berth chose for a job with nothing bound yet: its
  // GPUs go back, and it starts on the best of the offered nodes that holds it whole, if any
  // (else it waits, pending, for its back-off).
  bool PlaceAmong(int job, const std::vector<std::string>& names, const std::string& why);
  const ReplicaPlacement* PlacedAt(const PodEntry& entry) const;
  std::vector<std::string> GpuIdsOf(const ReplicaPlacement& placement) const;
  double Now() const { return options_.clock(); }

  ExtenderOptions options_;
  KubeActions* actions_;
  mutable std::mutex mu_;
  std::map<std::string, K8sNode> nodes_;
  std::map<std::string, std::string> node_signatures_;  // what shapes a node, to skip rebuilds
  std::vector<GpuModel> models_;
  std::set<std::string> unreadable_nodes_;
  std::set<std::string> unreadable_pods_;  // UIDs whose last version could not be read
  bool synced_ = false;                    // Resync ran: bound pods are adopted as they come
  // The engine's cluster, and the one before it: SetCluster needs the old one alive until the
  // next call.
  std::unique_ptr<Cluster> cluster_, previous_cluster_;
  std::unique_ptr<Scheduler> engine_;
  std::map<std::string, PodEntry> pods_;  // by UID
  std::map<std::string, Gang> gangs_;
  std::map<int, std::vector<std::string>> job_pods_;  // engine job -> its pods' UIDs by replica
  std::map<std::string, int> group_sizes_;            // PodGroup "ns/name" -> minMember
  Status counts_;
};

}  // namespace berth
