#include <fstream>

#include "cli/commands.h"
#include "config/cluster_file.h"
#include "config/openb_node_list.h"
#include "config/tiresias_trace.h"

namespace berth {

extern const char* const kDefaultClusterYaml;

Cluster LoadClusterArgument(const std::string& path) {
  if (path.empty())
    return ParseClusterYaml(kDefaultClusterYaml, "<embedded examples/multi-rack.yaml>");
  if (path.size() > 4 && path.substr(path.size() - 4) == ".csv") {
    // Two CSV formats, told apart by their header.
    std::ifstream in(path);
    std::string header;
    std::getline(in, header);
    if (header.rfind("num_switch", 0) == 0) return LoadTiresiasCluster(path);
    return LoadOpenbNodeList(path);
  }
  return LoadClusterFile(path);
}

}  // namespace berth
