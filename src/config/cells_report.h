// The cell tree report: a cluster's cells with their free / used / bad / cordoned GPUs (idle on a
// cordoned node: not free for new jobs, and not broken), per cell type and
// per cell, and each virtual cluster's guarantee. One document for `berth cells --format json` (a
// cluster file, nothing placed) and GET /v1/cells (the server's engine, its jobs placed), so
// that both count alike and `berth cells` prints either.
//
// {"cluster", "nodes", "gpus", "racks",
//  "types": [{"name", "level", "gpus_per_cell", "model", "cells", "free", "partial", "used",
//             "bad", "cordoned"}],  cells entirely free, partly used, entirely used, holding a
//             bad GPU, holding an idle GPU of a cordoned node (and no bad one)
//  "virtual_clusters": [{"name", "guarantees": [{"cell_type", "guaranteed", "bound",
//                                                "healthy"}]}],
//  "tree": {"address", "type", "level", "gpus", "free", "bad", "cordoned", "used",
//           "children": [...]}}
#pragma once

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/cluster.h"

namespace berth {

// `alloc` must be the allocator over `cluster`; a GPU is bad when not usable, free when usable
// and free, else used.
nlohmann::json CellsReport(const Cluster& cluster, const Allocator& alloc);

}  // namespace berth
