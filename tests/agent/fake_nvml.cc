// A stand-in for libnvidia-ml.so.1, for nvml_test.cc only: no machine these tests run on has an
// NVIDIA GPU or NVML, so this library exports the NVML functions berth's adapter (src/agent/
// nvml.cc) looks up, and answers as the DGX A100 whose nvidia-smi captures are in
// tests/data/agent/dgx-a100/ would: 8 A100-SXM4-80GB, the same UUIDs and bus ids, each GPU's 12
// NVLinks to the 6 NVSwitches, GPU pairs under one PCIe switch (PXB), halves under one NUMA
// node (NODE), else SYS, CPUs 0-63,128-191 / 64-127,192-255. It is what we believe NVML answers,
// not NVML: berth's NVML path is untested against a real driver.
//
// Built twice: libberth_fake_nvml.so, and with BERTH_FAKE_NVML_NO_UUID (no nvmlDeviceGetUUID, a
// required function) libberth_fake_nvml_nouuid.so. $BERTH_FAKE_NVML_LOST=N makes GPU N's handle
// fail with NVML_ERROR_GPU_IS_LOST; $BERTH_FAKE_NVML_MIG puts GPUs 0 and 1 in MIG mode.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kGpus = 8;
const char* const kUuids[kGpus] = {
    "GPU-def5e85f-f31f-997b-8306-7e37c8be278e", "GPU-1c45e263-bacc-a6d4-218f-dec02aa10004",
    "GPU-55a2acfa-9d61-e31f-b5ba-5b3bd445a17c", "GPU-836568ce-3b31-a3c0-3cc7-15e6e390a5c2",
    "GPU-4acc65f2-2fc9-4ca0-f730-ae8f3a05c688", "GPU-41212e6c-5c2c-0287-f623-c0cb4cd1bfaf",
    "GPU-c0f41cb5-e71e-a7b0-9ba3-0b5c0fcc32c8", "GPU-54eae9b2-d157-e25d-868b-702572e831d3"};
const unsigned int kBus[kGpus] = {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD};
const unsigned int kSwitchBus[6] = {0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9};  // the NVSwitches

