#include "config/vc_file.h"

#include "config/file_text.h"
#include "config/vc_fields.h"
#include "config/yaml_reader.h"

namespace berth {
namespace {

constexpr int64_t kMaxCells = 1 << 20;

// Adds one guarantee; a cell type listed twice for a VC is an error at `at`.
void AddGuarantee(const YamlReader& r, const YAML::Node& at, const std::string& path,
                  VcGuarantee guarantee, VirtualClusterSpec* vc) {
  for (const VcGuarantee& g : vc->guarantees)
    if (g.cell_type == guarantee.cell_type)
      r.Fail(at, path,
             "cell type \"" + g.cell_type + "\" is listed twice for VC \"" + vc->name +
                 "\"; give its total once");
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
      g.count = static_cast<int>(r.Int(r.Required(cells[i], cell_path, "cellNumber"),
                                       FieldPath(cell_path, "cellNumber"), 1, kMaxCells));
      AddGuarantee(r, cells[i], cell_path, std::move(g), vc);
    }
  }
  if (guarantees) {
    const std::string guarantees_path = FieldPath(path, "guarantees");
    for (const YamlEntry& g : r.Entries(guarantees, guarantees_path)) {
      const std::string count_path = FieldPath(guarantees_path, g.key);
      const int count = static_cast<int>(r.Int(g.value, count_path, 1, kMaxCells));
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
  for (const YamlEntry& entry :
       r.Entries(r.Required(root, "", "virtualClusters"), "virtualClusters"))
    vcs.push_back(ParseVc(r, entry, FieldPath("virtualClusters", entry.key)));
  return vcs;
}

}  // namespace berth
