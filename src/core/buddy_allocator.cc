#include "core/buddy_allocator.h"

#include <algorithm>

namespace berth {

BuddyAllocator::BuddyAllocator(const CellTree* tree, int pool_count) : tree_(tree) {
  const auto& cells = tree->cells();
  const auto& types = tree->types();
  const size_t n = cells.size();
  free_.resize(n);
  pool_.assign(n, kPhysicalPool);
  pos_.assign(n, -1);
  bucket_pos_.assign(n, -1);
  taken_.assign(n, 0);
  lists_.assign(pool_count, std::vector<std::vector<int>>(types.size()));
  partial_.resize(pool_count);
  for (auto& per_type : partial_) {
    per_type.resize(types.size());
    // Best fit is only asked below racks; bigger types need no buckets (and copies stay cheap).
    for (size_t t = 0; t < types.size(); ++t)
      if (types[t].level <= Level::kNode) per_type[t].resize(types[t].leaf_count);
  }
  for (size_t c = 0; c < n; ++c) free_[c] = tree->type_of(c).leaf_count;
  if (tree->root() >= 0) AddToList(tree->root());
  holders_.resize(types.size());
  for (size_t t = 0; t < types.size(); ++t) {
    for (size_t a = 0; a < types.size(); ++a)
      if (a != t && tree->Contains(a, t)) holders_[t].push_back(static_cast<int>(a));
    std::sort(holders_[t].begin(), holders_[t].end(),
              [&](int a, int b) { return types[a].leaf_count < types[b].leaf_count; });
  }
}

void BuddyAllocator::AddToList(int cell) {
  auto& list = lists_[pool_[cell]][tree_->cells()[cell].type];
  pos_[cell] = static_cast<int>(list.size());
  list.push_back(cell);
}

void BuddyAllocator::RemoveFromList(int cell) {
  auto& list = lists_[pool_[cell]][tree_->cells()[cell].type];
  const int last = list.back();
  list[pos_[cell]] = last;
  pos_[last] = pos_[cell];
  list.pop_back();
  pos_[cell] = -1;
}

// Keeps the partial bucket of `cell` in step with its free count.
void BuddyAllocator::SetFree(int cell, int free) {
  const int size = tree_->type_of(cell).leaf_count;
  auto& buckets = partial_[pool_[cell]][tree_->cells()[cell].type];
  if (bucket_pos_[cell] >= 0) {
    auto& bucket = buckets[free_[cell]];
    const int last = bucket.back();
    bucket[bucket_pos_[cell]] = last;
    bucket_pos_[last] = bucket_pos_[cell];
    bucket.pop_back();
    bucket_pos_[cell] = -1;
  }
  free_[cell] = free;
  if (free > 0 && free < size && !buckets.empty()) {
    bucket_pos_[cell] = static_cast<int>(buckets[free].size());
    buckets[free].push_back(cell);
  }
}

void BuddyAllocator::AddToAncestors(int cell, int delta) {
  const int pool = pool_[cell];
  for (int a = tree_->cells()[cell].parent; a >= 0 && pool_[a] == pool;
       a = tree_->cells()[a].parent)
    SetFree(a, free_[a] + delta);
}

void BuddyAllocator::Split(int cell) {
  RemoveFromList(cell);
  for (int child : tree_->cells()[cell].children) AddToList(child);
}

void BuddyAllocator::TakeWhole(int cell) {
  RemoveFromList(cell);
  taken_[cell] = 1;
  const int size = free_[cell];
  SetFree(cell, 0);
  AddToAncestors(cell, -size);
}

int BuddyAllocator::TakeType(int pool, int type) {
  const int size = tree_->types()[type].leaf_count;
  int cell = lists_[pool][type].empty() ? -1 : lists_[pool][type].back();
  if (cell < 0) cell = FindFast(pool, type, size);
  if (cell < 0 || free_[cell] != size) return -1;
  TakeCell(cell);
  return cell;
}

int BuddyAllocator::FindPartial(int pool, int type, int count) const {
  const auto& buckets = partial_[pool][type];
  for (size_t f = count; f < buckets.size(); ++f)
    if (!buckets[f].empty()) return buckets[f].back();
  return -1;
}

int BuddyAllocator::FindFast(int pool, int type, int count) const {
  if (count < tree_->types()[type].leaf_count) {
    const int partial = FindPartial(pool, type, count);
    if (partial >= 0) return partial;
  }
  if (!lists_[pool][type].empty()) return lists_[pool][type].back();
  for (int holder : holders_[type]) {
    if (lists_[pool][holder].empty()) continue;
    int cell = lists_[pool][holder].back();
    while (tree_->cells()[cell].type != type)
      for (int child : tree_->cells()[cell].children)
        if (tree_->Contains(tree_->cells()[child].type, type)) {
          cell = child;
          break;
        }
    return cell;
  }
  return -1;
}

void BuddyAllocator::CellsWithFree(int pool, int type, int count, std::vector<int>* out) const {
  if (count > tree_->types()[type].leaf_count) return;
  const auto& buckets = partial_[pool][type];
  for (size_t f = std::max(count, 1); f < buckets.size(); ++f)
    out->insert(out->end(), buckets[f].begin(), buckets[f].end());
  out->insert(out->end(), lists_[pool][type].begin(), lists_[pool][type].end());
  // Inside larger free cells: down through the cells that can hold the type only, so a free
  // rack costs its nodes, not every cell below them.
  const auto& cells = tree_->cells();
  thread_local std::vector<int> scratch;
  std::vector<int>& stack = scratch;
  for (int holder : holders_[type])
    for (int free_cell : lists_[pool][holder]) {
      stack.assign(1, free_cell);
      while (!stack.empty()) {
        const int c = stack.back();
        stack.pop_back();
        if (cells[c].type == type) {
          out->push_back(c);
          continue;
        }
        for (auto child = cells[c].children.rbegin(); child != cells[c].children.rend(); ++child)
          if (tree_->Contains(cells[*child].type, type)) stack.push_back(*child);
      }
    }
}

int BuddyAllocator::FindWithin(int within, int type, int count,
                               const std::function<bool(int node)>& node_fits) const {
  const auto& cells = tree_->cells();
  const int pool = pool_[within];
  auto usable = [&](int c) {
    if (taken_[c] || pool_[c] != pool || free_[c] < count) return false;
    if (!tree_->Contains(cells[c].type, type)) return false;
    return !(tree_->type_of(c).level == Level::kNode && node_fits && !node_fits(cells[c].node));
  };
  if (!usable(within)) return -1;
  if (cells[within].type == type) return within;
  int best = -1;
  // Depth-first, fuller branches first; a strictly better fit replaces the best so far. The
  // scratch stacks are reused across calls: this runs for every node of every decision.
  thread_local std::vector<int> stack, kids;
  stack.assign(1, within);
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    if (!usable(c)) continue;
    if (cells[c].type == type) {
      if (best < 0 || free_[c] < free_[best]) best = c;
      if (free_[c] == count) return c;
      continue;
    }
    if (best >= 0 && free_[c] == tree_->type_of(c).leaf_count) continue;
    kids.assign(cells[c].children.begin(), cells[c].children.end());
    std::sort(kids.begin(), kids.end(), [&](int a, int b) { return free_[a] > free_[b]; });
    stack.insert(stack.end(), kids.begin(), kids.end());
  }
  return best;
}

