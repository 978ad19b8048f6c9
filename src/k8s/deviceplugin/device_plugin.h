// berth's device plugin for kubelet (API v1beta1, api.proto beside this file), run on each GPU
// node by `berth device-plugin`. It makes a container get exactly the GPUs berth chose:
//
//   - Start() serves the DevicePlugin service on <plugin_dir>/berth.sock, publishes the node's
//     GPU UUIDs in index order as the Node annotation berth.io/gpu-uuids (so that berth's
//     extender names GPUs by UUID in berth.io/gpu-ids), then registers with kubelet on
//     <plugin_dir>/kubelet.sock.
//   - ListAndWatch: one device per GPU, ID = its UUID; the list again whenever `list_gpus`
//     (polled every health_interval) stops or starts naming a GPU (Unhealthy / Healthy).
//   - GPU shares: a second registration (socket berth-share.sock) advertises `share_resource`
//     (berth.io/gpu-share), `share_seats` devices per GPU with IDs UUID::N. A share pod asks for
//     one seat, so kubelet and kube-scheduler count share pods per node against GPUs x seats,
//     not against whole GPUs; which GPU the pod shares is berth's (berth.io/gpu-ids), whatever
//     seat kubelet picks. Whole-GPU pods and share pods are matched only by their own service.
//   - Allocate(N ids): kubelet's ids are only a count to berth. The pod berth bound to this node
//     whose berth.io/gpu-ids names N GPUs and that has not been served yet (oldest first) gets
//     NVIDIA_VISIBLE_DEVICES = berth's UUIDs, /dev/nvidiaINDEX device specs where those files
//     exist, and for a GPU share the share's limits (BERTH_GPU_MEMORY_LIMIT_MIB,
//     CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) from berth.io/placement. Without such a pod (bound by
//     another scheduler) kubelet's own ids are used, and a log line says so. Only pods that
//     request `resource` come to Allocate: a share pod gets its limits when it asks for one.
//   - GetPreferredAllocation: berth's ids for the pending pod when kubelet has them available,
//     so that kubelet's accounting matches what the container really gets.
//
// Bad input (unknown device ids, more devices than the node has, annotations that name GPUs
// the node does not have) is answered INVALID_ARGUMENT or skipped with a log line; never a crash.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "k8s/pod_job.h"

namespace grpc {
class Server;
}

namespace berth {

class KubeClient;

constexpr const char* kGpuUuidsAnnotation = "berth.io/gpu-uuids";
constexpr const char* kDevicePluginSocket = "berth.sock";
constexpr const char* kSharePluginSocket = "berth-share.sock";
constexpr const char* kKubeletSocket = "kubelet.sock";

struct DevicePluginOptions {
  std::string node;
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string resource = "nvidia.com/gpu";
  std::string share_resource = kGpuShareResource;  // "": no share devices
  int share_seats = 16;  // share pods per GPU that kubelet admits (berth decides the fit)
  // Set: only pods whose berth.io/gpu-ids the extender signed with this key get berth's GPUs
  // (gpu_ids_signature.h); others get kubelet's choice.
  std::string signing_key;
  std::vector<std::string> gpu_uuids;  // index order, as berth numbers the node's GPUs
  // The UUIDs of the GPUs that are usable now; a GPU of gpu_uuids missing here is Unhealthy.
  // Throwing marks every GPU Unhealthy (nvidia-smi failing says nothing good of them).
  std::function<std::vector<std::string>()> list_gpus;
  double health_interval_s = 5;
  std::string dev_dir = "/dev";  // where /dev/nvidiaN device files are looked for
};

class DevicePlugin {
 public:
  DevicePlugin(DevicePluginOptions options, KubeClient& kube);
  ~DevicePlugin();  // Stop()s
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Serves, annotates the Node and registers; "" or why not (nothing is left serving then).
  std::string Start();
  void Stop();  // ends ListAndWatch streams and the server; safe to call twice
  // Whether every socket it serves on is still there: kubelet deletes them when it restarts,
  // and the plugin must then serve and register again.
  bool Serving() const;

 private:
  class Service;
  std::vector<bool> CheckHealth() const;  // per GPU of gpu_uuids, from list_gpus
  void WatchHealth();

  DevicePluginOptions options_;
  KubeClient& kube_;
  // One per registration: whole GPUs, then (when shares are on) seats on shared GPUs.
  std::vector<std::unique_ptr<Service>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> sockets_;
  std::thread health_thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

}  // namespace berth
