#include "sim/synthetic_trace.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace berth {

std::vector<ReplayJob> SyntheticJobs(const Cluster& cluster, const std::vector<QueueSpec>& queues,
                                     const SyntheticOptions& o) {
  int node_gpus = 1;
  for (const Node& n : cluster.nodes)
    node_gpus = std::max(node_gpus, static_cast<int>(n.gpus.size()));
  // GPUs per job and how often: 1, 2, 4, 8 GPUs, then gangs of whole nodes. A size the cluster
  // cannot hold is cut to what it can: whole nodes, at most every GPU.
  struct Size {
    int replicas, gpus;  // gpus per replica
    double p;
  };
  std::vector<Size> sizes;
  double mean_gpus = 0;
  for (const auto& [asked, p] : std::vector<std::pair<int, double>>{
           {1, 0.5}, {2, 0.15}, {4, 0.15}, {8, 0.12}, {16, 0.04}, {32, 0.03}, {64, 0.01}}) {
    const int total = std::max(1, std::min(asked, cluster.gpu_count()));
    const int replicas = (total + node_gpus - 1) / node_gpus;
    sizes.push_back({replicas, total / replicas, p});
    // The load is what the jobs really ask for, after the cut.
    mean_gpus += p * replicas * (total / replicas);
  }
  const double mean_duration =
      o.median_duration_s * std::exp(o.duration_sigma * o.duration_sigma / 2);
  const double rate = o.load * cluster.gpu_count() / (mean_gpus * mean_duration);  // jobs / s
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1);
  std::lognormal_distribution<double> duration(std::log(o.median_duration_s), o.duration_sigma);
  std::vector<double> size_weights;
  for (const Size& s : sizes) size_weights.push_back(s.p);
  std::discrete_distribution<int> size(size_weights.begin(), size_weights.end());
  std::vector<double> weights;
  for (const QueueSpec& q : queues) weights.push_back(q.weight);
  std::discrete_distribution<int> queue(weights.begin(), weights.end());
  static const char* const kModels[] = {"resnet50", "vgg16", "bert", "inception3", "gpt"};
  std::vector<ReplayJob> jobs;
  double t = 0;
  for (int i = 0; i < o.jobs; ++i) {
    t += gap(rng);
    const Size& s = sizes[size(rng)];
    ReplayJob job;
    job.spec.name = "syn-" + std::to_string(i);
    job.spec.priority = 100;
    job.submit = t;
    job.duration = std::max(60.0, duration(rng));
    const std::string workload = kModels[rng() % 5];
    TaskGroup group;
    group.replicas = s.replicas;
    group.demand.gpus = s.gpus;
    group.demand.cpu_milli = 4000 * s.gpus;
    group.demand.memory_mib = 16384 * s.gpus;
    job.spec.groups.push_back(std::move(group));
    job.spec.user = "user-" + std::to_string(rng() % 20);
    job.spec.queue = queues.empty() ? "" : queues[queue(rng)].name;
    job.comm = CommIntensity(workload);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace berth
