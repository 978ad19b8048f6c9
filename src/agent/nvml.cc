#include "agent/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace berth {
namespace {

// NVML's C ABI as its API reference documents it (nvml.h of the CUDA toolkit), the part berth
// uses. Handles are opaque pointers; every call returns nvmlReturn_t, 0 on success.
using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlGpuInstance_t = struct nvmlGpuInstance_st*;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it memory was read or written
};

constexpr int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
constexpr int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

// nvmlGpuTopologyLevel_t
constexpr int NVML_TOPOLOGY_INTERNAL = 0;
constexpr int NVML_TOPOLOGY_SINGLE = 10;
constexpr int NVML_TOPOLOGY_MULTIPLE = 20;
constexpr int NVML_TOPOLOGY_HOSTBRIDGE = 30;
constexpr int NVML_TOPOLOGY_NODE = 40;
// nvmlEnableState_t
constexpr int NVML_FEATURE_ENABLED = 1;
// NVML_DEVICE_MIG_ENABLE
constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;
// nvmlIntNvLinkDeviceType_t
constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0;
constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;
constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;

struct Api {
  // Required.
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*GetCount)(unsigned int*);
  nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*GetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);
  // Optional.
  nvmlReturn_t (*GetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*GetCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int*);
  nvmlReturn_t (*GetNvLinkState)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*GetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
  nvmlReturn_t (*GetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*GetCpuAffinity)(nvmlDevice_t, unsigned int, unsigned long*);
  nvmlReturn_t (*GetNumaNodeId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*GetGpuInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*GetGpuInstanceById)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
  nvmlReturn_t (*GetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
};

class Library {
 public:
  explicit Library(const std::string& path)
      : handle_(::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* handle() const { return handle_; }

  template <typename F>
  bool Find(const char* name, F* out) {
    *out = reinterpret_cast<F>(::dlsym(handle_, name));
    return *out != nullptr;
  }

 private:
  void* handle_;
};

std::string Text(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

Link LevelLink(int level) {
  if (level == NVML_TOPOLOGY_INTERNAL || level == NVML_TOPOLOGY_SINGLE) return {LinkKind::kPix, 0};
  if (level == NVML_TOPOLOGY_MULTIPLE) return {LinkKind::kPxb, 0};
  if (level == NVML_TOPOLOGY_HOSTBRIDGE) return {LinkKind::kPhb, 0};
  if (level == NVML_TOPOLOGY_NODE) return {LinkKind::kNode, 0};
  return {LinkKind::kSys, 0};
}

// The library loaded, with the functions every use of NVML needs; false, with `*why` saying
// why not (naming the first missing function).
bool FindRequired(Library& lib, const std::string& library, Api* api, std::string* why) {
  if (lib.handle() == nullptr) {
    const char* error = ::dlerror();
    // dlerror names the library: "libnvidia-ml.so.1: cannot open shared object file: ...".
    *why = "NVML: " + (error != nullptr ? std::string(error) : "cannot load " + library);
    return false;
  }
  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", lib.Find("nvmlInit_v2", &api->Init)},
      {"nvmlShutdown", lib.Find("nvmlShutdown", &api->Shutdown)},
      {"nvmlErrorString", lib.Find("nvmlErrorString", &api->ErrorString)},
      {"nvmlDeviceGetCount_v2", lib.Find("nvmlDeviceGetCount_v2", &api->GetCount)},
      {"nvmlDeviceGetHandleByIndex_v2",
       lib.Find("nvmlDeviceGetHandleByIndex_v2", &api->GetHandleByIndex)},
      {"nvmlDeviceGetUUID", lib.Find("nvmlDeviceGetUUID", &api->GetUuid)},
      {"nvmlDeviceGetName", lib.Find("nvmlDeviceGetName", &api->GetName)},
      {"nvmlDeviceGetMemoryInfo", lib.Find("nvmlDeviceGetMemoryInfo", &api->GetMemoryInfo)},
      {"nvmlDeviceGetPciInfo_v3", lib.Find("nvmlDeviceGetPciInfo_v3", &api->GetPciInfo)},
  };
  for (const auto& [name, found] : required)
    if (!found) {
      *why = "NVML: " + library + " lacks " + name + "; it is too old or not NVIDIA's";
      return false;
    }
  return true;
}

std::string ErrorText(const Api& api, nvmlReturn_t r) {
  const char* s = api.ErrorString(r);
  return s != nullptr ? std::string(s) : "error " + std::to_string(r);
}

// "NVIDIA A100-SXM4-80GB MIG 3g.40gb" -> "3g.40gb".
std::string MigProfileOf(const std::string& name) {
  const size_t at = name.rfind("MIG ");
  return at == std::string::npos ? name : name.substr(at + 4);
}

}  // namespace