int BuddyAllocator::FreeNotAvoided(int cell, const std::function<bool(int)>& avoid) const {
  if (!avoid) return free_[cell];
  if (tree_->type_of(cell).leaf_count == 1) return free_[cell] > 0 && !avoid(cell) ? 1 : 0;
  int free = 0;
  for (int child : tree_->cells()[cell].children)
    if (!taken_[child] && pool_[child] == pool_[cell]) free += FreeNotAvoided(child, avoid);
  return free;
}

bool BuddyAllocator::PlanLeaves(int cell, int count, std::vector<int>* plan,
                                const std::function<bool(int)>& avoid) const {
  if (count == 0) return true;
  if (FreeNotAvoided(cell, avoid) < count) return false;
  if (free_[cell] == count && count == tree_->type_of(cell).leaf_count) {
    plan->push_back(cell);
    return true;
  }
  const auto& children = tree_->cells()[cell].children;
  const int pool = pool_[cell];
  // Children of one GPU each (a PCIe switch's): the best fit below takes the first free ones in
  // order, one scan of every child per GPU taken. Taken in one scan instead: on a switch of 128
  // GPUs those scans were most of the time a gang's placement took.
  if (tree_->type_of(children.front()).leaf_count == 1) {
    for (size_t i = 0; i < children.size() && count > 0; ++i)
      if (!taken_[children[i]] && pool_[children[i]] == pool && free_[children[i]] > 0 &&
          !(avoid && avoid(children[i]))) {
        plan->push_back(children[i]);
        --count;
      }
    return true;
  }
  // Inside an entirely free cell the children's counts are full, so they read the same.
  std::vector<int> left;
  for (int child : children)
    left.push_back(taken_[child] || pool_[child] != pool ? 0 : FreeNotAvoided(child, avoid));
  while (count > 0) {
    int fit = -1, largest = -1;
    for (size_t i = 0; i < children.size(); ++i) {
      if (left[i] == 0) continue;
      if (left[i] >= count && (fit < 0 || left[i] < left[fit])) fit = static_cast<int>(i);
      if (largest < 0 || left[i] > left[largest]) largest = static_cast<int>(i);
    }
    const int pick = fit >= 0 ? fit : largest;
    const int part = std::min(count, left[pick]);
    PlanLeaves(children[pick], part, plan, avoid);
    left[pick] = 0;
    count -= part;
  }
  return true;
}

