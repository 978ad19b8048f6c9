// The buddy cell allocator (HiveD's): free lists of maximal free cells per type; taking a cell
// of a type splits the smallest free cell above it; giving a cell back merges buddies upward.
//
// Cells live in *pools*: pool 0 is the physical free space; pool v+1 holds the cells bound to
// virtual cluster v. Splits and merges never cross a pool boundary, so a VC fragmenting its own
// cells cannot fragment anyone else's (the sharing anomaly HiveD removes).
//
// This class only knows which cells are taken whole; who holds them is the caller's business
// (see Allocator). Its hot paths are O(tree depth x fan-out).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/cell_tree.h"

namespace berth {

class BuddyAllocator {
 public:
  static constexpr int kPhysicalPool = 0;

  BuddyAllocator(const CellTree* tree, int pool_count);

  // Maximal free cells of `type` in `pool`.
  const std::vector<int>& free_list(int pool, int type) const { return lists_[pool][type]; }
  int free_leaves(int cell) const { return free_[cell]; }  // free GPUs in the cell's own pool
  int pool(int cell) const { return pool_[cell]; }
  bool taken(int cell) const { return taken_[cell]; }
  bool listed(int cell) const { return pos_[cell] >= 0; }
  // Entirely free in its pool, so TakeCell may take it: neither it nor a cell above it in the
  // pool is taken whole. Its free count alone cannot say: counts below a cell taken whole are
  // not kept, so they read full.
  bool WholeFree(int cell) const;

  // Takes a whole free cell of `type`, splitting the smallest free cell that holds one. -1 if
  // the pool has none.
  int TakeType(int pool, int type);
  // Best fit: a partly used cell of `type` in `pool` with the fewest free GPUs >= `count`.
  int FindPartial(int pool, int type, int count) const;
  // A cell of `type` with `count` free GPUs for a fast placement: the best-fitting partly used
  // one, else a whole free one (possibly inside a larger free cell). -1 if the pool has none.
  int FindFast(int pool, int type, int count) const;
  // Best fit inside `within` (same pool): the cell of `type` with the fewest free GPUs >= count,
  // visiting fuller branches first so that placements pack, skipping nodes `node_fits` refuses.
  // -1 if none.
  int FindWithin(int within, int type, int count,
                 const std::function<bool(int node)>& node_fits) const;
  // Appends the cells of `type` in `pool` with at least `count` free GPUs (partly used ones from
  // the best-fit buckets, whole free ones from the free lists, or inside larger free cells). Types
  // above nodes have no buckets: only their whole free cells are found.
  void CellsWithFree(int pool, int type, int count, std::vector<int>* out) const;
  // Takes `count` free GPUs inside `cell` (which must have that many; it may lie inside a
  // larger free cell), tightest first: whole
  // cells when they fit exactly, else the child with the fewest free GPUs that still fits.
  // Appends every cell taken whole to `taken`.
  void TakeLeaves(int cell, int count, std::vector<int>* taken);
  // The cells TakeLeaves would take whole, without taking them. With `avoid`, the GPU cells it
  // names are left out (GPUs observed busy) and the others planned, tightest first as ever;
  // false, planning nothing, when fewer than `count` others are free.
  bool PlanLeaves(int cell, int count, std::vector<int>* plan,
                  const std::function<bool(int gpu_cell)>& avoid = nullptr) const;
  // Takes this exact cell, which must be WholeFree (e.g. a GPU going bad).
  void TakeCell(int cell);
  // Gives back a cell taken whole; merges buddies up to the pool boundary.
  void Give(int cell);

  // Moves a cell taken from the physical pool into `pool` as one free cell, and back. Unbind
  // needs the cell entirely free in its pool; it is then taken in the physical pool again.
  void Bind(int cell, int pool);
  void Unbind(int cell);

  // "" when free counts, free lists and partial buckets all agree with the taken cells.
  std::string CheckConsistency() const;

 private:
  // The cell's free GPUs that `avoid` does not name (all of them without one).
  int FreeNotAvoided(int cell, const std::function<bool(int)>& avoid) const;
  void AddToList(int cell);
  void RemoveFromList(int cell);
  void SetFree(int cell, int free);
  void Split(int cell);
  void Expose(int cell);
  void TakeWhole(int cell);
  void AddToAncestors(int cell, int delta);
  void SetPool(int cell, int pool);

  const CellTree* tree_;
  std::vector<int> free_, pool_, pos_, bucket_pos_;
  std::vector<char> taken_;
  std::vector<std::vector<std::vector<int>>> lists_;  // [pool][type] -> cells
  // [pool][type][free GPUs] -> partly used cells, for best fit.
  std::vector<std::vector<std::vector<std::vector<int>>>> partial_;
  std::vector<std::vector<int>> holders_;  // [type] -> types containing it, smallest first
};

}  // namespace berth
