// Loads the node list of Alibaba's openb GPU trace (FGD, USENIX ATC '23) as a Cluster.
//
// The CSV has the header `sn,cpu_milli,memory_mib,gpu,model` and one node a row. Each row becomes
// a flat node (no declared topology, see MakeFlatNode) named `sn`; nodes without GPUs are kept
// as CPU-only nodes. Every GPU model in the file is declared, with its memory when berth knows
// it and 0 (unknown) otherwise. The cluster is named after the file (its base name without
// extension). Malformed input throws ConfigError "FILE:LINE: column 'gpu': ...".
#pragma once

#include <string>

#include "core/cluster.h"

namespace berth {

Cluster LoadOpenbNodeList(const std::string& path);

}  // namespace berth
