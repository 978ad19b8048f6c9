// The guarantee fields of a virtual cluster, `virtualCells` (HiveD's list) or `guarantees` (the
// short map), read from a map that holds them: shared by the VC file and the queues of a berth
// trace. The caller checks the map's other fields. Internal to src/config.
#pragma once

#include <string>

#include "config/yaml_reader.h"
#include "core/virtual_cluster.h"

namespace berth {

// Adds the guarantees that `map` gives to `vc` (named already, for messages); both forms at once
// or a cell type listed twice throws ConfigError at its line.
void ParseVcGuarantees(const YamlReader& r, const YAML::Node& map, const std::string& path,
                       VirtualClusterSpec* vc);

}  // namespace berth
