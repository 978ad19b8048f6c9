#include "k8s/deviceplugin/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "k8s/deviceplugin/api.grpc.pb.h"
#include "k8s/gpu_ids_signature.h"
#include "k8s/kube_client.h"
#include "k8s/node_shape.h"
#include "k8s/pod_job.h"

namespace berth {
namespace {

using nlohmann::json;

constexpr const char* kApiVersion = "v1beta1";
constexpr size_t kMaxDeviceIdLength = 63;   // kubelet refuses longer Device.ID values
constexpr int kMaxShareSeats = 1000;        // a share is at least a thousandth of a GPU
constexpr size_t kMaxShareDevices = 16384;  // about 1.3 MB of device list at 63-byte IDs

std::string Join(const std::vector<std::string>& parts) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ",") + part;
  return text;
}

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// A whole number 0..n-1 written in decimal digits only, else -1.
int IndexIn(const std::string& text, size_t n) {
  if (text.empty() || text.size() > 4 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  const int index = std::stoi(text);
  return index < static_cast<int>(n) ? index : -1;
}

// What one registration with kubelet advertises: the node's GPUs whole (seats 0, device ID =
// UUID), or `seats` devices per GPU (ID = UUID::N) for the pods that ask for a seat.
struct Offer {
  std::string resource, socket;
  int seats = 0;
};

// Whether any of the pod's containers (init containers too) requests or limits `resource`.
// Read directly rather than through ReadPod: the plugin needs only what berth wrote at bind and
// which resource reaches it, whatever else the pod asks.
bool AsksFor(const json& pod, const std::string& resource) {
  const json* spec = Field(pod, "spec");
  for (const char* kind : {"containers", "initContainers"}) {
    const json* containers = spec == nullptr ? nullptr : Field(*spec, kind);
    if (containers == nullptr || !containers->is_array()) continue;
    for (const json& container : *containers) {
      const json* resources = Field(container, "resources");
      for (const char* list : {"limits", "requests"})
        if (const json* entries = resources == nullptr ? nullptr : Field(*resources, list);
            entries != nullptr && Field(*entries, resource.c_str()) != nullptr)
          return true;
    }
  }
  return false;
}

// Whether kubelet has admitted the pod (and so allocated its devices): it reports container
// statuses from then on, while images are pulled, before the phase leaves Pending.
bool Admitted(const json& pod) {
  const json* status = Field(pod, "status");
  for (const char* list : {"containerStatuses", "initContainerStatuses"})
    if (const json* statuses = status == nullptr ? nullptr : Field(*status, list);
        statuses != nullptr && statuses->is_array() && !statuses->empty())
      return true;
  return false;
}

// A pod berth bound to this node that may still be waiting for its devices.
struct PendingPod {
  std::string uid, name;  // name as namespace/name, for log lines
  double created = 0;
  std::vector<int> gpus;  // berth's choice, as indexes into the node's GPUs
  json placement;         // berth.io/placement; null when absent or unreadable
  // The devices kubelet named when Allocate served the pod (sorted); empty: not served yet.
  std::vector<std::string> served;
};

}  // namespace

class DevicePlugin::Service final : public v1beta1::DevicePlugin::Service {
 public:
  Service(const DevicePluginOptions& options, KubeClient& kube, Offer offer)
      : options_(options),
        kube_(kube),
        offer_(std::move(offer)),
        healthy_(options.gpu_uuids.size(), true) {
    for (size_t g = 0; g < options_.gpu_uuids.size(); ++g) {
      if (offer_.seats == 0) devices_.emplace_back(options_.gpu_uuids[g], g);
      for (int seat = 0; seat < offer_.seats; ++seat)
        devices_.emplace_back(options_.gpu_uuids[g] + "::" + std::to_string(seat), g);
    }
    for (const auto& [id, g] : devices_) gpu_of_[id] = g;
  }

  const Offer& offer() const { return offer_; }

