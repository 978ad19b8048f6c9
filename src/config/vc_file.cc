#include "config/vc_file.h"

#include "config/file_text.h"
#include "config/limits.h"
#include "config/vc_fields.h"
#include "config/yaml_reader.h"

namespace berth {
namespace {

// Adds one guarantee; a cell type listed twice for a VC, or more than the bounds allow, is an
// error at `at`. The bounds keep the engine's sums over all VCs within an int.
void AddGuarantee(const YamlReader& r, const YAML::Node& at, const std::string& path,
                  VcGuarantee guarantee, VirtualClusterSpec* vc) {
  if (vc->guarantees.size() >= static_cast<size_t>(limits::Get().vc_cell_types))
    r.Fail(at, path,
           "VC \"" + vc->name + "\" lists " +
               limits::OverLimit(&limits::Limits::vc_cell_types, "cell types"));
  int64_t cells = guarantee.count;
  for (const VcGuarantee& g : vc->guarantees) {
    if (g.cell_type == guarantee.cell_type)
      r.Fail(at, path,
             "cell type \"" + g.cell_type + "\" is listed twice for VC \"" + vc->name +
                 "\"; give its total once");
    cells += g.count;
  }
  if (cells > limits::Get().gpus)
    r.Fail(at, path,
           "VC \"" + vc->name + "\" is guaranteed " +
               limits::OverLimit(&limits::Limits::gpus, "cells in all"));
  guarantee.where = r.Where(at);
  vc->guarantees.push_back(std::move(guarantee));
}

VirtualClusterSpec ParseVc(const YamlReader& r, const YamlEntry& entry, const std::string& path) {
  VirtualClusterSpec vc;
  vc.name = entry.key;
  if (entry.value.IsNull()) return vc;  // "vc3:" alone: borrow-only
  r.CheckFields(entry.value, path, {"virtualCells", "guarantees", "lendingLimit"});
  ParseVcGuarantees(r, entry.value, path, &vc);
  return vc;
}

}  // namespace

void ParseVcGuarantees(const YamlReader& r, const YAML::Node& map, const std::string& path,
                       VirtualClusterSpec* vc) {
  const YAML::Node cells = map["virtualCells"];
  const YAML::Node guarantees = map["guarantees"];
  if (cells && guarantees)
    r.Fail(guarantees, path, "give either virtualCells or guarantees, not both");
  if (cells) {
    const std::string cells_path = FieldPath(path, "virtualCells");
    r.Sequence(cells, cells_path);
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string cell_path = IndexPath(cells_path, i);
      r.CheckFields(cells[i], cell_path, {"cellType", "cellNumber"});
      VcGuarantee g;
      g.cell_type =
          r.String(r.Required(cells[i], cell_path, "cellType"), FieldPath(cell_path, "cellType"));
      g.count =
          static_cast<int>(r.Int(r.Required(cells[i], cell_path, "cellNumber"),
                                 FieldPath(cell_path, "cellNumber"), 1, &limits::Limits::gpus));
      AddGuarantee(r, cells[i], cell_path, std::move(g), vc);
    }
  }
  if (guarantees) {
    const std::string guarantees_path = FieldPath(path, "guarantees");
    for (const YamlEntry& g : r.Entries(guarantees, guarantees_path)) {
      const std::string count_path = FieldPath(guarantees_path, g.key);
      const int count = static_cast<int>(r.Int(g.value, count_path, 1, &limits::Limits::gpus));
      AddGuarantee(r, g.key_node, count_path, {g.key, count}, vc);
    }
  }
  if (const YAML::Node limits = map["lendingLimit"]) {
    const std::string limits_path = FieldPath(path, "lendingLimit");
    for (const YamlEntry& l : r.Entries(limits, limits_path)) {
      const std::string limit_path = FieldPath(limits_path, l.key);
      VcGuarantee* of = nullptr;
      for (VcGuarantee& g : vc->guarantees)
        if (g.cell_type == l.key) of = &g;
      if (!of)
        r.Fail(l.key_node, limit_path,
               "\"" + l.key +
                   "\" is not one of this VC's guarantees; a lending limit caps how many "
                   "cells of a guarantee are lent out");
      of->lending_limit = static_cast<int>(r.Int(l.value, limit_path, 0, of->count));
    }
  }
}

std::vector<VirtualClusterSpec> LoadVcFile(const std::string& path) {
  return ParseVcYaml(ReadFileText(path), path);
}

std::vector<VirtualClusterSpec> ParseVcYaml(const std::string& text,
                                            const std::string& source_name) {
  const YamlReader r(source_name);
  const YAML::Node root = r.Parse(text);
  r.CheckFields(root, "", {"virtualClusters"});
  std::vector<VirtualClusterSpec> vcs;
  const YAML::Node list = r.Required(root, "", "virtualClusters");
  const std::vector<YamlEntry> entries = r.Entries(list, "virtualClusters");
  // Each VC becomes a queue of the engine.
  if (entries.size() > static_cast<size_t>(limits::Get().queues))
    r.Fail(list, "virtualClusters",
           std::to_string(entries.size()) + " VCs, " +
               limits::OverLimit(&limits::Limits::queues, "VCs"));
  for (const YamlEntry& entry : entries)
    vcs.push_back(ParseVc(r, entry, FieldPath("virtualClusters", entry.key)));
  return vcs;
}

std::vector<QueueSpec> VcQueues(const std::vector<VirtualClusterSpec>& vcs) {
  std::vector<QueueSpec> queues;
  for (const VirtualClusterSpec& vc : vcs) queues.push_back({vc.name, 1, -1, vc.guarantees});
  return queues;
}

}  // namespace berth
