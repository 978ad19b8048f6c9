#include "sim/packing_bound.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "core/policy.h"
#include "sim/packing.h"

namespace berth {
namespace {

int64_t RequestedMilli(const TracePod& p) { return int64_t{p.gpus} * p.gpu_milli; }

// Dinic's maximum flow; the graphs here have a few hundred vertices.
class MaxFlow {
 public:
  explicit MaxFlow(int n) : adj_(n), level_(n), next_(n) {}
  void Add(int from, int to, int64_t cap) {
    adj_[from].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, cap});
    adj_[to].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }
  int64_t Run(int s, int t) {
    int64_t flow = 0;
    while (Levels(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (const int64_t f = Push(s, t, std::numeric_limits<int64_t>::max())) flow += f;
    }
    return flow;
  }

 private:
  struct Edge {
    int to;
    int64_t cap;
  };
  bool Levels(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      const int v = q.front();
      q.pop();
      for (int e : adj_[v])
        if (edges_[e].cap > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[v] + 1;
          q.push(edges_[e].to);
        }
    }
    return level_[t] >= 0;
  }
  int64_t Push(int v, int t, int64_t limit) {
    if (v == t) return limit;
    for (; next_[v] < static_cast<int>(adj_[v].size()); ++next_[v]) {
      Edge& e = edges_[adj_[v][next_[v]]];
      if (e.cap <= 0 || level_[e.to] != level_[v] + 1) continue;
      if (const int64_t f = Push(e.to, t, std::min(limit, e.cap))) {
        e.cap -= f;
        edges_[adj_[v][next_[v]] ^ 1].cap += f;
        return f;
      }
    }
    return 0;
  }
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> adj_;
  std::vector<int> level_, next_;
};

}  // namespace

int64_t FluidUpperBoundMilli(const Cluster& cluster, const std::vector<const TracePod*>& pods) {
  // Node shapes: (model, GPUs, CPU, memory) -> GPU milli of all such nodes.
  using NodeShape = std::tuple<std::string, int, int64_t, int64_t>;
  std::map<NodeShape, int64_t> nodes;
  for (const Node& n : cluster.nodes)
    if (!n.gpus.empty())
      nodes[{n.gpus[0].model, static_cast<int>(n.gpus.size()), n.cpu_milli, n.memory_mib}] +=
          static_cast<int64_t>(n.gpus.size()) * 1000;
  // Pod shapes -> the GPU milli they ask; CPU-only pods add nothing to the objective.
  using PodShape = std::tuple<int, int, int64_t, int64_t, std::vector<std::string>>;
  std::map<PodShape, int64_t> shapes;
  for (const TracePod* p : pods)
    if (RequestedMilli(*p) > 0)
      shapes[{p->gpus, p->gpu_milli, p->cpu_milli, p->memory_mib, p->models}] += RequestedMilli(*p);
  const int source = 0, sink = 1, first_shape = 2;
  const int first_node = first_shape + static_cast<int>(shapes.size());
  MaxFlow flow(first_node + static_cast<int>(nodes.size()));
  int s = first_shape;
  for (const auto& [shape, milli] : shapes) {
    const auto& [gpus, gpu_milli, cpu, memory, models] = shape;
    flow.Add(source, s, milli);
    int n = first_node;
    for (const auto& [node, capacity] : nodes) {
      const auto& [model, node_gpus, node_cpu, node_memory] = node;
      if (gpus <= node_gpus && cpu <= node_cpu && memory <= node_memory &&
          (models.empty() || std::find(models.begin(), models.end(), model) != models.end()))
        flow.Add(s, n, milli);
      ++n;
    }
    ++s;
  }
  int n = first_node;
  for (const auto& [node, capacity] : nodes) flow.Add(n++, sink, capacity);
  return flow.Run(source, sink);
}

