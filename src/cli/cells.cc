// `berth cells`: the cell tree of a cluster with free / used / bad GPUs per type and per cell,
// and each virtual cluster's guarantee.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "config/config_error.h"
#include "config/vc_file.h"
#include "core/allocator.h"

namespace berth {
namespace {

struct CellCounts {
  int gpus = 0, free = 0, bad = 0;
};

// Free and bad GPUs under every cell, from the allocator's per-GPU state.
std::vector<CellCounts> CountGpus(const Allocator& alloc) {
  const CellTree& tree = alloc.tree();
  const auto& cells = tree.cells();
  std::vector<CellCounts> counts(cells.size());
  for (int c = static_cast<int>(cells.size()) - 1; c >= 0; --c) {
    if (cells[c].gpu >= 0) {
      counts[c].gpus = 1;
      counts[c].bad = !alloc.gpu_usable(cells[c].node, cells[c].gpu);
      counts[c].free = !counts[c].bad && alloc.gpu_free(cells[c].node, cells[c].gpu);
    }
    const int p = cells[c].parent;
    if (p >= 0) {
      counts[p].gpus += counts[c].gpus;
      counts[p].free += counts[c].free;
      counts[p].bad += counts[c].bad;
    }
  }
  return counts;
}

nlohmann::json TreeJson(const Allocator& alloc, const std::vector<CellCounts>& counts, int c) {
  const Cell& cell = alloc.tree().cells()[c];
  const CellType& type = alloc.tree().type_of(c);
  nlohmann::json j = {{"address", cell.address},
                      {"type", type.name},
                      {"level", LevelName(type.level)},
                      {"gpus", counts[c].gpus},
                      {"free", counts[c].free},
                      {"bad", counts[c].bad},
                      {"used", counts[c].gpus - counts[c].free - counts[c].bad}};
  if (!cell.children.empty()) {
    nlohmann::json kids = nlohmann::json::array();
    for (int k : cell.children) kids.push_back(TreeJson(alloc, counts, k));
    j["children"] = std::move(kids);
  }
  return j;
}

void PrintTree(const Allocator& alloc, const std::vector<CellCounts>& counts, int c, int depth,
               Level stop) {
  const Cell& cell = alloc.tree().cells()[c];
  const CellType& type = alloc.tree().type_of(c);
  std::cout << std::string(2 * depth + 2, ' ') << cell.address << " (" << type.name
            << "): " << counts[c].free << "/" << counts[c].gpus << " GPUs free";
  if (counts[c].bad) std::cout << ", " << counts[c].bad << " bad";
  std::cout << "\n";
  if (type.level <= stop) return;
  for (int k : cell.children) PrintTree(alloc, counts, k, depth + 1, stop);
}

void RunCells(const std::string& cluster_path, const std::string& vcs_path, bool json,
              const std::string& depth) {
  const Cluster cluster = LoadClusterArgument(cluster_path);
  std::vector<VirtualClusterSpec> specs;
  if (!vcs_path.empty()) specs = LoadVcFile(vcs_path);
  Level stop = Level::kNode;
  if (!ParseLevel(depth, &stop))
    throw ConfigError("--depth: unknown level \"" + depth +
                      "\"; use gpu, switch, socket, node, rack or cluster");
  auto alloc = std::make_unique<Allocator>(&cluster, specs);
  // The cluster alone passed the engine's checks on load; what is left is about the VCs, and a
  // guarantee names its own file and line (VcGuarantee::where).
  if (!alloc->error().empty()) throw ConfigError(alloc->error());
  const CellTree& tree = alloc->tree();
  const auto counts = CountGpus(*alloc);

  // Per type: cells entirely free, partly used, entirely used, holding a bad GPU.
  struct TypeRow {
    int cells = 0, free = 0, partial = 0, used = 0, bad = 0;
  };
  std::vector<TypeRow> rows(tree.types().size());
  for (size_t c = 0; c < tree.cells().size(); ++c) {
    TypeRow& r = rows[tree.cells()[c].type];
    const CellCounts& k = counts[c];
    ++r.cells;
    if (k.bad)
      ++r.bad;
    else if (k.free == k.gpus)
      ++r.free;
    else if (k.free == 0)
      ++r.used;
    else
      ++r.partial;
  }

  if (json) {
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
                            {"bad", rows[t].bad}});
    }
    j["virtual_clusters"] = nlohmann::json::array();
    for (size_t v = 0; v < alloc->vcs().size(); ++v) {
      nlohmann::json vc = {{"name", alloc->vcs()[v].name}, {"guarantees", nlohmann::json::array()}};
      for (const auto& s : alloc->VcStatus(static_cast<int>(v)))
        vc["guarantees"].push_back({{"cell_type", tree.types()[s.type].name},
                                    {"guaranteed", s.guaranteed},
                                    {"bound", s.bound},
                                    {"healthy", s.healthy}});
      j["virtual_clusters"].push_back(std::move(vc));
    }
    j["tree"] = TreeJson(*alloc, counts, tree.root());
    std::cout << JsonText(j) << "\n";
    return;
  }

  std::cout << "cluster " << cluster.name << ": " << cluster.nodes.size() << " nodes, "
            << cluster.gpu_count() << " GPUs, " << cluster.racks.size() << " racks\n\n";
  std::cout << "cell types (free / partly used / used / holding a bad GPU):\n";
  std::cout << "  " << std::left << std::setw(40) << "TYPE" << std::setw(9) << "LEVEL" << std::right
            << std::setw(6) << "GPUS" << std::setw(8) << "CELLS" << std::setw(7) << "FREE"
            << std::setw(9) << "PARTIAL" << std::setw(7) << "USED" << std::setw(6) << "BAD"
            << "\n";
  for (size_t t = 0; t < rows.size(); ++t) {
    const CellType& type = tree.types()[t];
    std::cout << "  " << std::left << std::setw(40) << type.name << std::setw(9)
              << LevelName(type.level) << std::right << std::setw(6) << type.leaf_count
              << std::setw(8) << rows[t].cells << std::setw(7) << rows[t].free << std::setw(9)
              << rows[t].partial << std::setw(7) << rows[t].used << std::setw(6) << rows[t].bad
              << "\n";
  }
  std::cout << "\ntree:\n";
  PrintTree(*alloc, counts, tree.root(), 0, stop);
  if (!alloc->vcs().empty()) {
    std::cout << "\nvirtual clusters (guaranteed / bound now / backed by healthy cells):\n";
    for (size_t v = 0; v < alloc->vcs().size(); ++v) {
      std::cout << "  " << alloc->vcs()[v].name << ":";
      for (const auto& s : alloc->VcStatus(static_cast<int>(v)))
        std::cout << " " << tree.types()[s.type].name << " " << s.guaranteed << "/" << s.bound
                  << "/" << s.healthy;
      std::cout << "\n";
    }
  }
}

}  // namespace

void AddCellsCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("cells", "Show a cluster's cell tree, free/used/bad per level");
  auto cluster = std::make_shared<std::string>();
  auto vcs = std::make_shared<std::string>();
  auto depth = std::make_shared<std::string>("node");
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--cluster", *cluster,
                  "Cluster file (YAML) or openb node list (.csv); default: embedded example")
      ->check(NonEmptyPath());
  cmd->add_option("--vcs", *vcs, "Virtual-cluster file (YAML)")->check(NonEmptyPath());
  cmd->add_option("--depth", *depth, "Deepest level the text tree shows (default node)");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([=] { RunCells(*cluster, *vcs, *json, *depth); });
}

}  // namespace berth
