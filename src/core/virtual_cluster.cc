#include "core/virtual_cluster.h"

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

std::string ResolveVirtualClusters(const CellTree& tree,
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
      const int type = tree.FindType(g.cell_type);
      if (type < 0) {
        std::string known;
        for (const CellType& t : tree.types()) known += (known.empty() ? "" : ", ") + t.name;
        return at(g) + "virtualClusters." + spec.name + ": unknown cellType \"" + g.cell_type +
               "\"; this cluster's cell types are: " + known;
      }
      if (g.count < 1)
        return at(g) + "virtualClusters." + spec.name + ": cellNumber of " + g.cell_type +
               " must be at least 1";
      last_where[type] = at(g);
      vc.guarantee_types.push_back(type);
      vc.guarantee_counts.push_back(g.count);
      vc.bound_counts.push_back(0);
      if (g.lending_limit > g.count)
        return "virtualClusters." + spec.name + ".lendingLimit." + g.cell_type +
               ": at most the guarantee's " + std::to_string(g.count) + " cells";
      vc.unlent_counts.push_back(g.lending_limit < 0 ? 0 : g.count - g.lending_limit);
      needed[type] += g.count;
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
