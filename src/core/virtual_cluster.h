// Virtual clusters: tenants' guaranteed quotas, expressed in cells (HiveD's model).
//
// A VC is guaranteed `count` cells of each listed cell type (e.g. 2 "dgx-a100/node" cells,
// 4 "T4" GPUs). The guarantee is in topology, not only in numbers: a VC guaranteed one 8-GPU
// node always gets a whole node. "VC safety" is the invariant that every VC's unused
// guarantee can still be carved from the free cells at all times.
#pragma once

#include <string>
#include <vector>

#include "core/cell_tree.h"

namespace berth {

struct VcGuarantee {
  // A cell type name, as `berth cells` lists them; or "<model>/<MIG profile>" (e.g.
  // "A100-80GB/1g.10gb"): `count` instances of that profile, guaranteed as the MIG-enabled
  // GPUs of the model that hold them (rounded up to whole GPUs; the VC's MIG jobs of any
  // profile use those GPUs). The GPUs are those carved on demand when the cluster has them,
  // else those of the one fixed layout that holds the profile. `lending_limit` then counts
  // instances too (the instances kept unlent round up to whole GPUs). Entries of one VC that
  // come to the same cell type add up, each rounded on its own.
  std::string cell_type;
  int count = 0;
  // Most cells of the guarantee lent to other VCs while unused (Kueue's lendingLimit); the rest
  // stay free for the VC, so its own work never waits for a reclaim there. < 0: all of them.
  int lending_limit = -1;
  std::string where = {};  // "FILE:LINE" where it is written, for messages; "" when unknown
};

struct VirtualClusterSpec {
  std::string name;
  std::vector<VcGuarantee> guarantees;
};

// A VC resolved against a cell tree, with the cells bound to it right now. Bound cells are the
// VC's own: its guaranteed jobs are placed inside them, and a bound cell returns to the
// physical pool when its last job leaves (HiveD's lazy binding).
struct VirtualCluster {
  std::string name;
  std::vector<int> guarantee_types;   // cell type ids
  std::vector<int> guarantee_counts;  // parallel to guarantee_types
  std::vector<int> bound_counts;      // parallel: cells of that type bound now
  std::vector<int> promised_counts;   // parallel: unbound cells promised to plans that wait
  std::vector<int> unlent_counts;     // parallel: cells never lent (bound, or kept free)
  std::vector<int> bound_cells;
  std::vector<int> bound_nodes;  // the nodes under bound_cells, sorted, each once
};

// Resolves specs against `tree`, built from `cluster` (whose models give the MIG profiles);
// returns "" or an error naming the VC and the field: an unknown cell type or MIG profile, or
// guarantees that together do not fit the healthy cluster.
std::string ResolveVirtualClusters(const Cluster& cluster, const CellTree& tree,
                                   const std::vector<VirtualClusterSpec>& specs,
                                   std::vector<VirtualCluster>* out);

// The test of VC safety. `available` counts, per cell type, maximal cells that can serve a
// guarantee (free, or held only by preemptible work); `needed` counts unbound guarantees per
// type. Big cells are handed to big guarantees first and the rest are split for smaller ones
// (exact for buddy trees). Returns per type how many needed cells cannot be backed.
std::vector<int> GuaranteeShortfall(const CellTree& tree, const std::vector<int>& available,
                                    const std::vector<int>& needed);

// GPUs in a shortfall vector (what the guarantees lack, in GPUs).
int ShortfallGpus(const CellTree& tree, const std::vector<int>& shortfall);

}  // namespace berth