  void SetHealth(const std::vector<bool>& healthy) {
    std::lock_guard<std::mutex> lock(mu_);
    if (healthy == healthy_) return;
    healthy_ = healthy;
    ++generation_;
    changed_.notify_all();
  }

  void EndStreams() {
    std::lock_guard<std::mutex> lock(mu_);
    streams_ending_ = true;
    changed_.notify_all();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* options) override {
    options->set_pre_start_required(false);
    options->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::unique_lock<std::mutex> lock(mu_);
    bool first = true;
    uint64_t sent = 0;
    while (!streams_ending_ && !context->IsCancelled()) {
      if (first || sent != generation_) {
        v1beta1::ListAndWatchResponse devices;
        for (const auto& [id, g] : devices_) {
          v1beta1::Device* device = devices.add_devices();
          device->set_id(id);
          device->set_health(healthy_[g] ? "Healthy" : "Unhealthy");
        }
        first = false;
        sent = generation_;
        lock.unlock();
        const bool written = writer->Write(devices);
        lock.lock();
        if (!written) break;
      }
      // Woken by a health change or Stop(); the timeout notices a kubelet that went away.
      changed_.wait_for(lock, std::chrono::seconds(1));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    if (request->container_requests_size() > kMaxContainers)
      return Invalid("more than " + std::to_string(kMaxContainers) + " container requests");
    std::lock_guard<std::mutex> lock(allocate_mu_);
    std::string failed;
    std::vector<PendingPod> pods = PendingPods(&failed);
    for (const auto& container : request->container_requests()) {
      const int size = container.allocation_size();
      if (size < 0 || size > container.available_deviceids_size())
        return Invalid("allocation_size " + std::to_string(size) + " with " +
                       std::to_string(container.available_deviceids_size()) + " devices available");
      const auto& must = container.must_include_deviceids();
      const auto& available = container.available_deviceids();
      std::vector<std::string> chosen;
      for (auto pod = pods.begin(); pod != pods.end() && chosen.empty(); ++pod) {
        if (!pod->served.empty() || pod->gpus.size() != static_cast<size_t>(size)) continue;
        // A device on each of the pod's GPUs: one kubelet must include first, else any offered.
        std::vector<std::string> ids;
        for (int g : pod->gpus)
          for (const auto* from : {&must, &available}) {
            const auto on_g = std::find_if(from->begin(), from->end(), [&](const std::string& id) {
              const auto known = gpu_of_.find(id);
              return known != gpu_of_.end() && known->second == static_cast<size_t>(g) &&
                     std::find(ids.begin(), ids.end(), id) == ids.end();
            });
            if (on_g == from->end()) continue;
            ids.push_back(*on_g);
            break;
          }
        const bool keeps_required =
            std::all_of(must.begin(), must.end(), [&](const std::string& id) {
              return std::find(ids.begin(), ids.end(), id) != ids.end();
            });
        if (ids.size() == pod->gpus.size() && keeps_required) {
          chosen = std::move(ids);
          pods.erase(pod);  // a second container of the request is another pod's
          break;
        }
      }
      if (chosen.empty()) {
        // No pod of berth's fits: what kubelet must include, then the first others available,
        // `size` in all.
        for (const auto* from : {&must, &available})
          for (const std::string& id : *from)
            if (chosen.size() < static_cast<size_t>(size) &&
                std::find(chosen.begin(), chosen.end(), id) == chosen.end())
              chosen.push_back(id);
      }
      auto* answer = response->add_container_responses();
      for (const std::string& id : chosen) answer->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    if (request->container_requests_size() > kMaxContainers)
      return Invalid("more than " + std::to_string(kMaxContainers) + " container requests");
    // The GPUs of each container's devices (a GPU once, however many of its seats), and the
    // devices themselves, sorted.
    std::vector<std::vector<int>> asked;
    std::vector<std::vector<std::string>> asked_ids;
    for (const auto& container : request->container_requests()) {
      asked_ids.emplace_back(container.devices_ids().begin(), container.devices_ids().end());
      std::sort(asked_ids.back().begin(), asked_ids.back().end());
      const size_t count = container.devices_ids_size();
      if (count == 0 || count > devices_.size())
        return Invalid("a container asks for " + std::to_string(count) + " devices; node " +
                       options_.node + " has " + std::to_string(devices_.size()) + " of " +
                       offer_.resource);
      std::vector<int> gpus;
      for (const std::string& id : container.devices_ids()) {
        const auto known = gpu_of_.find(id);
        if (known == gpu_of_.end())
          return Invalid("unknown device \"" + id.substr(0, 80) + "\" (not a " + offer_.resource +
                         " device of node " + options_.node + ")");
        const int g = static_cast<int>(known->second);
        if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
      }
      asked.push_back(std::move(gpus));
    }
    // One Allocate at a time, so that two containers never take the same pod.
    std::lock_guard<std::mutex> lock(allocate_mu_);
    std::string failed;
    std::vector<PendingPod> pods = PendingPods(&failed);
    // Without the pods, the container would get GPUs berth may have given another pod: kubelet
    // is told to fail the admission, and the pod's controller tries again.
    if (!failed.empty())
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "cannot list this node's pods to find berth's GPUs: " + failed);
    std::vector<bool> healthy;
    {
      std::lock_guard<std::mutex> health_lock(mu_);
      healthy = healthy_;
    }
    for (size_t c = 0; c < asked.size(); ++c) {
      std::vector<int>& gpus = asked[c];
      // The pod served these very devices before: another container of it (kubelet hands a
      // pod's init container's devices on to its containers), which gets the same answer.
      auto pod = std::find_if(pods.begin(), pods.end(),
                              [&](const PendingPod& p) { return p.served == asked_ids[c]; });
      // Else the unserved pod whose GPUs kubelet offered (GetPreferredAllocation steers it
      // there); else the only unserved pod of that size, if its GPUs are healthy. Two of one
      // size and neither offered: which is which cannot be told, and kubelet's choice stands.
      if (pod == pods.end())
        pod = std::find_if(pods.begin(), pods.end(), [&](const PendingPod& p) {
          return p.served.empty() && std::set<int>(p.gpus.begin(), p.gpus.end()) ==
                                         std::set<int>(gpus.begin(), gpus.end());
        });
      if (pod == pods.end()) {
        const auto same_size = [&](const PendingPod& p) {
          return p.served.empty() && p.gpus.size() == gpus.size();
        };
        const auto first = std::find_if(pods.begin(), pods.end(), same_size);
        const bool only =
            first != pods.end() && std::count_if(pods.begin(), pods.end(), same_size) == 1;
        const bool fit = only && std::all_of(first->gpus.begin(), first->gpus.end(),
                                             [&](int g) { return healthy[g]; });
        if (fit) pod = first;
      }
      json placement;
      if (pod == pods.end()) {
        std::cerr << "berth device-plugin " << options_.node
                  << ": no pod bound by berth waits here for exactly " << Join(UuidsOf(gpus))
                  << " or alone for " << gpus.size()
                  << " GPUs; the container gets kubelet's choice\n";
      } else {
        std::cerr << "berth device-plugin " << options_.node << ": pod " << pod->name
                  << " gets berth's GPUs " << Join(UuidsOf(pod->gpus)) << " (kubelet offered "
                  << Join(UuidsOf(gpus)) << ")\n";
        served_[pod->uid] = pod->served = asked_ids[c];
        gpus = pod->gpus;
        placement = pod->placement;
      }
      Answer(gpus, placement, response->add_container_responses());
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;  // not required (GetDevicePluginOptions), so never called
  }

 private:
  static grpc::Status Invalid(const std::string& why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
  }

  std::vector<std::string> UuidsOf(const std::vector<int>& gpus) const {
    std::vector<std::string> uuids;
    for (int g : gpus) uuids.push_back(options_.gpu_uuids[g]);
    return uuids;
  }

  // berth.io/gpu-ids as indexes into the node's GPUs: UUIDs, or indexes where berth bound the
  // pod before this node published its UUIDs. False when it names a GPU this node lacks, or
  // one twice.
  bool ReadGpuIds(const std::string& text, std::vector<int>* gpus) const {
    size_t start = 0;
    while (start <= text.size() && gpus->size() < options_.gpu_uuids.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const std::string id = text.substr(start, comma - start);
      const auto known = std::find(options_.gpu_uuids.begin(), options_.gpu_uuids.end(), id);
      const int g = known != options_.gpu_uuids.end()
                        ? static_cast<int>(known - options_.gpu_uuids.begin())
                        : IndexIn(id, options_.gpu_uuids.size());
      if (g < 0 || std::find(gpus->begin(), gpus->end(), g) != gpus->end()) return false;
      gpus->push_back(g);
      start = comma + 1;
    }
    return start > text.size();
  }

  // The pods berth bound here that ask for this offer's resource and that kubelet has not
  // admitted yet, oldest first: those Allocate served carry the devices it was asked for
  // (served_ covers the moment between Allocate and kubelet reporting the pod's containers).
  // Call under allocate_mu_.
  std::vector<PendingPod> PendingPods(std::string* failed) {
    std::vector<json> items;
    std::string version;
    *failed =
        kube_.List("/api/v1/pods?fieldSelector=spec.nodeName%3D" + options_.node, &items, &version);
    if (!failed->empty()) {
      std::cerr << "berth device-plugin " << options_.node << ": " << *failed << "\n";
      return {};
    }
    std::vector<PendingPod> pending;
    std::set<std::string> listed;
    for (const json& item : items) {
      const std::string uid = MetadataText(item, "uid");
      listed.insert(uid);
      const std::string gpu_ids = AnnotationText(item, kGpuIdsAnnotation);
      const json* status = Field(item, "status");
      const std::string phase = status == nullptr ? "" : FieldText(*status, "phase");
      double created = 0;
      if (uid.empty() || gpu_ids.empty() || !MetadataText(item, "deletionTimestamp").empty() ||
          !(phase.empty() || phase == "Pending") || Admitted(item) ||
          !ParseTimestamp(MetadataText(item, "creationTimestamp"), &created) ||
          !AsksFor(item, offer_.resource))
        continue;
      if (!options_.signing_key.empty() &&
          !GpuIdsSigned(options_.signing_key, uid, options_.node, gpu_ids,
                        AnnotationText(item, kGpuIdsSignatureAnnotation))) {
        std::cerr << "berth device-plugin " << options_.node << ": pod "
                  << MetadataText(item, "namespace") << "/" << MetadataText(item, "name") << ": "
                  << kGpuIdsAnnotation
                  << " is not signed by berth's extender; it gets kubelet's choice\n";
        continue;
      }
      const auto served = served_.find(uid);
      PendingPod entry{
          uid,     MetadataText(item, "namespace") + "/" + MetadataText(item, "name"),
          created, {},
          nullptr, served == served_.end() ? std::vector<std::string>{} : served->second};
      if (!ReadGpuIds(gpu_ids, &entry.gpus)) {
        std::cerr << "berth device-plugin " << options_.node << ": pod " << entry.name << ": "
                  << kGpuIdsAnnotation << " \"" << gpu_ids.substr(0, 200)
                  << "\" does not name distinct GPUs of this node; skipped\n";
        continue;
      }
      entry.placement = json::parse(AnnotationText(item, kPlacementAnnotation), nullptr, false);
      pending.push_back(std::move(entry));
    }
    // Forget pods that are gone, so that served_ stays as small as the node's pod list.
    std::erase_if(served_, [&](const auto& entry) { return listed.count(entry.first) == 0; });
    std::stable_sort(pending.begin(), pending.end(), [](const PendingPod& a, const PendingPod& b) {
      return a.created < b.created;
    });
    return pending;
  }

  // What the container gets for `gpus`; a share (gpuMilli below 1000) also gets its limits.
  void Answer(const std::vector<int>& gpus, const json& placement,
              v1beta1::ContainerAllocateResponse* answer) const {
    (*answer->mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = Join(UuidsOf(gpus));
    if (placement.is_object()) {
      const json milli = placement.value("gpuMilli", json());
      if (milli.is_number_integer() && milli.get<int64_t>() > 0 && milli.get<int64_t>() < 1000)
        (*answer->mutable_envs())["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] =
            std::to_string(std::max<int64_t>(1, milli.get<int64_t>() / 10));
      const json memory = placement.value("gpuMemoryMiB", json());
      if (memory.is_number_integer() && memory.get<int64_t>() > 0)
        (*answer->mutable_envs())["BERTH_GPU_MEMORY_LIMIT_MIB"] =
            std::to_string(memory.get<int64_t>());
    }
    // /dev/nvidiaN by the GPU's index: nvidia-smi's index order, which is the minor number
    // order on the usual single-driver host. The runtime adds them anyway where it honours
    // NVIDIA_VISIBLE_DEVICES; listing them makes the cgroup allow exactly these.
    for (int g : gpus) {
      const std::string name = "nvidia" + std::to_string(g);
      const std::string host = options_.dev_dir + "/" + name;
      if (!Exists(host)) continue;
      v1beta1::DeviceSpec* spec = answer->add_devices();
      spec->set_container_path("/dev/" + name);
      spec->set_host_path(host);
      spec->set_permissions("rw");
    }
  }

  const DevicePluginOptions& options_;
  KubeClient& kube_;
  const Offer offer_;
  std::vector<std::pair<std::string, size_t>> devices_;  // device ID, its GPU's index
  std::map<std::string, size_t> gpu_of_;                 // device ID -> GPU index

  std::mutex mu_;  // guards the health below
  std::condition_variable changed_;
  std::vector<bool> healthy_;
  uint64_t generation_ = 0;
  bool streams_ending_ = false;

  std::mutex allocate_mu_;  // guards served_
  // Pods Allocate already gave their GPUs: UID -> the devices kubelet named (sorted).
  std::map<std::string, std::vector<std::string>> served_;
};

DevicePlugin::DevicePlugin(DevicePluginOptions options, KubeClient& kube)
    : options_(std::move(options)), kube_(kube) {}

DevicePlugin::~DevicePlugin() { Stop(); }

std::vector<bool> DevicePlugin::CheckHealth() const {
  std::vector<bool> healthy(options_.gpu_uuids.size(), true);
  if (!options_.list_gpus) return healthy;
  try {
    const std::vector<std::string> present = options_.list_gpus();
    for (size_t i = 0; i < healthy.size(); ++i)
      healthy[i] =
          std::find(present.begin(), present.end(), options_.gpu_uuids[i]) != present.end();
  } catch (const std::exception& e) {
    std::cerr << "berth device-plugin " << options_.node << ": listing GPUs failed (" << e.what()
              << "); every GPU is Unhealthy until it works again\n";
    healthy.assign(healthy.size(), false);
  }
  return healthy;
}

void DevicePlugin::WatchHealth() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_cv_.wait_for(lock, std::chrono::duration<double>(options_.health_interval_s),
                            [this] { return stopping_; })) {
    lock.unlock();
    const std::vector<bool> healthy = CheckHealth();
    for (const auto& service : services_) service->SetHealth(healthy);
    lock.lock();
  }
}

std::string DevicePlugin::Start() {
  const std::string& node = options_.node;
  if (node.empty() || node.size() > 253 || !std::all_of(node.begin(), node.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
      }))
    return "node name \"" + node.substr(0, 80) + "\": expected a Kubernetes node name";
  const auto& uuids = options_.gpu_uuids;
  if (uuids.empty() || uuids.size() > static_cast<size_t>(kMaxGpusPerK8sNode))
    return "node " + node + " has " + std::to_string(uuids.size()) + " GPUs; expected 1 to " +
           std::to_string(kMaxGpusPerK8sNode);
  std::vector<Offer> offers = {{options_.resource, kDevicePluginSocket, 0}};
  if (!options_.share_resource.empty()) {
    if (options_.share_seats < 1 || options_.share_seats > kMaxShareSeats)
      return "--share-seats " + std::to_string(options_.share_seats) + ": expected 1 to " +
             std::to_string(kMaxShareSeats) + " (or no share resource)";
    if (options_.share_resource == options_.resource)
      return "--share-resource " + options_.share_resource + ": the GPUs' own resource";
    offers.push_back({options_.share_resource, kSharePluginSocket, options_.share_seats});
  }
  // Room for a seat's "::N" after the UUID.
  const size_t max_uuid =
      kMaxDeviceIdLength -
      (offers.size() > 1 ? 2 + std::to_string(options_.share_seats - 1).size() : 0);
  // kubelet reads the device list as one gRPC message (4 MiB at most by default).
  if (offers.size() > 1 && uuids.size() * options_.share_seats > kMaxShareDevices)
    return "--share-seats " + std::to_string(options_.share_seats) + " on " +
           std::to_string(uuids.size()) + " GPUs: at most " + std::to_string(kMaxShareDevices) +
           " seats on the node, so that kubelet can read their list";
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i].empty() || uuids[i].size() > max_uuid || uuids[i].find(',') != std::string::npos ||
        std::find(uuids.begin(), uuids.begin() + i, uuids[i]) != uuids.begin() + i)
      return "GPU UUID \"" + uuids[i].substr(0, 80) + "\": expected distinct UUIDs of 1 to " +
             std::to_string(max_uuid) + " characters without commas";
  }
  const std::string kubelet = options_.plugin_dir + "/" + kKubeletSocket;
  if ((options_.plugin_dir + "/" + kSharePluginSocket).size() >= sizeof(sockaddr_un::sun_path))
    return "--plugin-dir " + options_.plugin_dir + ": too long a path for a unix socket";

  const std::vector<bool> healthy = CheckHealth();
  for (const Offer& offer : offers) {
    const std::string socket = options_.plugin_dir + "/" + offer.socket;
    services_.push_back(std::make_unique<Service>(options_, kube_, offer));
    services_.back()->SetHealth(healthy);
    unlink(socket.c_str());  // a previous run's socket would make the bind fail
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(services_.back().get());
    servers_.push_back(builder.BuildAndStart());
    if (!servers_.back()) {
      servers_.pop_back();
      Stop();
      return "cannot serve the device plugin API on " + socket;
    }
    sockets_.push_back(socket);
  }
  health_thread_ = std::thread([this] { WatchHealth(); });

  // Published before registering: once kubelet advertises the GPUs, berth binds pods here, and
  // by then its gpu-ids should be UUIDs.
  std::string failed = kube_.PatchNodeAnnotations(node, {{kGpuUuidsAnnotation, Join(uuids)}});
  auto registration = v1beta1::Registration::NewStub(
      grpc::CreateChannel("unix://" + kubelet, grpc::InsecureChannelCredentials()));
  for (size_t i = 0; i < services_.size() && failed.empty(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1beta1::RegisterRequest request;
    request.set_version(kApiVersion);
    request.set_endpoint(services_[i]->offer().socket);
    request.set_resource_name(services_[i]->offer().resource);
    request.mutable_options()->set_pre_start_required(false);
    request.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty empty;
    const grpc::Status status = registration->Register(&context, request, &empty);
    if (!status.ok())
      failed = "registering with kubelet on " + kubelet + " (" + request.resource_name() +
               "): " + status.error_message();
  }
  if (!failed.empty()) Stop();
  return failed;
}

bool DevicePlugin::Serving() const {
  return !sockets_.empty() && std::all_of(sockets_.begin(), sockets_.end(), Exists);
}

void DevicePlugin::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
    stop_cv_.notify_all();
  }
  if (health_thread_.joinable()) health_thread_.join();
  for (const auto& service : services_) service->EndStreams();
  for (const auto& server : servers_)
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  for (const std::string& socket : sockets_) unlink(socket.c_str());
  servers_.clear();
  sockets_.clear();
  services_.clear();
}

}  // namespace berth
