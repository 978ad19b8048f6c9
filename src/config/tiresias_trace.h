// Loads the Tiresias simulator's trace format (SymbioticLab/Tiresias, NSDI '19).
//
// Cluster files: `num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node`
// (memory in GB): one rack per network switch, flat nodes of identical GPUs ("GPU").
// Job files: `job_id,num_gpu,submit_time,iterations,model_name,duration,interval` (seconds).
// Malformed rows throw ConfigError naming file, line and column, or are skipped and counted.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.h"
#include "sim/trace.h"

namespace berth {

Cluster LoadTiresiasCluster(const std::string& path);
std::vector<TracePod> LoadTiresiasJobs(const std::string& path, int* skipped = nullptr);

}  // namespace berth
