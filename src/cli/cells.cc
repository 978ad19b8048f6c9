// `berth cells`: the cell tree of a cluster with free / used / bad GPUs per type and per cell,
// and each virtual cluster's guarantee: of a cluster file offline (nothing placed), or with
// --server of the server's cluster as its jobs hold it now (GET /v1/cells). Both print the
// same report (config/cells_report.h).
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "config/cells_report.h"
#include "config/config_error.h"
#include "config/vc_file.h"
#include "core/allocator.h"

namespace berth {
namespace {

using Json = nlohmann::json;

// A JSON number as an int: nlohmann's operator<< would take std::setw as its indentation.
int Int(const Json& number) { return number.get<int>(); }

Level LevelOf(const Json& cell) {
  Level level = Level::kGpu;
  ParseLevel(cell["level"].get<std::string>(), &level);
  return level;
}

void PrintTree(const Json& cell, int depth, Level stop) {
  std::cout << std::string(2 * depth + 2, ' ') << cell["address"].get<std::string>() << " ("
            << cell["type"].get<std::string>() << "): " << Int(cell["free"]) << "/"
            << Int(cell["gpus"]) << " GPUs free";
  if (Int(cell["bad"]) != 0) std::cout << ", " << Int(cell["bad"]) << " bad";
  if (Int(cell["cordoned"]) != 0) std::cout << ", " << Int(cell["cordoned"]) << " cordoned";
  std::cout << "\n";
  if (LevelOf(cell) <= stop || !cell.contains("children")) return;
  for (const Json& kid : cell["children"]) PrintTree(kid, depth + 1, stop);
}

void PrintCells(const Json& j, Level stop) {
  std::cout << "cluster " << j["cluster"].get<std::string>() << ": " << Int(j["nodes"])
            << " nodes, " << Int(j["gpus"]) << " GPUs, " << Int(j["racks"]) << " racks\n\n";
  std::cout << "cell types (free / partly used / used / holding a bad GPU / an idle one of a "
               "cordoned node):\n";
  std::cout << "  " << std::left << std::setw(40) << "TYPE" << std::setw(9) << "LEVEL" << std::right
            << std::setw(6) << "GPUS" << std::setw(8) << "CELLS" << std::setw(7) << "FREE"
            << std::setw(9) << "PARTIAL" << std::setw(7) << "USED" << std::setw(6) << "BAD"
            << std::setw(10) << "CORDONED"
            << "\n";
  for (const Json& t : j["types"])
    std::cout << "  " << std::left << std::setw(40) << t["name"].get<std::string>() << std::setw(9)
              << t["level"].get<std::string>() << std::right << std::setw(6)
              << Int(t["gpus_per_cell"]) << std::setw(8) << Int(t["cells"]) << std::setw(7)
              << Int(t["free"]) << std::setw(9) << Int(t["partial"]) << std::setw(7)
              << Int(t["used"]) << std::setw(6) << Int(t["bad"]) << std::setw(10)
              << Int(t["cordoned"]) << "\n";
  std::cout << "\ntree:\n";
  PrintTree(j["tree"], 0, stop);
  if (!j["virtual_clusters"].empty()) {
    std::cout << "\nvirtual clusters (guaranteed / bound now / backed by healthy cells):\n";
    for (const Json& vc : j["virtual_clusters"]) {
      std::cout << "  " << vc["name"].get<std::string>() << ":";
      for (const Json& g : vc["guarantees"])
        std::cout << " " << g["cell_type"].get<std::string>() << " " << Int(g["guaranteed"]) << "/"
                  << Int(g["bound"]) << "/" << Int(g["healthy"]);
      std::cout << "\n";
    }
  }
}

struct CellsArgs {
  std::string cluster, vcs, depth = "node";
  std::string format = "table";
  bool server = false;
};

void RunCells(const CellsArgs& a) {
  Level stop = Level::kNode;
  if (!ParseLevel(a.depth, &stop))
    throw ConfigError("--depth: unknown level \"" + a.depth +
                      "\"; use gpu, switch, socket, node, rack or cluster");
  Json report;
  if (a.server) {
    report = CallServer("GET", "/v1/cells");
  } else {
    const Cluster cluster = LoadClusterArgument(a.cluster);
    std::vector<VirtualClusterSpec> specs;
    if (!a.vcs.empty()) specs = LoadVcFile(a.vcs);
    auto alloc = std::make_unique<Allocator>(&cluster, specs);
    // The cluster alone passed the engine's checks on load; what is left is about the VCs, and
    // a guarantee names its own file and line (VcGuarantee::where).
    if (!alloc->error().empty()) throw ConfigError(alloc->error());
    report = CellsReport(cluster, *alloc);
  }
  if (a.format == "json")
    std::cout << JsonText(report) << "\n";
  else
    PrintCells(report, stop);
}

}  // namespace

void AddCellsCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("cells", "Show a cluster's cell tree, free/used/bad per level");
  auto a = std::make_shared<CellsArgs>();
  auto* cluster =
      cmd->add_option("--cluster", a->cluster,
                      "Cluster file (YAML) or openb node list (.csv); default: embedded example")
          ->check(NonEmptyPath());
  auto* vcs =
      cmd->add_option("--vcs", a->vcs, "Virtual-cluster file (YAML)")->check(NonEmptyPath());
  cmd->add_flag("--server", a->server,
                "The cells of the server at $BERTH_ADDR, as its jobs hold them now")
      ->excludes(cluster)
      ->excludes(vcs);
  cmd->add_option("--depth", a->depth, "Deepest level the text tree shows (default node)");
  AddFormatOption(*cmd, &a->format);
  cmd->callback([a] { RunCells(*a); });
}

}  // namespace berth
