// The physical cluster as declared by an operator: GPU models, nodes with their CPU sockets
// (one NUMA node per socket), PCIe switches under sockets, GPUs under switches, and racks.
//
// Plain data. Loaders (src/config) fill it in; `ValidateCluster` checks the invariants every
// other part of the core relies on, so code downstream never re-checks them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/mig.h"

namespace berth {

struct GpuModel {
  std::string name;
  int64_t memory_mib = 0;
  std::vector<MigProfile> mig_profiles;  // empty: not MIG-capable

  bool mig_capable() const { return !mig_profiles.empty(); }
};

struct Socket {
  std::vector<int> cpus;   // host CPU ids; a job on this socket's GPUs is pinned to them
  int64_t memory_mib = 0;  // the socket's NUMA-local memory
  bool operator==(const Socket&) const = default;
};

struct PcieSwitch {
  int socket = 0;  // index into Node::sockets
  bool operator==(const PcieSwitch&) const = default;
};

struct Gpu {
  std::string model;       // a GpuModel name
  int pcie_switch = 0;     // index into Node::switches
  int nvlink_domain = -1;  // GPUs with the same non-negative id share NVLink/NVSwitch
  bool mig_enabled = false;
  // Fixed MIG geometry (as mig-parted would configure it): profile names, "name@start" to pin
  // a start slot. Empty on a MIG-enabled GPU: berth carves instances on demand.
  std::vector<std::string> mig_layout;
  bool operator==(const Gpu&) const = default;
};

struct Node {
  std::string name;
  std::string shape;  // the node shape it was declared with ("" for flat nodes)
  std::string rack;   // "" when the cluster declares no racks
  std::map<std::string, std::string> labels;  // includes "rack" and "zone" when set
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<Socket> sockets;
  std::vector<PcieSwitch> switches;
  std::vector<Gpu> gpus;  // index = GPU index on the host
  bool operator==(const Node&) const = default;
};

// A HiveD-style explicit cell hierarchy (`childCellType` / `childCellNumber` / `isNodeLevel`).
struct CellTypeSpec {
  std::string name;
  std::string child_type;  // "" for a leaf (one GPU); the leaf's name is its GPU model
  int child_count = 0;
  bool is_node_level = false;
};

// One physical cell of an explicit hierarchy: a node-level cell's address is a node name.
struct PhysicalCellSpec {
  std::string cell_type;
  std::string address;
  std::vector<PhysicalCellSpec> children;
};

struct ExplicitCells {
  std::vector<CellTypeSpec> cell_types;
  std::vector<PhysicalCellSpec> physical_cells;
};

struct Cluster {
  std::string name;
  std::vector<GpuModel> models;
  std::vector<Node> nodes;
  std::vector<std::string> racks;               // declaration order
  std::optional<ExplicitCells> explicit_cells;  // set: cells come from here, not the hierarchy

  const GpuModel* FindModel(const std::string& name) const;
  int FindNode(const std::string& name) const;  // -1 when absent
  int gpu_count() const;
};

// Returns "" when the cluster is consistent, else a message naming the offending field.
// Checks: unique names, every GPU's model declared, switch/socket indices in range, every
// MIG-enabled GPU on a MIG-capable model, racks named by nodes are declared.
std::string ValidateCluster(const Cluster& cluster);

// "0-3,8-11": `cpus` (ascending, distinct) written as a Linux cpulist, for messages.
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace berth
