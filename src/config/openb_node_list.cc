#include "config/openb_node_list.h"

#include <charconv>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "config/config_error.h"
#include "config/file_text.h"
#include "config/flat_node.h"

namespace berth {
namespace {

constexpr std::string_view kHeader = "sn,cpu_milli,memory_mib,gpu,model";
constexpr const char* kColumns[] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
constexpr int kMaxGpusPerNode = 64;

// Memory of the disclosed models of the trace; G1-G3 are undisclosed internal codes.
const std::map<std::string, int64_t, std::less<>> kKnownMemoryMiB = {
    {"A10", 24576}, {"P100", 16384}, {"T4", 15360}, {"V100M16", 16384}, {"V100M32", 32768}};

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  return file.substr(0, file.find_last_of('.'));
}

}  // namespace

Cluster LoadOpenbNodeList(const std::string& path) {
  const std::string text = ReadFileText(path);
  Cluster cluster;
  cluster.name = BaseName(path);
  const std::vector<std::string_view> lines = Split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string where = path + ":" + std::to_string(i + 1) + ": ";
    if (i == 0) {
      if (line != kHeader)
        throw ConfigError(where + "expected the header \"" + std::string(kHeader) + "\", got \"" +
                          std::string(line) + "\"");
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string_view> columns = Split(line, ',');
    if (columns.size() != std::size(kColumns))
      throw ConfigError(where + "expected " + std::to_string(std::size(kColumns)) + " columns (" +
                        std::string(kHeader) + "), got " + std::to_string(columns.size()));
    int64_t numbers[3] = {};  // cpu_milli, memory_mib, gpu
    for (int c = 1; c <= 3; ++c) {
      const std::string_view cell = columns[c];
      int64_t& value = numbers[c - 1];
      const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
      const int64_t max = c == 3 ? kMaxGpusPerNode : std::numeric_limits<int64_t>::max();
      if (ec != std::errc() || end != cell.data() + cell.size() || cell.empty() || value < 0 ||
          value > max)
        throw ConfigError(where + "column '" + kColumns[c] + "': expected an integer" +
                          (c == 3 ? " from 0 to " + std::to_string(max) : " >= 0") + ", got '" +
                          std::string(cell) + "'");
    }
    const std::string name(columns[0]);
    const std::string model(columns[4]);
    const int gpus = static_cast<int>(numbers[2]);
    if (name.empty()) throw ConfigError(where + "column 'sn': expected a node name, got ''");
    if (gpus > 0 && model.empty())
      throw ConfigError(where + "column 'model': a node with GPUs needs its GPU model");
    if (gpus > 0 && !cluster.FindModel(model)) {
      const auto known = kKnownMemoryMiB.find(model);
      cluster.models.push_back({model, known == kKnownMemoryMiB.end() ? 0 : known->second, {}});
    }
    cluster.nodes.push_back(MakeFlatNode(name, numbers[0], numbers[1], gpus, model));
  }
  const std::string error = ValidateCluster(cluster);
  if (!error.empty()) throw ConfigError(path + ": " + error);
  return cluster;
}

}  // namespace berth