void BuddyAllocator::TakeLeaves(int cell, int count, std::vector<int>* taken) {
  std::vector<int> plan;
  PlanLeaves(cell, count, &plan);
  for (int c : plan) TakeCell(c);
  taken->insert(taken->end(), plan.begin(), plan.end());
}

bool BuddyAllocator::WholeFree(int cell) const {
  if (free_[cell] != tree_->type_of(cell).leaf_count) return false;
  // Up to the maximal free cell holding it, which is listed; a taken one on the way ends it.
  for (int c = cell; c >= 0 && pool_[c] == pool_[cell]; c = tree_->cells()[c].parent) {
    if (taken_[c]) return false;
    if (pos_[c] >= 0) return true;
  }
  return false;
}

// Makes an entirely free cell a listed one by splitting the free cells above it.
void BuddyAllocator::Expose(int cell) {
  if (pos_[cell] >= 0 || free_[cell] != tree_->type_of(cell).leaf_count) return;
  const auto& cells = tree_->cells();
  std::vector<int> path;  // from the cell up to its maximal free ancestor
  int c = cell;
  while (pos_[c] < 0) {
    path.push_back(c);
    c = cells[c].parent;
  }
  while (c != cell) {
    Split(c);
    c = path.back();
    path.pop_back();
  }
}

void BuddyAllocator::TakeCell(int cell) {
  Expose(cell);
  TakeWhole(cell);
}

void BuddyAllocator::Give(int cell) {
  const auto& cells = tree_->cells();
  taken_[cell] = 0;
  const int size = tree_->type_of(cell).leaf_count;
  SetFree(cell, size);
  AddToAncestors(cell, size);
  AddToList(cell);
  int c = cell;
  for (int p = cells[c].parent;
       p >= 0 && pool_[p] == pool_[c] && free_[p] == tree_->type_of(p).leaf_count;
       c = p, p = cells[p].parent) {
    for (int child : cells[p].children) RemoveFromList(child);
    AddToList(p);
  }
}

void BuddyAllocator::SetPool(int cell, int pool) {
  const auto& cells = tree_->cells();
  std::vector<int> stack = {cell};
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    pool_[c] = pool;
    for (int child : cells[c].children) stack.push_back(child);
  }
}

void BuddyAllocator::Bind(int cell, int pool) {
  // Cells inside a taken cell are all free (the invariant that makes Give O(depth)).
  SetPool(cell, pool);
  taken_[cell] = 0;
  SetFree(cell, tree_->type_of(cell).leaf_count);
  AddToList(cell);
}

void BuddyAllocator::Unbind(int cell) {
  RemoveFromList(cell);
  SetPool(cell, kPhysicalPool);
  taken_[cell] = 1;
  free_[cell] = 0;
}

std::string BuddyAllocator::CheckConsistency() const {
  const auto& cells = tree_->cells();
  const int n = static_cast<int>(cells.size());
  // Expected free counts, bottom-up (children have larger ids in preorder).
  std::vector<int> expect(n, 0);
  std::vector<char> inside_whole(n, 0);  // inside a taken or listed cell: counts are implied
  for (int c = 0; c < n; ++c) {
    const int p = cells[c].parent;
    if (p >= 0 && pool_[p] == pool_[c] && (inside_whole[p] || taken_[p] || pos_[p] >= 0))
      inside_whole[c] = 1;
  }
  for (int c = n - 1; c >= 0; --c) {
    const int size = tree_->type_of(c).leaf_count;
    if (taken_[c])
      expect[c] = 0;
    else if (pos_[c] >= 0 || inside_whole[c])
      expect[c] = size;
    else
      for (int child : cells[c].children)
        if (pool_[child] == pool_[c]) expect[c] += expect[child];
    // Built only for a message: this check runs after every step of the property tests.
    const auto where = [&] {
      return "cell " + cells[c].address + " (" + tree_->type_of(c).name + ")";
    };
    if (free_[c] != expect[c])
      return where() + ": free count " + std::to_string(free_[c]) + ", tree says " +
             std::to_string(expect[c]);
    const bool partial =
        expect[c] > 0 && expect[c] < size && tree_->type_of(c).level <= Level::kNode;
    if (partial != (bucket_pos_[c] >= 0)) return where() + ": partial bucket out of step";
    if (!inside_whole[c] && !taken_[c]) {
      const bool whole_free = expect[c] == size;
      if (whole_free != (pos_[c] >= 0)) return where() + ": free list out of step";
    }
    if (inside_whole[c] && pos_[c] >= 0) return where() + ": listed inside a free or taken cell";
  }
  for (size_t pool = 0; pool < lists_.size(); ++pool)
    for (size_t t = 0; t < lists_[pool].size(); ++t)
      for (size_t i = 0; i < lists_[pool][t].size(); ++i) {
        const int c = lists_[pool][t][i];
        if (pos_[c] != static_cast<int>(i) || pool_[c] != static_cast<int>(pool) ||
            cells[c].type != static_cast<int>(t))
          return "free list entry " + cells[c].address + " is misfiled";
      }
  return "";
}

}  // namespace berth
