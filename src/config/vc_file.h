// Loads a virtual-cluster file (YAML; format in docs/cluster-file.md): each VC's guarantee in
// cells of named cell types.
//
// Two forms per VC: HiveD's `virtualCells: [{cellType, cellNumber}]` and the short
// `guarantees: {cellType: count}`. Cell type names are kept as written (HiveD's qualified
// "A.B.C" too): resolving them against a cluster's cells is the core's job. A VC with neither
// has no guarantee and only borrows. Mistakes throw ConfigError with file, line and field.
#pragma once

#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/virtual_cluster.h"

namespace berth {

std::vector<VirtualClusterSpec> LoadVcFile(const std::string& path);

// As LoadVcFile, for text already in memory; `source_name` stands for the file in messages.
std::vector<VirtualClusterSpec> ParseVcYaml(const std::string& text,
                                            const std::string& source_name);

// The queues of a VC file (berth server --vcs, PUT /v1/queues, berth sim --vcs): one per VC,
// with its guarantee, weight 1 and no cap.
std::vector<QueueSpec> VcQueues(const std::vector<VirtualClusterSpec>& vcs);

}  // namespace berth
