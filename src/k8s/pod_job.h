// A Kubernetes pod as a berth job. The extender reads every pod kube-scheduler sends it, and
// every pod its watch sees, through ReadPod: resources and berth.io annotations become one
// replica's demand; a gang (berth.io/gang + berth.io/gang-size, or a PodGroup's label) is
// named here and assembled by the extender.
//
// Annotations (docs/kubernetes.md):
//   berth.io/queue          the queue (a VC); default "default"
//   berth.io/priority       an integer priority; default 100, as berth's own job specs
//   berth.io/gpu-share      thousandths of one GPU (1..1000), instead of nvidia.com/gpu; with
//                           the resource of that name (1 seat) or nvidia.com/gpu: 1, for a
//                           device plugin to hand the pod its GPU
//   berth.io/gpu-model      the GPU model the pod needs
//   berth.io/affinity       loosest level one pod's GPUs may spread over: gpu|switch|socket|node
//   berth.io/gang-affinity  loosest level a gang may spread over: node|rack|any
//   berth.io/gang, berth.io/gang-size   the gang's name (in the pod's namespace) and size
// Written by berth at bind: berth.io/gpu-ids (read by the device plugin), berth.io/placement
// and berth.io/borrowed (read back after a restart).
//
// Every size is bounded: a pod may carry at most kMaxContainers containers, names and values are
// bounded, and a quantity that overflows is refused naming its field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/job.h"

namespace berth {

constexpr int kMaxContainers = 64;
constexpr int kMaxGangSize = 4096;
constexpr int64_t kDefaultPodPriority = 100;
constexpr const char* kGpuIdsAnnotation = "berth.io/gpu-ids";
constexpr const char* kBorrowedAnnotation = "berth.io/borrowed";
constexpr const char* kPlacementAnnotation = "berth.io/placement";
constexpr const char* kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
// The extended resource berth's device plugin advertises for GPU shares: seats on shared GPUs. A
// share pod asks for 1 beside its berth.io/gpu-share annotation (the thousandths it uses).
constexpr const char* kGpuShareResource = "berth.io/gpu-share";

struct Pod {
  std::string uid, name, ns;
  std::string node;          // spec.nodeName; "" while unbound
  std::string phase;         // status.phase
  bool terminating = false;  // metadata.deletionTimestamp is set
  double created = 0;        // metadata.creationTimestamp, Unix seconds; 0 when absent
  // Whether berth places it: it asks for nvidia.com/gpu, an nvidia.com/mig-* instance or a
  // berth.io/gpu-share. Other pods pass every filter and are bound where kube-scheduler says.
  bool wants_gpus = false;
  JobSpec spec;           // one replica, its group named after the pod
  std::string gang;       // "namespace/name" of its gang (berth.io/gang or a PodGroup); "" alone
  int gang_size = 0;      // from berth.io/gang-size; 0: a PodGroup's minMember says
  std::string gpu_ids;    // berth.io/gpu-ids as written at bind
  std::string placement;  // berth.io/placement: the replica's placement JSON, for recovery
  bool borrowed = false;
};

// Reads a v1.Pod. False with `why` naming the field (metadata.uid, an annotation, a container's
// resource) and what to write instead.
bool ReadPod(const nlohmann::json& object, Pod* pod, std::string* why);

// A Kubernetes quantity ("500m", "2", "1.5", "4Gi", "512M", "1e3") times `scale` (1000 for
// CPU millis, 1 for counts), rounded up; or for memory in MiB with `mib`. False when it is not
// a quantity, negative, or past 2^53.
bool ParseQuantity(const std::string& text, double scale, int64_t* value);
bool ParseQuantityMib(const std::string& text, int64_t* mib);

// metadata.creationTimestamp ("2026-12-02T09:40:19Z") as Unix seconds; false when malformed.
bool ParseTimestamp(const std::string& text, double* seconds);

}  // namespace berth
