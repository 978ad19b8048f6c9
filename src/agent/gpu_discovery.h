// GPU discovery for the node agent: parses what nvidia-smi prints about a host's GPUs, and
// builds the berth Node (core/cluster.h) the host really is, to compare with the one the
// cluster file declares.
//
// Pure functions over text: the agent runs the commands and passes their output in.
//   kGpuQueryCommand      the per-GPU CSV (index, UUID, name, memory, bus id, MIG modes)
//   kGpuListCommand       `nvidia-smi -L`: GPU and MIG device UUIDs
//   kTopologyCommand      `nvidia-smi topo -m`: the link matrix and CPU/NUMA affinity
// A GPU that fell off the bus, or whose MIG mode waits for a reboot, is not an error: it is
// reported as a condition (a human sentence) and the GPU is left out of the Node. Text that
// is not the commands' output throws ConfigError "SOURCE:LINE: what is wrong; how to fix it".
//
// Bounds: at most kMaxGpus GPUs, kMaxNics NIC columns and 1 MiB of text per command.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/host_topology.h"
#include "core/cluster.h"

namespace berth {

constexpr int kMaxGpus = 64;   // per node
constexpr int kMaxNics = 256;  // NIC columns of topo -m

// The fields of kGpuQueryCommand, in the order ParseGpuQuery expects them.
inline constexpr const char kGpuQueryFields[] =
    "index,uuid,name,memory.total,pci.bus_id,mig.mode.current,mig.mode.pending";
inline constexpr const char kGpuQueryCommand[] =
    "nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id,mig.mode.current,"
    "mig.mode.pending --format=csv,noheader,nounits";
inline constexpr const char kGpuListCommand[] = "nvidia-smi -L";
inline constexpr const char kTopologyCommand[] = "nvidia-smi topo -m";

// "[N/A]" (a GPU without MIG) is kNotSupported.
enum class MigMode { kNotSupported, kDisabled, kEnabled };

struct GpuRecord {
  int index = 0;
  std::string uuid;  // "GPU-fef8089b-..."
  std::string name;  // as printed: "NVIDIA A100-SXM4-80GB"
  int64_t memory_mib = 0;
  std::string bus_id;  // "00000000:07:00.0"
  MigMode mig_current = MigMode::kNotSupported;
  MigMode mig_pending = MigMode::kNotSupported;
  // "" for a usable GPU; else why it is not ("[GPU requires reset]"): the GPU fell off the
  // bus or the driver lost it, and berth places nothing on it.
  std::string problem;
};

struct GpuQuery {
  std::vector<GpuRecord> gpus;          // ascending index
  std::vector<std::string> conditions;  // GPUs lost, MIG modes pending a reboot
};

// Parses kGpuQueryCommand's output (a header row, if any, is skipped). A row whose fields
// nvidia-smi prints as "[Unknown Error]", "[GPU requires reset]" or the like is kept with
// `problem` set and a condition; an "Unable to determine the device handle for GPU ..." line
// (a GPU nvidia-smi cannot open, printed instead of its row) adds a condition; MIG pending !=
// current adds a "MIG pending reboot" condition.
GpuQuery ParseGpuQuery(std::string_view text, const std::string& source);

struct MigDevice {
  int gpu = 0;          // parent GPU index
  int device = 0;       // MIG device index on that GPU
  std::string profile;  // "3g.40gb"
  std::string uuid;     // "MIG-..."
  // Its GPU instance's first memory slot (the placement berth's MIG slices name), as NVML
  // says; -1 where it is not known (`nvidia-smi -L` does not say).
  int start = -1;
};

struct GpuList {
  std::vector<std::string> gpu_uuids;  // by GPU index ("" for an index not listed)
  std::vector<MigDevice> mig_devices;  // in listed order
};

// Parses `nvidia-smi -L`: "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)" lines, each followed
// by its "  MIG 3g.40gb     Device  0: (UUID: MIG-...)" lines.
GpuList ParseGpuList(std::string_view text, const std::string& source);

// A topo -m cell, closest first: X (self), NV# (# bonded NVLinks), PIX, PXB, PHB, NODE, SYS.
enum class LinkKind { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };

struct Link {
  LinkKind kind = LinkKind::kSys;
  int nvlinks = 0;  // # of NV#

  bool operator==(const Link&) const = default;
};

struct GpuTopology {
  int gpu_count = 0;
  std::vector<std::vector<Link>> links;      // [gpu][gpu]
  std::vector<std::string> nics;             // NIC column names ("mlx5_0", "NIC0")
  std::vector<std::vector<Link>> nic_links;  // [gpu][nic]
  std::vector<std::vector<int>> cpus;        // CPU Affinity per GPU; empty when "N/A"
  std::vector<int> numa;  // NUMA Affinity per GPU; -1 when "N/A" or the column is absent
};

// Parses `nvidia-smi topo -m`: the tab-separated matrix up to the first blank line or
// "Legend:". GPU columns and rows must be GPU0..GPUn in order; NIC columns are kept for the
// PCIe grouping; "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID" columns may be absent (older
// drivers print no NUMA Affinity). A NUMA Affinity listing several nodes ("0-1") is taken as its
// lowest. Terminal escape sequences (some drivers underline the header) are ignored.
GpuTopology ParseTopology(std::string_view text, const std::string& source);

struct DiscoveredNode {
  Node node;                           // usable GPUs only, ascending host index
  std::vector<GpuModel> models;        // the node's GPU models, each once
  std::vector<int> host_index;         // [node GPU] its nvidia-smi index
  std::vector<std::string> gpu_uuids;  // [node GPU] its UUID, for Docker's DeviceIDs
  // Of the node's GPUs, each with its start slot: the lister's, or where it did not say one,
  // the one berth gave it (BuildNode); -1 for an instance berth cannot lay out.
  std::vector<MigDevice> mig_devices;
  std::vector<std::string> conditions;  // the query's, and what could not be placed
};

// "NVIDIA A100-SXM4-80GB" -> "A100-SXM4-80GB": the name without its "NVIDIA " (or older
// "Tesla ") prefix, spaces as dashes, as cluster files name models.
std::string ModelName(std::string_view nvidia_smi_name);

// Builds the host's Node, named `host_name`:
// - sockets: one per NUMA node of `host` (CPUs and memory), in ascending NUMA id; a GPU is
//   under the socket of its NUMA Affinity, else the NUMA node holding most of its CPU
//   Affinity, else socket 0;
// - PCIe switches: GPUs linked PIX or PXB to each other, or both PIX/PXB to one NIC (on an
//   NVSwitch system the GPU-to-GPU cells say NV#, so the NICs show the switches), share one;
//   a GPU without such a peer has a switch of its own; switches are ordered by socket, then
//   lowest GPU;
// - nvlink_domain: connected components of NV# links, numbered by lowest GPU; -1 for a GPU
//   with none;
// - models: ModelName of each name, memory from the CSV, the built-in MIG profiles where berth
//   has them; mig_enabled from the current MIG mode (a MIG-enabled GPU of a model without a
//   profile table is offered whole, with a condition);
// - mig_layout of a MIG-enabled GPU: its instances in `list`, pinned at their starts (a GPU
//   without instances, or whose instances berth cannot lay out, adds a condition);
// - cpu_milli: 1000 per online CPU; memory_mib: the NUMA nodes' sum.
// `list` may be null (no MIG device UUIDs then). The Node passes ValidateCluster in a
// one-node cluster with `models`.
DiscoveredNode BuildNode(const std::string& host_name, const GpuQuery& query,
                         const GpuTopology& topology, const HostTopology& host,
                         const GpuList* list);

}  // namespace berth