std::optional<NvmlReading> ReadNvml(const std::string& library, std::string* why) {
  Library lib(library);
  Api api{};
  if (!FindRequired(lib, library, &api, why)) return std::nullopt;
  NvmlReading out;
  const auto optional = [&](const char* name, auto* fn, const char* unknown) {
    if (!lib.Find(name, fn))
      out.notes.push_back("NVML lacks " + std::string(name) + ": " + unknown);
  };
  optional("nvmlDeviceGetMigMode", &api.GetMigMode, "MIG modes are unknown (taken as unsupported)");
  optional("nvmlDeviceGetTopologyCommonAncestor", &api.GetCommonAncestor,
           "PCIe links are unknown (taken as SYS)");
  optional("nvmlDeviceGetNvLinkState", &api.GetNvLinkState, "NVLinks are unknown");
  optional("nvmlDeviceGetNvLinkRemotePciInfo_v2", &api.GetNvLinkRemotePciInfo,
           "NVLinks are unknown");
  lib.Find("nvmlDeviceGetNvLinkRemoteDeviceType", &api.GetNvLinkRemoteDeviceType);  // newer NVML
  optional("nvmlDeviceGetCpuAffinity", &api.GetCpuAffinity, "CPU affinity is unknown");
  lib.Find("nvmlDeviceGetNumaNodeId", &api.GetNumaNodeId);  // newer NVML; CPU affinity then
  const bool mig_api =
      lib.Find("nvmlDeviceGetMaxMigDeviceCount", &api.GetMaxMigDeviceCount) &&
      lib.Find("nvmlDeviceGetMigDeviceHandleByIndex", &api.GetMigDeviceHandleByIndex);
  lib.Find("nvmlDeviceGetGpuInstanceId", &api.GetGpuInstanceId);
  lib.Find("nvmlDeviceGetGpuInstanceById", &api.GetGpuInstanceById);
  lib.Find("nvmlGpuInstanceGetInfo", &api.GpuInstanceGetInfo);

  const auto error = [&](nvmlReturn_t r) { return ErrorText(api, r); };
  if (const nvmlReturn_t r = api.Init(); r != NVML_SUCCESS) {
    *why = "NVML: nvmlInit_v2 failed: " + error(r);
    return std::nullopt;
  }
  struct Shutdown {
    Api* api;
    ~Shutdown() { api->Shutdown(); }
  } shutdown{&api};

  unsigned int count = 0;
  if (const nvmlReturn_t r = api.GetCount(&count); r != NVML_SUCCESS) {
    *why = "NVML: nvmlDeviceGetCount_v2 failed: " + error(r);
    return std::nullopt;
  }
  if (count == 0) {
    *why = "NVML finds no GPU";
    return std::nullopt;
  }
  const int gpus = static_cast<int>(std::min<unsigned int>(count, kMaxGpus));
  if (count > static_cast<unsigned int>(kMaxGpus))
    out.notes.push_back("NVML lists " + std::to_string(count) + " GPUs; berth reads the first " +
                        std::to_string(kMaxGpus));

  std::vector<nvmlDevice_t> handles(gpus, nullptr);
  out.list.gpu_uuids.assign(gpus, "");
  for (int g = 0; g < gpus; ++g) {
    GpuRecord gpu;
    gpu.index = g;
    const auto fail = [&](const char* call, nvmlReturn_t r) {
      if (gpu.problem.empty()) gpu.problem = "[" + std::string(call) + ": " + error(r) + "]";
    };
    nvmlDevice_t device = nullptr;
    if (nvmlReturn_t r = api.GetHandleByIndex(static_cast<unsigned int>(g), &device);
        r != NVML_SUCCESS) {
      fail("nvmlDeviceGetHandleByIndex", r);
      device = nullptr;
    }
    if (device != nullptr) {
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
      nvmlMemory_t memory{};
      nvmlPciInfo_t pci{};
      if (nvmlReturn_t r = api.GetPciInfo(device, &pci); r == NVML_SUCCESS)
        gpu.bus_id = Text(pci.busId, sizeof pci.busId);
      else
        fail("nvmlDeviceGetPciInfo", r);
      if (nvmlReturn_t r = api.GetUuid(device, uuid, sizeof uuid); r == NVML_SUCCESS)
        gpu.uuid = Text(uuid, sizeof uuid);
      else
        fail("nvmlDeviceGetUUID", r);
      if (nvmlReturn_t r = api.GetName(device, name, sizeof name); r == NVML_SUCCESS)
        gpu.name = Text(name, sizeof name);
      else
        fail("nvmlDeviceGetName", r);
      if (nvmlReturn_t r = api.GetMemoryInfo(device, &memory); r == NVML_SUCCESS)
        gpu.memory_mib = static_cast<int64_t>(memory.total >> 20);
      else
        fail("nvmlDeviceGetMemoryInfo", r);
      unsigned int current = 0, pending = 0;
      if (api.GetMigMode != nullptr && api.GetMigMode(device, &current, &pending) == NVML_SUCCESS) {
        gpu.mig_current =
            current == NVML_DEVICE_MIG_ENABLE ? MigMode::kEnabled : MigMode::kDisabled;
        gpu.mig_pending =
            pending == NVML_DEVICE_MIG_ENABLE ? MigMode::kEnabled : MigMode::kDisabled;
      }
    }
    if (!gpu.problem.empty()) {
      out.query.conditions.push_back(
          "GPU " + std::to_string(g) + (gpu.bus_id.empty() ? "" : " (" + gpu.bus_id + ")") +
          ": NVML reports " + gpu.problem +
          "; it fell off the bus or the driver lost it, and berth places nothing on it; reset "
          "it (nvidia-smi -r) or reboot the host");
      device = nullptr;
    } else if (gpu.mig_pending != gpu.mig_current) {
      const auto name = [](MigMode mode) {
        return mode == MigMode::kEnabled ? "Enabled" : "Disabled";
      };
      out.query.conditions.push_back("GPU " + std::to_string(g) +
                                     ": MIG pending reboot: its MIG mode is " +
                                     name(gpu.mig_current) + " now and " + name(gpu.mig_pending) +
                                     " after a GPU reset or reboot; berth uses it as " +
                                     name(gpu.mig_current) + " until then");
    }
    handles[g] = device;
    out.list.gpu_uuids[g] = gpu.uuid;

    // MIG devices, in NVML's index order.
    unsigned int max_mig = 0;
    if (device != nullptr && gpu.mig_current == MigMode::kEnabled && mig_api &&
        api.GetMaxMigDeviceCount(device, &max_mig) == NVML_SUCCESS) {
      int listed = 0;
      // A GPU holds at most 7 MIG devices; a library saying more is not believed.
      max_mig = std::min(max_mig, 7u);
      for (unsigned int m = 0; m < max_mig; ++m) {
        nvmlDevice_t mig = nullptr;
        if (api.GetMigDeviceHandleByIndex(device, m, &mig) != NVML_SUCCESS) continue;
        MigDevice d;
        d.gpu = g;
        d.device = listed++;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        if (api.GetUuid(mig, uuid, sizeof uuid) == NVML_SUCCESS) d.uuid = Text(uuid, sizeof uuid);
        if (api.GetName(mig, name, sizeof name) == NVML_SUCCESS)
          d.profile = MigProfileOf(Text(name, sizeof name));
        unsigned int instance_id = 0;
        nvmlGpuInstance_t instance = nullptr;
        nvmlGpuInstanceInfo_t info{};
        if (api.GetGpuInstanceId != nullptr && api.GetGpuInstanceById != nullptr &&
            api.GpuInstanceGetInfo != nullptr &&
            api.GetGpuInstanceId(mig, &instance_id) == NVML_SUCCESS &&
            api.GetGpuInstanceById(device, instance_id, &instance) == NVML_SUCCESS &&
            api.GpuInstanceGetInfo(instance, &info) == NVML_SUCCESS)
          d.start = static_cast<int>(info.placement.start);
        out.list.mig_devices.push_back(std::move(d));
      }
    }
    out.query.gpus.push_back(std::move(gpu));
  }

  // Topology.
  GpuTopology& topo = out.topology;
  topo.gpu_count = gpus;
  topo.links.assign(gpus, std::vector<Link>(gpus, Link{LinkKind::kSys, 0}));
  topo.cpus.assign(gpus, {});
  topo.numa.assign(gpus, -1);
  for (int g = 0; g < gpus; ++g) topo.nics.push_back("GPU" + std::to_string(g) + "-pcie");
  topo.nic_links.assign(gpus, std::vector<Link>(gpus, Link{LinkKind::kSys, 0}));
  for (int a = 0; a < gpus; ++a) {
    topo.links[a][a] = Link{LinkKind::kSelf, 0};
    topo.nic_links[a][a] = Link{LinkKind::kPix, 0};
    for (int b = 0; b < gpus && api.GetCommonAncestor != nullptr; ++b) {
      int level = 0;
      if (a == b || handles[a] == nullptr || handles[b] == nullptr ||
          api.GetCommonAncestor(handles[a], handles[b], &level) != NVML_SUCCESS)
        continue;
      topo.links[a][b] = topo.nic_links[a][b] = LevelLink(level);
    }
  }

  // NVLinks: to another GPU (by its bus id), or to an NVSwitch (any other bus id, or a remote
  // of type switch where NVML says).
  std::map<std::string, int> gpu_of_bus;
  for (int g = 0; g < gpus; ++g)
    if (!out.query.gpus[g].bus_id.empty()) gpu_of_bus[out.query.gpus[g].bus_id] = g;
  std::vector<std::vector<int>> direct(gpus, std::vector<int>(gpus, 0));
  std::vector<int> switch_links(gpus, 0);
  for (int g = 0;
       g < gpus && api.GetNvLinkState != nullptr && api.GetNvLinkRemotePciInfo != nullptr; ++g) {
    if (handles[g] == nullptr) continue;
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      int active = 0;
      nvmlPciInfo_t remote{};
      if (api.GetNvLinkState(handles[g], link, &active) != NVML_SUCCESS ||
          active != NVML_FEATURE_ENABLED ||
          api.GetNvLinkRemotePciInfo(handles[g], link, &remote) != NVML_SUCCESS)
        continue;
      int type = NVML_NVLINK_DEVICE_TYPE_GPU;
      const bool typed = api.GetNvLinkRemoteDeviceType != nullptr &&
                         api.GetNvLinkRemoteDeviceType(handles[g], link, &type) == NVML_SUCCESS;
      const auto peer = gpu_of_bus.find(Text(remote.busId, sizeof remote.busId));
      if (peer != gpu_of_bus.end() && (!typed || type == NVML_NVLINK_DEVICE_TYPE_GPU))
        ++direct[g][peer->second];
      else if (peer == gpu_of_bus.end())
        ++switch_links[g];
    }
  }
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      const int n =
          std::max(direct[a][b], direct[b][a]) + (switch_links[a] > 0 && switch_links[b] > 0
                                                      ? std::min(switch_links[a], switch_links[b])
                                                      : 0);
      if (n > 0) topo.links[a][b] = Link{LinkKind::kNvLink, n};
    }
  }

  // CPU and NUMA affinity.
  for (int g = 0; g < gpus; ++g) {
    if (handles[g] == nullptr) continue;
    constexpr unsigned int kWords = (kMaxCpus + 63) / 64;
    unsigned long mask[kWords] = {};
    if (api.GetCpuAffinity != nullptr &&
        api.GetCpuAffinity(handles[g], kWords, mask) == NVML_SUCCESS) {
      constexpr int kBits = static_cast<int>(sizeof(unsigned long) * 8);
      for (int cpu = 0; cpu < kMaxCpus && cpu / kBits < static_cast<int>(kWords); ++cpu)
        if ((mask[cpu / kBits] >> (cpu % kBits)) & 1UL) topo.cpus[g].push_back(cpu);
    }
    unsigned int numa = 0;
    if (api.GetNumaNodeId != nullptr && api.GetNumaNodeId(handles[g], &numa) == NVML_SUCCESS &&
        numa < static_cast<unsigned int>(kMaxNumaNodes))
      topo.numa[g] = static_cast<int>(numa);
  }
  return out;
}

