// The cell view of a cluster (HiveD's model): a tree whose leaves are GPUs and whose inner
// cells are topology domains (PCIe switch, CPU socket, node, rack, cluster).
//
// Cells of the same *type* are interchangeable for allocation: same size, same GPU model and
// same internal shape. A type lists its child types with counts, so a rack type may mix node
// types. The tree is immutable; allocation state lives in BuddyAllocator.
//
// Derived view: a socket or switch level that would hold exactly one child is omitted, and
// CPU-only nodes are not cells. Types are named after the GPU model (leaves), the node shape
// ("<shape>/switch", "<shape>/socket", "<shape>/node"), "rack" and "cluster".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/cluster.h"

namespace berth {

// Topology levels, tightest first. An affinity level asks for all GPUs of a request inside one
// cell of that level or tighter.
enum class Level { kGpu, kSwitch, kSocket, kNode, kRack, kCluster };

const char* LevelName(Level level);
// Accepts gpu, switch, socket, node, rack, cluster and "any" (= cluster). False if unknown.
bool ParseLevel(const std::string& text, Level* level);

struct CellType {
  std::string name;
  Level level = Level::kGpu;
  // The tightest level one cell of this type stands for: a node with a single PCIe switch is
  // as tight as a switch.
  Level tight_level = Level::kGpu;
  int leaf_count = 0;
  std::string model;  // the GPU model when all leaves share one, else ""
  bool mig = false;   // leaves are MIG-enabled GPUs (served only by MIG requests)
  std::vector<std::pair<int, int>> children;  // (child type, count per cell)
};

struct Cell {
  int type = 0;
  int parent = -1;
  std::vector<int> children;
  int node = -1;  // node index for cells at node level and below
  int gpu = -1;   // GPU index on the node, leaves only
  std::string address;
};

class CellTree {
 public:
  // Builds the derived view, or the explicit one when `cluster.explicit_cells` is set. Returns ""
  // or an error naming the problem (e.g. an explicit node cell whose node has other GPUs).
  static std::string Build(const Cluster& cluster, CellTree* out);

  const std::vector<CellType>& types() const { return types_; }
  const std::vector<Cell>& cells() const { return cells_; }
  const CellType& type_of(int cell) const { return types_[cells_[cell].type]; }
  int root() const { return root_; }
  int FindType(const std::string& name) const;  // -1 when absent; accepts HiveD's "A.B.C"
  int gpu_cell(int node, int gpu) const { return gpu_cells_[node][gpu]; }  // -1: not a cell
  int node_cell(int node) const { return node_cells_[node]; }              // -1: CPU-only
  const std::vector<int>& leaves() const { return leaves_; }
  // True when a cell of type `outer` has (transitively) a cell of type `inner`, or is one.
  bool Contains(int outer, int inner) const { return contains_[outer][inner]; }
  // Cells are numbered in preorder: a cell's subtree is the id range [cell, subtree_end(cell)).
  int subtree_end(int cell) const { return order_end_[cell]; }
  // True when `ancestor` is `cell` or one of its ancestors.
  bool IsWithin(int cell, int ancestor) const {
    return order_[ancestor] <= order_[cell] && order_[cell] < order_end_[ancestor];
  }

 private:
  int AddCell(int type, int parent, int node, int gpu, std::string address);
  int InternType(CellType type);
  void Finish();

  std::vector<CellType> types_;
  std::vector<Cell> cells_;
  std::vector<std::vector<int>> gpu_cells_;
  std::vector<int> node_cells_;
  std::vector<int> leaves_;
  std::vector<std::vector<bool>> contains_;
  std::vector<int> order_, order_end_;  // preorder interval of each subtree
  int root_ = -1;
};

}  // namespace berth
