#include "config/tiresias_trace.h"

#include <cstdint>
#include <map>

#include "config/cluster_size.h"
#include "config/config_error.h"
#include "config/csv_reader.h"
#include "config/file_text.h"
#include "config/flat_node.h"
#include "config/limits.h"

namespace berth {

Cluster LoadTiresiasCluster(const std::string& path) {
  CsvReader csv(
      path, {"num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"});
  if (!csv.Next())
    throw ConfigError(path + ":2: expected one row after the header, e.g. 1,16,4,128,254");
  csv.ExpectFields(5);
  const limits::Limits& max = limits::Get();
  const int switches = static_cast<int>(csv.Int(0, 1, &limits::Limits::nodes));
  const int nodes = static_cast<int>(csv.Int(1, 1, &limits::Limits::nodes));
  const int gpus = static_cast<int>(csv.Int(2, 1, &limits::Limits::gpus_per_node));
  const int64_t cpus = csv.Int(3, 0, max.node_cpu_milli / 1000);
  const int64_t memory_gb = csv.Int(4, 0, max.node_memory_mib / 1024);
  const int row = csv.line();
  if (csv.Next())
    throw ConfigError(csv.where() + "a second cluster row; a Tiresias cluster file has one row " +
                      "(the cluster), after the header");
  const Node shape = MakeFlatNode("", cpus * 1000, memory_gb * 1024, gpus, "GPU");
  ClusterSize size;
  const std::string too_big = size.Add(shape, static_cast<int64_t>(switches) * nodes);
  if (!too_big.empty())
    throw ConfigError(path + ":" + std::to_string(row) + ": the cluster would have " + too_big);
  Cluster cluster;
  cluster.name = FileStem(path);
  cluster.models.push_back({"GPU", 0, {}});
  for (int s = 0; s < switches; ++s) {
    const std::string rack = "switch-" + std::to_string(s);
    cluster.racks.push_back(rack);
    for (int n = 0; n < nodes; ++n) {
      Node node = shape;
      node.name = "node-" + std::to_string(s) + "-" + std::to_string(n);
      node.rack = rack;
      node.labels["rack"] = rack;
      cluster.nodes.push_back(std::move(node));
    }
  }
  const std::string error = ValidateCluster(cluster);
  if (!error.empty()) throw ConfigError(path + ": " + error);
  return cluster;
}

std::vector<TracePod> LoadTiresiasJobs(const std::string& path, int* skipped) {
  CsvReader csv(path, {"job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration"});
  std::vector<TracePod> jobs;
  std::map<std::string, int> lines;  // job name -> line of its row
  if (skipped) *skipped = 0;
  while (csv.Next()) {
    if (jobs.size() >= static_cast<size_t>(limits::Get().jobs))
      throw ConfigError(csv.where() + limits::OverLimit(&limits::Limits::jobs, "jobs"));
    try {
      TracePod job;
      job.line = csv.line();
      job.name = "job-" + csv.Name(0);
      if (const auto [first, fresh] = lines.emplace(job.name, csv.line()); !fresh)
        throw ConfigError(csv.where() + "column 'job_id': job " + Quoted(csv.field(0)) +
                          " is already listed at line " + std::to_string(first->second) +
                          "; job ids must be unique");
      job.gpus = static_cast<int>(csv.Int(1, 1, 4096));
      job.gpu_milli = 1000;
      job.submit_time = csv.Number(2, 0, limits::Seconds());
      csv.Int(3, 0, INT64_MAX);  // iterations: not replayed, but a number
      if (csv.header().size() > 6 && !csv.field(6).empty())
        csv.Number(6, 0, limits::Seconds());  // interval, likewise
      job.workload = csv.Name(4, false);
      job.duration = csv.Number(5, 0, limits::Seconds());
      // A job of no time has nothing to replay; a 0 is a field left unfilled.
      if (job.duration == 0)
        csv.Fail(5, "seconds above 0", "; the job runs for this long on its GPUs");
      jobs.push_back(std::move(job));
    } catch (const ConfigError&) {
      if (!skipped) throw;
      ++*skipped;
    }
  }
  return jobs;
}

}  // namespace berth