std::optional<DiscoveredNode> DiscoverWithNvml(const std::string& library,
                                               const std::string& node_name,
                                               const HostTopology& host, std::string* why) {
  std::optional<NvmlReading> reading = ReadNvml(library, why);
  if (!reading) return std::nullopt;
  DiscoveredNode node =
      BuildNode(node_name, reading->query, reading->topology, host, &reading->list);
  node.conditions.insert(node.conditions.end(), reading->notes.begin(), reading->notes.end());
  return node;
}

struct NvmlSampler::State {
  explicit State(const std::string& library) : lib(library) {}
  Library lib;
  Api api{};
  std::vector<std::pair<int, nvmlDevice_t>> gpus;  // (index in the agent's uuids, handle)
};

std::unique_ptr<NvmlSampler> NvmlSampler::Open(const std::string& library,
                                               const std::vector<std::string>& uuids,
                                               std::string* why) {
  auto state = std::make_unique<State>(library);
  Api& api = state->api;
  if (!FindRequired(state->lib, library, &api, why)) return nullptr;
  state->lib.Find("nvmlDeviceGetUtilizationRates", &api.GetUtilizationRates);
  if (const nvmlReturn_t r = api.Init(); r != NVML_SUCCESS) {
    *why = "NVML: nvmlInit_v2 failed: " + ErrorText(api, r);
    return nullptr;
  }
  std::unique_ptr<NvmlSampler> sampler(new NvmlSampler(std::move(state)));
  unsigned int count = 0;
  if (const nvmlReturn_t r = sampler->state_->api.GetCount(&count); r != NVML_SUCCESS) {
    *why = "NVML: nvmlDeviceGetCount_v2 failed: " + ErrorText(sampler->state_->api, r);
    return nullptr;
  }
  for (unsigned int i = 0; i < std::min<unsigned int>(count, kMaxGpus); ++i) {
    nvmlDevice_t device = nullptr;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (api.GetHandleByIndex(i, &device) != NVML_SUCCESS ||
        api.GetUuid(device, uuid, sizeof uuid) != NVML_SUCCESS)
      continue;
    const auto at = std::find(uuids.begin(), uuids.end(), Text(uuid, sizeof uuid));
    if (at != uuids.end())
      sampler->state_->gpus.emplace_back(static_cast<int>(at - uuids.begin()), device);
  }
  if (sampler->state_->gpus.empty()) {
    *why = "NVML finds none of the node's GPUs";
    return nullptr;
  }
  return sampler;
}

NvmlSampler::NvmlSampler(std::unique_ptr<State> state) : state_(std::move(state)) {}

NvmlSampler::~NvmlSampler() {
  if (state_ != nullptr) state_->api.Shutdown();
}

std::vector<GpuReport> NvmlSampler::Sample() {
  const Api& api = state_->api;
  std::vector<GpuReport> out;
  for (const auto& [gpu, device] : state_->gpus) {
    GpuReport report;
    report.gpu = gpu;
    nvmlMemory_t memory{};
    if (api.GetMemoryInfo(device, &memory) == NVML_SUCCESS && memory.used <= memory.total) {
      report.fb_used_mib = static_cast<double>(memory.used >> 20);
      report.fb_free_mib = static_cast<double>(memory.free >> 20);
    }
    nvmlUtilization_t utilization{};
    if (api.GetUtilizationRates != nullptr &&
        api.GetUtilizationRates(device, &utilization) == NVML_SUCCESS && utilization.gpu <= 100)
      report.util_percent = utilization.gpu;
    if (report.fb_used_mib >= 0 || report.util_percent >= 0) out.push_back(report);
  }
  return out;
}

}  // namespace berth
