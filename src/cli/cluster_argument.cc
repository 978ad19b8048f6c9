#include "cli/commands.h"
#include "config/cluster_file.h"
#include "config/openb_node_list.h"

namespace berth {

extern const char* const kDefaultClusterYaml;

Cluster LoadClusterArgument(const std::string& path) {
  if (path.empty()) return ParseClusterYaml(kDefaultClusterYaml, "<embedded examples/multi-rack.yaml>");
  if (path.size() > 4 && path.substr(path.size() - 4) == ".csv") return LoadOpenbNodeList(path);
  return LoadClusterFile(path);
}

}  // namespace berth
