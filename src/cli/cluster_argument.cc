#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "config/cluster_file.h"
#include "config/config_error.h"
#include "config/file_text.h"
#include "config/openb_node_list.h"
#include "config/tiresias_trace.h"
#include "config/vc_file.h"
#include "core/cell_tree.h"

namespace berth {

extern const char* const kDefaultClusterYaml;

namespace {

constexpr const char* kEmbeddedName = "<embedded examples/multi-rack.yaml>";

Cluster LoadClusterFormat(const std::string& path) {
  if (path.empty()) return ParseClusterYaml(kDefaultClusterYaml, kEmbeddedName);
  if (path.size() > 4 && path.substr(path.size() - 4) == ".csv") {
    // Two CSV formats, told apart by their header (a byte order mark aside). What is not a
    // regular file (missing, a directory, a device) the loader reports.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return LoadOpenbNodeList(path);
    std::ifstream in(path, std::ios::binary);
    std::string header(256, '\0');  // enough for either header; never the whole of a huge line
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    header.resize(static_cast<size_t>(in.gcount()));
    if (WithoutBom(header).rfind("num_switch", 0) == 0) return LoadTiresiasCluster(path);
    if (WithoutBom(header).rfind("sn,", 0) != 0)
      throw ConfigError(path +
                        ":1: expected the header of an openb node list "
                        "(sn,cpu_milli,memory_mib,gpu,model) or of a Tiresias cluster "
                        "(num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node)");
    return LoadOpenbNodeList(path);
  }
  return LoadClusterFile(path);
}

}  // namespace

Cluster LoadClusterArgument(const std::string& path) {
  Cluster cluster = LoadClusterFormat(path);
  // What the engine refuses in the cluster alone is reported against the cluster's file here, so
  // that the engine's later errors are about the VCs, which name their own place.
  CellTree tree;
  const std::string error = CellTree::Build(cluster, &tree);
  if (!error.empty()) throw ConfigError((path.empty() ? kEmbeddedName : path) + ": " + error);
  return cluster;
}

std::vector<QueueSpec> LoadVcQueues(const std::string& path) {
  if (path.empty()) return {};
  return VcQueues(LoadVcFile(path));
}

}  // namespace berth