OfflinePacking BestOfflinePacking(const Cluster& cluster, const std::vector<const TracePod*>& pods,
                                  const std::vector<TypicalPod>& typical) {
  Policy bestfit, fgd;
  BuiltinPolicy("bestfit", &bestfit);
  BuiltinPolicy("fgd", &fgd);
  bestfit.candidates = fgd.candidates = 0;
  // Largest first: GPU milli, then CPU, then name for a fixed order among equals.
  auto largest_first = [](std::vector<const TracePod*> v) {
    std::sort(v.begin(), v.end(), [](const TracePod* a, const TracePod* b) {
      return std::make_tuple(RequestedMilli(*a), a->cpu_milli, a->memory_mib, a->name) >
             std::make_tuple(RequestedMilli(*b), b->cpu_milli, b->memory_mib, b->name);
    });
    return v;
  };
  // Where CPU runs out before the GPUs (many small shares), GPU milli per CPU milli decides.
  auto densest_first = [](std::vector<const TracePod*> v) {
    auto density = [](const TracePod* p) {
      return static_cast<double>(RequestedMilli(*p)) /
             static_cast<double>(std::max<int64_t>(1, p->cpu_milli));
    };
    std::stable_sort(v.begin(), v.end(),
                     [&](const TracePod* a, const TracePod* b) { return density(a) > density(b); });
    return v;
  };
  OfflinePacking best;
  auto pack = [&](const Policy& policy, const std::vector<const TracePod*>& order,
                  const std::string& name) {
    PackingPlacer placer(&cluster, policy, &typical);
    std::vector<const TracePod*> dropped;
    for (const TracePod* p : order)
      if (!placer.Place(*p)) dropped.push_back(p);
    if (best.heuristic.empty() || placer.allocated_milli() > best.allocated_milli)
      best = {placer.allocated_milli(), name};
    return dropped;
  };
  const std::vector<const TracePod*> sorted = largest_first(pods);
  pack(bestfit, sorted, "bestfit, largest first");
  pack(fgd, sorted, "fgd, largest first");
  pack(fgd, densest_first(pods), "fgd, most GPU per CPU first");
  // Decreasing order packs the big pods well but can strand CPU where small pods would have
  // fit; so also FGD in arrival order, then the pods it dropped, largest first.
  const std::vector<const TracePod*> dropped = pack(fgd, pods, "fgd, arrival order");
  std::vector<const TracePod*> retry = pods;
  for (const TracePod* p : largest_first(dropped)) retry.push_back(p);
  pack(fgd, retry, "fgd, then its drops largest first");
  return best;
}

PackingReference RunPackingReference(const Cluster& cluster, const std::vector<TracePod>& pods,
                                     const std::vector<uint64_t>& seeds, double tune,
                                     const std::vector<int>& points) {
  const std::vector<TypicalPod> typical = WorkloadTypicalPods(pods);
  const double capacity = cluster.gpu_count() * 1000.0;
  struct SeedRef {
    std::vector<double> upper, offline;
    std::vector<std::string> heuristic;
  };
  std::vector<SeedRef> per_seed(seeds.size());
  RunInParallel(seeds.size(), [&](size_t s) {
    const PackingArrivals a = MakePackingArrivals(cluster, pods, seeds[s], tune);
    SeedRef& r = per_seed[s];
    for (int x : points) {
      // The pods up to the one that brings the arrived workload to x%, as the curves sample.
      std::vector<const TracePod*> prefix;
      int64_t arrived = 0;
      for (const TracePod* p : a.order) {
        if (100.0 * arrived >= x * capacity) break;
        prefix.push_back(p);
        arrived += RequestedMilli(*p);
      }
      const OfflinePacking off = BestOfflinePacking(a.cluster, prefix, typical);
      r.upper.push_back(100.0 * FluidUpperBoundMilli(a.cluster, prefix) / capacity);
      r.offline.push_back(100.0 * off.allocated_milli / capacity);
      r.heuristic.push_back(off.heuristic);
    }
  });
  PackingReference ref;
  ref.points = points;
  for (size_t i = 0; i < points.size(); ++i) {
    double upper = 0, offline = 0;
    std::map<std::string, int> wins;
    for (const SeedRef& r : per_seed) {
      upper += r.upper[i] / seeds.size();
      offline += r.offline[i] / seeds.size();
      ++wins[r.heuristic[i]];
    }
    ref.upper_bound.push_back(upper);
    ref.offline_best.push_back(offline);
    ref.offline_heuristic.push_back(
        std::max_element(wins.begin(), wins.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        })->first);
  }
  return ref;
}

}  // namespace berth
