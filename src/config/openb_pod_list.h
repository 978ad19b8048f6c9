// Loads a pod list of Alibaba's openb GPU trace (FGD, USENIX ATC '23):
// `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
// deletion_time,scheduled_time`; the multigpu variants have only the first five columns.
// `gpu_spec` lists allowed models separated by '|'. Malformed rows throw ConfigError naming
// file, line and column, or are skipped and counted when `skipped` is given.
#pragma once

#include <string>
#include <vector>

#include "sim/trace.h"

namespace berth {

std::vector<TracePod> LoadOpenbPodList(const std::string& path, int* skipped = nullptr);

}  // namespace berth
