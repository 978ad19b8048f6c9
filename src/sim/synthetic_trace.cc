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
  // GPUs per job and how often: 1, 2, 4, 8 GPUs, then gangs of whole nodes.
  const std::vector<std::pair<int, double>> sizes = {{1, 0.5},   {2, 0.15},  {4, 0.15}, {8, 0.12},
                                                     {16, 0.04}, {32, 0.03}, {64, 0.01}};
  double mean_gpus = 0;
  for (const auto& [g, p] : sizes) mean_gpus += g * p;
  const double mean_duration =
      o.median_duration_s * std::exp(o.duration_sigma * o.duration_sigma / 2);
  const double rate = o.load * cluster.gpu_count() / (mean_gpus * mean_duration);  // jobs / s
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1);
  std::lognormal_distribution<double> duration(std::log(o.median_duration_s), o.duration_sigma);
  std::vector<double> size_weights;
  for (const auto& s : sizes) size_weights.push_back(s.second);
  std::discrete_distribution<int> size(size_weights.begin(), size_weights.end());
  std::vector<double> weights;
  for (const QueueSpec& q : queues) weights.push_back(q.weight);
  std::discrete_distribution<int> queue(weights.begin(), weights.end());
  static const char* const kModels[] = {"resnet50", "vgg16", "bert", "inception3", "gpt"};
  std::vector<ReplayJob> jobs;
  double t = 0;
  for (int i = 0; i < o.jobs; ++i) {
    t += gap(rng);
    ReplayJob job;
    const int gpus = std::min(sizes[size(rng)].first, cluster.gpu_count());
    job.pod.name = "syn-" + std::to_string(i);
    job.pod.submit_time = t;
    job.pod.duration = std::max(60.0, duration(rng));
    job.pod.workload = kModels[rng() % 5];
    job.pod.gpu_milli = 1000;
    job.replicas = gpus > node_gpus ? gpus / node_gpus : 1;
    job.pod.gpus = gpus / job.replicas;
    job.pod.cpu_milli = 4000 * job.pod.gpus;
    job.pod.memory_mib = 16384 * job.pod.gpus;
    job.pod.qos = "user-" + std::to_string(rng() % 20);
    job.queue = queues.empty() ? "" : queues[queue(rng)].name;
    job.comm = CommIntensity(job.pod.workload);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace berth
