// Loads a cluster file (YAML; the format is docs/cluster-file.md) into a validated Cluster.
//
// The file declares GPU models, node shapes (sockets, PCIe switches, GPUs, NVLink, MIG), racks
// and nodes, and optionally a HiveD-style explicit cell hierarchy. On success the Cluster has
// passed ValidateCluster; on any mistake the loaders throw ConfigError naming the file, the line
// and the field.
#pragma once

#include <string>

#include "core/cluster.h"

namespace berth {

Cluster LoadClusterFile(const std::string& path);

// As LoadClusterFile, for text already in memory (e.g. an embedded default); `source_name`
// stands for the file name in error messages.
Cluster ParseClusterYaml(const std::string& text, const std::string& source_name);

}  // namespace berth
