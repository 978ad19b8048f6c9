#include "config/cells_report.h"

#include <vector>

namespace berth {
namespace {

struct CellCounts {
  int gpus = 0, free = 0, bad = 0;
  int cordoned = 0;  // idle, but on a cordoned node: neither free for new jobs nor broken
};

// Free, bad and cordoned GPUs under every cell, from the allocator's per-GPU state.
std::vector<CellCounts> CountGpus(const Allocator& alloc) {
  const CellTree& tree = alloc.tree();
  const auto& cells = tree.cells();
  std::vector<CellCounts> counts(cells.size());
  for (int c = static_cast<int>(cells.size()) - 1; c >= 0; --c) {
    if (cells[c].gpu >= 0) {
      counts[c].gpus = 1;
      const int node = cells[c].node, gpu = cells[c].gpu;
      counts[c].bad = alloc.gpu_bad(node, gpu);
      counts[c].cordoned = !counts[c].bad && alloc.node_cordoned(node) && alloc.gpu_idle(node, gpu);
      counts[c].free = alloc.gpu_free(node, gpu);
    }
    const int p = cells[c].parent;
    if (p >= 0) {
      counts[p].gpus += counts[c].gpus;
      counts[p].free += counts[c].free;
      counts[p].bad += counts[c].bad;
      counts[p].cordoned += counts[c].cordoned;
    }
  }
  return counts;
}

nlohmann::json TreeJson(const Allocator& alloc, const std::vector<CellCounts>& counts, int c) {
  const Cell& cell = alloc.tree().cells()[c];
  const CellType& type = alloc.tree().type_of(c);
  nlohmann::json j = {
      {"address", cell.address},
      {"type", type.name},
      {"level", LevelName(type.level)},
      {"gpus", counts[c].gpus},
      {"free", counts[c].free},
      {"bad", counts[c].bad},
      {"cordoned", counts[c].cordoned},
      {"used", counts[c].gpus - counts[c].free - counts[c].bad - counts[c].cordoned}};
  if (!cell.children.empty()) {
    nlohmann::json kids = nlohmann::json::array();
    for (int k : cell.children) kids.push_back(TreeJson(alloc, counts, k));
    j["children"] = std::move(kids);
  }
  return j;
}

}  // namespace

nlohmann::json CellsReport(const Cluster& cluster, const Allocator& alloc) {
  const CellTree& tree = alloc.tree();
  const std::vector<CellCounts> counts = CountGpus(alloc);
  struct TypeRow {
    int cells = 0, free = 0, partial = 0, used = 0, bad = 0, cordoned = 0;
  };
  std::vector<TypeRow> rows(tree.types().size());
  for (size_t c = 0; c < tree.cells().size(); ++c) {
    TypeRow& r = rows[tree.cells()[c].type];
    const CellCounts& k = counts[c];
    ++r.cells;
    if (k.bad)
      ++r.bad;
    else if (k.cordoned)
      ++r.cordoned;
    else if (k.free == k.gpus)
      ++r.free;
    else if (k.free == 0)
      ++r.used;
    else
      ++r.partial;
  }
  nlohmann::json j;
  j["cluster"] = cluster.name;
  j["nodes"] = cluster.nodes.size();
  j["gpus"] = cluster.gpu_count();
  j["racks"] = cluster.racks.size();
  j["types"] = nlohmann::json::array();
  for (size_t t = 0; t < rows.size(); ++t) {
    const CellType& type = tree.types()[t];
    j["types"].push_back({{"name", type.name},
                          {"level", LevelName(type.level)},
                          {"gpus_per_cell", type.leaf_count},
                          {"model", type.model},
                          {"cells", rows[t].cells},
                          {"free", rows[t].free},
                          {"partial", rows[t].partial},
                          {"used", rows[t].used},
                          {"bad", rows[t].bad},
                          {"cordoned", rows[t].cordoned}});
  }
  j["virtual_clusters"] = nlohmann::json::array();
  for (size_t v = 0; v < alloc.vcs().size(); ++v) {
    nlohmann::json vc = {{"name", alloc.vcs()[v].name}, {"guarantees", nlohmann::json::array()}};
    for (const auto& s : alloc.VcStatus(static_cast<int>(v)))
      vc["guarantees"].push_back({{"cell_type", tree.types()[s.type].name},
                                  {"guaranteed", s.guaranteed},
                                  {"bound", s.bound},
                                  {"healthy", s.healthy}});
    j["virtual_clusters"].push_back(std::move(vc));
  }
  j["tree"] = TreeJson(alloc, counts, tree.root());
  return j;
}

}  // namespace berth