struct Memory {
  unsigned long long total, free, used;
};
struct PciInfo {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

// A handle is a pointer into this array: &kDevices[i] is GPU i.
char kDevices[kGpus];
// Which element of `array` (of `n`) `p` points to, or -1 (compared as integers: the handle may
// point elsewhere).
int Slot(const void* p, const char* array, int n) {
  const intptr_t i = reinterpret_cast<intptr_t>(p) - reinterpret_cast<intptr_t>(array);
  return i >= 0 && i < n ? static_cast<int>(i) : -1;
}
int IndexOf(void* device) { return Slot(device, kDevices, kGpus); }

// With $BERTH_FAKE_NVML_MIG set, GPUs 0 and 1 are in MIG mode with the instances of
// tests/data/agent/dgx-a100-mig/list.txt, at the A100's placements.
struct Mig {
  int gpu;
  const char* profile;
  const char* uuid;
  unsigned int instance, start, size;
};
const Mig kMigs[] = {{0, "3g.40gb", "MIG-c2139b7d-056f-4966-404a-f74cc0ff33df", 1, 0, 4},
                     {0, "3g.40gb", "MIG-2320ce27-a9a0-871f-7433-c8c09c6289b9", 2, 4, 4},
                     {1, "4g.40gb", "MIG-e6bf0186-ed95-af0f-0ae3-6d5c70e0d385", 5, 0, 4},
                     {1, "2g.20gb", "MIG-79e86d8b-fe17-e915-50e3-8ca5d7ed81d4", 3, 4, 2},
                     {1, "1g.10gb", "MIG-edc1d888-3136-12a9-1476-11b54a2d6f25", 13, 6, 1}};
constexpr int kMigCount = sizeof kMigs / sizeof kMigs[0];
char kMigHandles[kMigCount];  // MIG device handles
char kInstances[kMigCount];   // GPU instance handles
int MigOf(void* device) { return Slot(device, kMigHandles, kMigCount); }
bool MigOn(int gpu) { return std::getenv("BERTH_FAKE_NVML_MIG") != nullptr && gpu < 2; }
struct Placement {
  unsigned int start, size;
};
struct GpuInstanceInfo {
  void* device;
  unsigned int id, profileId;
  Placement placement;
};
int Lost() {
  const char* lost = std::getenv("BERTH_FAKE_NVML_LOST");
  return lost != nullptr ? std::atoi(lost) : -1;
}
void Pci(unsigned int bus, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  pci->bus = bus;
  pci->pciDeviceId = 0x20B210DE;
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", bus);
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", bus);
}
int Copy(const char* text, char* out, unsigned int length) {
  if (std::strlen(text) + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(out, text, std::strlen(text) + 1);
  return 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
  return r == 15 ? "GPU is lost" : r == 0 ? "Success" : "Unknown Error";
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = kGpus;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                                         void** device) {
  if (index >= kGpus) return 2;                      // NVML_ERROR_INVALID_ARGUMENT
  if (static_cast<int>(index) == Lost()) return 15;  // NVML_ERROR_GPU_IS_LOST
  *device = &kDevices[index];
  return 0;
}
#ifndef BERTH_FAKE_NVML_NO_UUID
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* uuid,
                                                             unsigned int length) {
  if (MigOf(device) >= 0) return Copy(kMigs[MigOf(device)].uuid, uuid, length);
  return IndexOf(device) < 0 ? 2 : Copy(kUuids[IndexOf(device)], uuid, length);
}
#endif
__attribute__((visibility("default"))) int nvmlDeviceGetName(void* device, char* name,
                                                             unsigned int length) {
  if (MigOf(device) >= 0) {
    char mig[96];
    std::snprintf(mig, sizeof mig, "NVIDIA A100-SXM4-80GB MIG %s", kMigs[MigOf(device)].profile);
    return Copy(mig, name, length);
  }
  return IndexOf(device) < 0 ? 2 : Copy("NVIDIA A100-SXM4-80GB", name, length);
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  if (IndexOf(device) < 0) return 2;
  memory->total = 81920ULL << 20;
  memory->used = static_cast<unsigned long long>(IndexOf(device)) * (1024ULL << 20);
  memory->free = memory->total - memory->used;
  return 0;
}
// GPU n is busy 10n percent of the time.
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* device,
                                                                         unsigned int* rates) {
  if (IndexOf(device) < 0) return 2;
  rates[0] = static_cast<unsigned int>(IndexOf(device)) * 10;
  rates[1] = 0;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* pci) {
  if (IndexOf(device) < 0) return 2;
  Pci(kBus[IndexOf(device)], pci);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMigMode(void* device, unsigned int* current,
                                                                unsigned int* pending) {
  if (IndexOf(device) < 0) return 2;
  *current = *pending = MigOn(IndexOf(device)) ? 1 : 0;  // NVML_DEVICE_MIG_ENABLE / DISABLE
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMaxMigDeviceCount(void* device,
                                                                          unsigned int* count) {
  if (IndexOf(device) < 0) return 2;
  *count = MigOn(IndexOf(device)) ? 7 : 0;  // an A100 holds at most 7
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMigDeviceHandleByIndex(void* device,
                                                                               unsigned int index,
                                                                               void** mig) {
  const int gpu = IndexOf(device);
  if (gpu < 0 || !MigOn(gpu)) return 2;
  unsigned int n = 0;
  for (int m = 0; m < kMigCount; ++m)
    if (kMigs[m].gpu == gpu && n++ == index) {
      *mig = &kMigHandles[m];
      return 0;
    }
  return 6;  // NVML_ERROR_NOT_FOUND
}
__attribute__((visibility("default"))) int nvmlDeviceGetGpuInstanceId(void* mig, unsigned int* id) {
  if (MigOf(mig) < 0) return 2;
  *id = kMigs[MigOf(mig)].instance;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetGpuInstanceById(void* device,
                                                                        unsigned int id,
                                                                        void** instance) {
  for (int m = 0; m < kMigCount; ++m)
    if (kMigs[m].gpu == IndexOf(device) && kMigs[m].instance == id) {
      *instance = &kInstances[m];
      return 0;
    }
  return 6;
}
__attribute__((visibility("default"))) int nvmlGpuInstanceGetInfo(void* instance,
                                                                  GpuInstanceInfo* info) {
  const int m = Slot(instance, kInstances, kMigCount);
  if (m < 0) return 2;
  info->device = &kDevices[kMigs[m].gpu];
  info->id = kMigs[m].instance;
  info->profileId = 0;
  info->placement = {kMigs[m].start, kMigs[m].size};
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b,
                                                                               int* level) {
  const int i = IndexOf(a), j = IndexOf(b);
  if (i < 0 || j < 0) return 2;
  if (i == j)
    *level = 0;  // NVML_TOPOLOGY_INTERNAL
  else if (i / 2 == j / 2)
    *level = 20;  // NVML_TOPOLOGY_MULTIPLE: one PCIe switch
  else if (i / 4 == j / 4)
    *level = 40;  // NVML_TOPOLOGY_NODE
  else
    *level = 50;  // NVML_TOPOLOGY_SYSTEM
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkState(void* device, unsigned int link,
                                                                    int* active) {
  if (IndexOf(device) < 0) return 2;
  if (link >= 12) return 3;  // NVML_ERROR_NOT_SUPPORTED: an A100 has 12 links
  *active = 1;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device,
                                                                               unsigned int link,
                                                                               PciInfo* pci) {
  if (IndexOf(device) < 0 || link >= 12) return 2;
  Pci(kSwitchBus[link / 2], pci);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkRemoteDeviceType(void* device,
                                                                               unsigned int link,
                                                                               int* type) {
  if (IndexOf(device) < 0 || link >= 12) return 2;
  *type = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCpuAffinity(void* device,
                                                                    unsigned int words,
                                                                    unsigned long* set) {
  const int i = IndexOf(device);
  if (i < 0 || words < 4) return 2;
  std::memset(set, 0, words * sizeof *set);
  // CPUs 0-63,128-191 (words 0 and 2) or 64-127,192-255 (words 1 and 3).
  set[i < 4 ? 0 : 1] = ~0UL;
  set[i < 4 ? 2 : 3] = ~0UL;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetNumaNodeId(void* device,
                                                                   unsigned int* node) {
  const int i = IndexOf(device);
  if (i < 0) return 2;
  *node = i < 4 ? 0 : 1;
  return 0;
}

}  // extern "C"
