#include "config/openb_node_list.h"

#include <cstdint>
#include <map>
#include <vector>

#include "config/cluster_size.h"
#include "config/config_error.h"
#include "config/csv_reader.h"
#include "config/file_text.h"
#include "config/flat_node.h"
#include "config/limits.h"

namespace berth {
namespace {

// Memory of the disclosed models of the trace; G1-G3 are undisclosed internal codes.
const std::map<std::string, int64_t, std::less<>> kKnownMemoryMiB = {
    {"A10", 24576}, {"P100", 16384}, {"T4", 15360}, {"V100M16", 16384}, {"V100M32", 32768}};

}  // namespace

Cluster LoadOpenbNodeList(const std::string& path) {
  CsvReader csv(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  Cluster cluster;
  cluster.name = FileStem(path);
  ClusterSize size;
  std::map<std::string, int> node_lines;  // name -> line of its row
  int first_row = 0;
  while (csv.Next()) {
    if (first_row == 0) first_row = csv.line();
    csv.ExpectFields(5);
    const int64_t cpu_milli = csv.Int(1, 0, &limits::Limits::node_cpu_milli);
    const int64_t memory_mib = csv.Int(2, 0, &limits::Limits::node_memory_mib);
    const int gpus = static_cast<int>(csv.Int(3, 0, &limits::Limits::gpus_per_node));
    const std::string name = csv.Name(0);
    const std::string model = csv.Name(4, false);
    if (gpus > 0 && model.empty())
      throw ConfigError(csv.where() + "column 'model': a node with GPUs needs its GPU model");
    if (gpus > 0 && !cluster.FindModel(model)) {
      const auto known = kKnownMemoryMiB.find(model);
      cluster.models.push_back({model, known == kKnownMemoryMiB.end() ? 0 : known->second, {}});
    }
    Node node = MakeFlatNode(name, cpu_milli, memory_mib, gpus, model);
    const std::string too_big = size.Add(node, 1);
    if (!too_big.empty()) throw ConfigError(csv.where() + "the cluster would have " + too_big);
    const auto [first, fresh] = node_lines.emplace(name, csv.line());
    if (!fresh)
      throw ConfigError(csv.where() + "column 'sn': node \"" + name +
                        "\" is already listed at line " + std::to_string(first->second) +
                        "; node names must be unique");
    cluster.nodes.push_back(std::move(node));
  }
  if (first_row == 0)
    throw ConfigError(path + ":2: expected a node per row after the header, e.g. " +
                      "openb-node-0000,64000,262144,2,P100");
  if (cluster.gpu_count() == 0)
    throw ConfigError(path + ":" + std::to_string(first_row) +
                      ": column 'gpu': no node has GPUs; give at least one node a gpu count of 1 "
                      "or more");
  const std::string error = ValidateCluster(cluster);
  if (!error.empty()) throw ConfigError(path + ": " + error);
  return cluster;
}

}  // namespace berth
