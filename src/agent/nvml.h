// The host's GPUs and topology read through NVML, the NVIDIA driver's management library,
// loaded at run time: berth neither links against it nor includes its header. The library
// (default kNvmlLibrary) is dlopen()ed and only the functions below are looked up, declared
// with berth's own copy of NVML's documented C ABI (nvml.cc).
//
// ReadNvml answers the same three structures the nvidia-smi parsers of gpu_discovery.h make
// (GpuQuery, GpuTopology, GpuList), so that the one BuildNode serves both sources:
// - GpuQuery: index, UUID, name, memory (MiB), PCI bus id, MIG mode current/pending. A GPU whose
//   handle NVML cannot get (it fell off the bus) is kept with `problem` set and a condition, as
//   nvidia-smi's "[GPU requires reset]" row is.
// - GpuTopology: GPU-to-GPU links from nvmlDeviceGetTopologyCommonAncestor (INTERNAL and SINGLE
//   -> PIX, MULTIPLE -> PXB, HOSTBRIDGE -> PHB, NODE -> NODE, SYSTEM -> SYS), replaced by NV# where
//   the GPUs share active NVLinks (a direct link counts once for the pair; links to an NVSwitch
//   count, for two GPUs both on switches, as the fewer of their switch links, as topo -m shows).
//   NVML knows no NICs, and topo -m hides the PCIe path under NV#: so the PCIe relation of the
//   GPUs is given as one extra `nics` column per GPU, named "GPUn-pcie", holding every GPU's
//   common-ancestor link to GPU n (PIX to itself). BuildNode's rule "both PIX/PXB to one NIC
//   share a switch" then groups the GPUs by PCIe switch under NVLink too. CPU affinity from
//   nvmlDeviceGetCpuAffinity, NUMA node from nvmlDeviceGetNumaNodeId (-1 when absent).
// - GpuList: the GPUs' UUIDs and, for MIG-enabled GPUs, their MIG devices (UUID, profile from
//   the MIG device's name, its GPU instance's placement start).
// Required symbols: nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2,
// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetName, nvmlDeviceGetMemoryInfo,
// nvmlDeviceGetPciInfo_v3. Without one of them (or when the library is missing, nvmlInit fails
// or no GPU is found) ReadNvml answers nullopt and says why: discovery falls back to nvidia-smi.
// Every other function is optional: a missing one leaves its fact unknown (links SYS, no NVLink,
// no CPU/NUMA affinity, MIG not supported) and adds a note saying which.
//
// The tests run it against a fake library (tests/agent/fake_nvml.cc) that answers as the DGX
// A100 of tests/data/agent/dgx-a100/ does. On a real H200 (driver 580) it found the node
// nvidia-smi's output gives (tests/data/agent/h200-vm/). Not thread-safe (NVML's init/shutdown
// are reference counted; call from one thread). Bounds: at most kMaxGpus GPUs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_discovery.h"
#include "agent/host_topology.h"
#include "protocol/agent_protocol.h"

namespace berth {

inline constexpr const char kNvmlLibrary[] = "libnvidia-ml.so.1";

struct NvmlReading {
  GpuQuery query;
  GpuTopology topology;
  GpuList list;
  std::vector<std::string> notes;  // optional functions the library lacks, and what is unknown
};

// Reads the GPUs through the NVML library at `library` (a dlopen name or path). nullopt, with
// `*why` saying what failed (naming a missing symbol), when NVML is not usable.
std::optional<NvmlReading> ReadNvml(const std::string& library, std::string* why);

// ReadNvml, then BuildNode over `host`; the notes join the node's conditions.
std::optional<DiscoveredNode> DiscoverWithNvml(const std::string& library,
                                               const std::string& node_name,
                                               const HostTopology& host, std::string* why);

// The GPUs' memory and utilization through NVML, for a node without a DCGM exporter: what the
// gpu-memory-threshold plugin and the GPU metrics read. NVML stays initialized from Open to the
// sampler's end (its init is slow on a host without persistence mode). Sample may block in the
// driver when a GPU falls off the bus: call it from a thread of its own. Not thread-safe.
class NvmlSampler {
 public:
  // nullptr, with `*why`, when NVML is not usable or finds none of `uuids` (the node's GPUs).
  static std::unique_ptr<NvmlSampler> Open(const std::string& library,
                                           const std::vector<std::string>& uuids, std::string* why);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // A report per GPU NVML answers for: `gpu` its index in `uuids`, memory used and free (MiB),
  // utilization (percent of the last sample period a kernel ran; -1 where NVML lacks it). SM
  // activity and XID errors are DCGM's and stay unknown (-1).
  std::vector<GpuReport> Sample();

 private:
  struct State;
  explicit NvmlSampler(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace berth
