#include "core/virtual_cluster.h"

#include <algorithm>

namespace berth {

std::vector<int> GuaranteeShortfall(const CellTree& tree, const std::vector<int>& available,
                                    const std::vector<int>& needed) {
  const auto& types = tree.types();
  const int n = static_cast<int>(types.size());
  std::vector<long long> supply(available.begin(), available.end());
  std::vector<int> shortfall(n, 0);
  // Types are interned children first, so walking ids downward visits holders before parts.
  for (int t = n - 1; t >= 0; --t) {
    long long left = supply[t] - needed[t];
    if (left < 0) {
      shortfall[t] = static_cast<int>(-left);
      left = 0;
    }
    for (const auto& [child, count] : types[t].children) supply[child] += left * count;
  }
  return shortfall;
}

int ShortfallGpus(const CellTree& tree, const std::vector<int>& shortfall) {
  int gpus = 0;
  for (size_t t = 0; t < shortfall.size(); ++t) gpus += shortfall[t] * tree.types()[t].leaf_count;
  return gpus;
}

namespace {

// For a guarantee named "<model>/<MIG profile>": the cell type of the MIG GPUs that hold its
// instances and how many one GPU holds. Returns false when the name is no model's profile;
// `error` is set when it is one but no GPU of the cluster can hold it.
bool MigSliceCells(const Cluster& cluster, const CellTree& tree, const std::string& name, int* type,
                   int* per_gpu, std::string* error) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return false;
  const GpuModel* model = cluster.FindModel(name.substr(0, slash));
  const std::string profile = name.substr(slash + 1);
  const int index = model ? FindMigProfile(model->mig_profiles, profile) : -1;
  if (index < 0) return false;
  std::vector<std::pair<int, int>> fixed;  // (type, instances per GPU) of fixed layouts
  std::string fixed_names;
  for (int leaf : tree.leaves()) {
    const Cell& cell = tree.cells()[leaf];
    const CellType& t = tree.types()[cell.type];
    if (!t.mig || t.model != model->name) continue;
    const Gpu& gpu = cluster.nodes[cell.node].gpus[cell.gpu];
    if (gpu.mig_layout.empty()) {  // carved on demand: as many as the profile allows
      *type = cell.type;
      *per_gpu = model->mig_profiles[index].max_instances;
      return true;
    }
    int holds = 0;
    for (const std::string& entry : gpu.mig_layout)
      holds += entry.substr(0, entry.find('@')) == profile;
    const bool seen = std::any_of(fixed.begin(), fixed.end(),
                                  [&](const auto& f) { return f.first == cell.type; });
    if (holds > 0 && !seen) {
      fixed.push_back({cell.type, holds});
      fixed_names += (fixed_names.empty() ? "" : ", ") + t.name;
    }
  }
  if (fixed.size() == 1) {
    *type = fixed[0].first;
    *per_gpu = fixed[0].second;
  } else if (fixed.empty()) {
    *error = "no MIG-enabled " + model->name + " GPU of the cluster can hold a " + profile +
             " instance; enable MIG on a shape of that model";
  } else {
    *error = profile + " instances come from several fixed MIG layouts (" + fixed_names +
             "); name one of those cell types instead";
  }
  return true;
}

}  // namespace

std::string ResolveVirtualClusters(const Cluster& cluster, const CellTree& tree,
                                   const std::vector<VirtualClusterSpec>& specs,
                                   std::vector<VirtualCluster>* out) {
  out->clear();
  const int n = static_cast<int>(tree.types().size());
  std::vector<int> needed(n, 0);
  std::vector<std::string> last_where(n);  // of the last guarantee of each type, for messages
  const auto at = [](const VcGuarantee& g) { return g.where.empty() ? "" : g.where + ": "; };
  for (const VirtualClusterSpec& spec : specs) {
    VirtualCluster vc;
    vc.name = spec.name;
    for (const VcGuarantee& g : spec.guarantees) {
      int type = tree.FindType(g.cell_type), per_cell = 1;  // instances per cell
      std::string slice_error;
      if (type < 0 && !MigSliceCells(cluster, tree, g.cell_type, &type, &per_cell, &slice_error)) {
        std::string known;
        for (const CellType& t : tree.types()) known += (known.empty() ? "" : ", ") + t.name;
        return at(g) + "virtualClusters." + spec.name + ": unknown cellType \"" + g.cell_type +
               "\"; this cluster's cell types are: " + known +
               " (or <model>/<MIG profile> for MIG instances)";
      }
      if (!slice_error.empty())
        return at(g) + "virtualClusters." + spec.name + "." + g.cell_type + ": " + slice_error;
      if (g.count < 1)
        return at(g) + "virtualClusters." + spec.name + ": cellNumber of " + g.cell_type +
               " must be at least 1";
      if (g.lending_limit > g.count)
        return "virtualClusters." + spec.name + ".lendingLimit." + g.cell_type +
               ": at most the guarantee's " + std::to_string(g.count) +
               (per_cell > 1 ? " instances" : " cells");
      // Instances round up to the cells that hold them, and so do the instances kept unlent.
      const int cells = (g.count + per_cell - 1) / per_cell;
      const int unlent =
          g.lending_limit < 0 ? 0 : (g.count - g.lending_limit + per_cell - 1) / per_cell;
      last_where[type] = at(g);
      vc.guarantee_types.push_back(type);
      vc.guarantee_counts.push_back(cells);
      vc.bound_counts.push_back(0);
      vc.promised_counts.push_back(0);
      vc.unlent_counts.push_back(unlent);
      needed[type] += cells;
    }
    out->push_back(std::move(vc));
  }
  std::vector<int> available(n, 0);
  available[tree.cells()[tree.root()].type] = 1;
  const std::vector<int> short_by = GuaranteeShortfall(tree, available, needed);
  for (int t = 0; t < n; ++t)
    if (short_by[t] > 0)
      return last_where[t] + "virtualClusters: the guarantees ask for " +
             std::to_string(needed[t]) + " x " + tree.types()[t].name +
             " but the cluster can back only " + std::to_string(needed[t] - short_by[t]) +
             " next to the other guarantees; lower a cellNumber or add hardware";
  return "";
}

}  // namespace berth
