#include "sim/packing.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>

#include "core/allocator.h"
#include "core/placement.h"

namespace berth {

std::vector<TypicalPod> WorkloadTypicalPods(const std::vector<TracePod>& pods) {
  std::vector<PodShape> shapes;
  shapes.reserve(pods.size());
  for (const TracePod& p : pods) shapes.push_back({p.cpu_milli, p.gpus, p.gpu_milli, p.models});
  TypicalPodsOptions options = PaperTypicalPodsOptions();
  // Hosts of 2 GPUs are everywhere (1,189 of the openb cluster's 1,213 nodes): counting 2-GPU
  // shapes as rare cost the share-heavy mixes; model-bound ones have only their model's nodes
  // (docs/simulator.md).
  options.rare_min_gpus = 4;
  options.rare_bound = true;
  return TypicalPods(shapes, options);
}

namespace {

int64_t RequestedMilli(const TracePod& p) { return static_cast<int64_t>(p.gpus) * p.gpu_milli; }

}  // namespace

PackingArrivals MakePackingArrivals(const Cluster& cluster, const std::vector<TracePod>& pods,
                                    uint64_t seed, double tune) {
  // Order: by name, then shuffled with the seed; then random clones up to the target.
  PackingArrivals a;
  std::vector<const TracePod*>& order = a.order;
  for (const TracePod& p : pods) order.push_back(&p);
  std::sort(order.begin(), order.end(),
            [](const TracePod* x, const TracePod* y) { return x->name < y->name; });
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const int64_t capacity = static_cast<int64_t>(cluster.gpu_count()) * 1000;
  const double target = tune * static_cast<double>(capacity);
  int64_t total = 0;
  for (const TracePod* p : order) total += RequestedMilli(*p);
  std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
  while (!pods.empty()) {
    const TracePod* clone = order[pick(rng)];
    if (static_cast<double>(total + RequestedMilli(*clone)) > target) break;
    order.push_back(clone);
    total += RequestedMilli(*clone);
  }
  // Node order, which decides ties (the policies break them by first node): the reference's
  // simulator (pkg/simulator/simulator.go, syncClusterResourceList) renames every node
  // "<rank>-<name>" with a seeded random rank drawn after the pods are shuffled and inflated,
  // and kube-scheduler then takes the smallest name among the best. So each seed sees the
  // nodes in a random order of its own, not the node list's, where nodes of one GPU model
  // stand together (first-fit in list order fills one model's nodes first).
  a.cluster = cluster;
  std::shuffle(a.cluster.nodes.begin(), a.cluster.nodes.end(), rng);
  return a;
}

PackingPlacer::PackingPlacer(const Cluster* cluster, const Policy& policy,
                             const std::vector<TypicalPod>* typical)
    : policy_(policy), alloc_(cluster, {}), frag_(cluster, *typical), node_frag_(&frag_, alloc_) {
  std::vector<std::string> errors;
  pipeline_ = PlacementPipeline::Make(policy_, &errors);
  // The context below changes only in the demand, and node_frag only where a pod lands.
  pipeline_->KeepVerdictsAcrossDecisions();
  frag_total_ = node_frag_.total();
  ctx_.alloc = &alloc_;
  ctx_.job = &job_;
  ctx_.group = &group_;
  ctx_.typical_pods = typical;
  ctx_.fragmentation = &node_frag_;
}

bool PackingPlacer::Place(const TracePod& pod) {
  group_.demand = TraceDemand(pod);
  pipeline_->SetContext(ctx_);
  AllocationRequest req;
  req.demand = group_.demand;
  const auto id = alloc_.Allocate(req, nullptr, pipeline_.get(), policy_.candidates);
  if (!id) return false;
  allocated_ += RequestedMilli(pod);
  // Fragmentation per node, recomputed only for the node a pod lands on; fgd scores from it.
  const int node = alloc_.Find(*id)->replicas[0].node;
  frag_total_ -= node_frag_.node(node);
  node_frag_.Refresh(alloc_, node);
  frag_total_ += node_frag_.node(node);
  return true;
}

PackingCurve RunPackingSeed(const Cluster& cluster, const std::vector<TracePod>& pods,
                            const Policy& policy, uint64_t seed, double tune,
                            const std::vector<TypicalPod>& typical,
                            const std::function<void(double)>& progress) {
  const PackingArrivals arrivals = MakePackingArrivals(cluster, pods, seed, tune);
  const std::vector<const TracePod*>& order = arrivals.order;
  Policy seeded = policy;
  seeded.seed = seed;
  PackingPlacer placer(&arrivals.cluster, seeded, &typical);

  const int64_t capacity = static_cast<int64_t>(cluster.gpu_count()) * 1000;
  const int points = static_cast<int>(std::lround(tune * 100));
  PackingCurve curve;
  curve.alloc_ratio.assign(points + 1, -1);
  curve.frag_amount.assign(points + 1, -1);
  const double initial_frag = placer.frag_milli();
  int64_t arrived = 0;
  int next_point = 1;
  // A trace that alone asks for more than the tune (a heavy variant) stops at the last point.
  for (size_t i = 0; i < order.size() && next_point <= points; ++i) {
    const TracePod& pod = *order[i];
    ++curve.pods;
    arrived += RequestedMilli(pod);
    if (placer.Place(pod)) {
      ++curve.placed;
    } else if (const GpuAsk ask = GpuAskOf(pod); ask != GpuAsk::kNone) {
      curve.dropped_gpus[static_cast<int>(ask) - 1] += RequestedMilli(pod) / 1000.0;
    }
    // Point x is sampled right after the pod that brings the arrived workload to x%.
    while (next_point <= points && 100.0 * arrived >= next_point * static_cast<double>(capacity)) {
      curve.alloc_ratio[next_point] = 100.0 * placer.allocated_milli() / capacity;
      curve.frag_amount[next_point] = 100.0 * placer.frag_milli() / capacity;
      ++next_point;
    }
    if (progress && (i % 512 == 0 || i + 1 == order.size()))
      progress(static_cast<double>(i + 1) / order.size());
  }
  if (progress) progress(1);
  // Point 0 is the empty cluster; points the inflation stopped short of take the last value.
  curve.alloc_ratio[0] = 0;
  curve.frag_amount[0] = 100.0 * initial_frag / capacity;
  for (int x = 1; x <= points; ++x)
    if (curve.alloc_ratio[x] < 0) {
      curve.alloc_ratio[x] = curve.alloc_ratio[x - 1];
      curve.frag_amount[x] = curve.frag_amount[x - 1];
    }
  return curve;
}

void RunInParallel(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
}

PackingResult RunPacking(const Cluster& cluster, const std::vector<TracePod>& pods,
                         const Policy& policy, const std::vector<uint64_t>& seeds, double tune,
                         const std::function<void(double)>& progress) {
  PackingResult result;
  result.policy = policy.name;
  const std::vector<TypicalPod> typical = WorkloadTypicalPods(pods);
  result.seeds.resize(seeds.size());
  std::vector<double> done(seeds.size(), 0);
  std::mutex mu;
  RunInParallel(seeds.size(), [&](size_t s) {
    result.seeds[s] = RunPackingSeed(cluster, pods, policy, seeds[s], tune, typical, [&](double f) {
      std::lock_guard<std::mutex> lock(mu);
      done[s] = f;
      double total = 0;
      for (double d : done) total += d;
      if (progress) progress(total / seeds.size());
    });
  });
  const size_t points = result.seeds.empty() ? 0 : result.seeds[0].alloc_ratio.size();
  result.mean.alloc_ratio.assign(points, 0);
  result.mean.frag_amount.assign(points, 0);
  for (const PackingCurve& c : result.seeds) {
    for (size_t x = 0; x < points; ++x) {
      result.mean.alloc_ratio[x] += c.alloc_ratio[x] / result.seeds.size();
      result.mean.frag_amount[x] += c.frag_amount[x] / result.seeds.size();
    }
    for (size_t k = 0; k < c.dropped_gpus.size(); ++k)
      result.mean.dropped_gpus[k] += c.dropped_gpus[k] / result.seeds.size();
    result.mean.pods += c.pods;
    result.mean.placed += c.placed;
  }
  if (points > 0)
    result.unallocated_gpus_at_end =
        (100.0 - result.mean.alloc_ratio[points - 1]) / 100.0 * cluster.gpu_count();
  return result;
}

}  // namespace berth
