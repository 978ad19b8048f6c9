// The plugin registry: policy names to factories (factories.h), and the parameter check every
// factory shares. To add a plugin, add a row to kFilters or kScores.
#include <algorithm>
#include <string>
#include <vector>

#include "core/plugins/factories.h"
#include "core/plugins/plugin.h"

namespace berth {
namespace {

struct FilterEntry {
  const char* name;
  FilterFactory make;
};

struct ScoreEntry {
  const char* name;
  ScoreFactory make;
};

constexpr FilterEntry kFilters[] = {
    {"node-health", MakeNodeHealthFilter},
    {"gpu-model", MakeGpuModelFilter},
    {"resources-fit", MakeResourcesFitFilter},
    {"node-selector", MakeNodeSelectorFilter},
    {"topology-spread", MakeTopologySpreadFilter},
    {"gpu-memory-threshold", MakeGpuMemoryThresholdFilter},
};

constexpr ScoreEntry kScores[] = {
    {"topology-spread", MakeTopologySpreadScore},
    {"topology-affinity", MakeTopologyAffinityScore},
    {"binpack", MakeBinpackScore},
    {"spread", MakeSpreadScore},
    {"qos-balance", MakeQosBalanceScore},
    {"image-locality", MakeImageLocalityScore},
    {"load", MakeLoadScore},
    {"random", MakeRandomScore},
    {"dotprod", MakeDotProdScore},
    {"gpu-clustering", MakeGpuClusteringScore},
    {"gpu-packing", MakeGpuPackingScore},
    {"bestfit", MakeBestFitScore},
    {"fgd", MakeFgdScore},
    {"priority-packing", MakePriorityPackingScore},
    {"scarcity", MakeScarcityScore},
};

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <typename Plugin, typename Entry, size_t N>
std::unique_ptr<Plugin> Make(const Entry (&table)[N], const char* section,
                             const std::vector<std::string>& names, const PluginConfig& config,
                             std::string* error) {
  for (const Entry& e : table) {
    if (config.name != e.name) continue;
    std::string why;
    std::unique_ptr<Plugin> plugin = e.make(config, &why);
    if (!plugin && error)
      *error = "plugin \"" + config.name + "\": " + (why.empty() ? "cannot be built" : why);
    return plugin;
  }
  if (error)
    *error = "unknown " + std::string(section) + " plugin \"" + config.name +
             "\"; known: " + Join(names);
  return nullptr;
}

template <typename Entry, size_t N>
std::vector<std::string> Names(const Entry (&table)[N]) {
  std::vector<std::string> out;
  for (const Entry& e : table) out.push_back(e.name);
  return out;
}

}  // namespace

bool CheckParams(const PluginConfig& config, const std::vector<std::string>& known,
                 std::string* error) {
  for (const auto& [key, value] : config.params) {
    (void)value;
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (error)
      *error =
          "unknown parameter \"" + key + "\"; known: " + (known.empty() ? "none" : Join(known));
    return false;
  }
  return true;
}

double Param(const PluginConfig& config, const std::string& key, double fallback) {
  auto it = config.params.find(key);
  return it == config.params.end() ? fallback : it->second;
}

std::unique_ptr<FilterPlugin> MakeFilter(const PluginConfig& config, std::string* error) {
  return Make<FilterPlugin>(kFilters, "filter", FilterNames(), config, error);
}

std::unique_ptr<ScorePlugin> MakeScore(const PluginConfig& config, std::string* error) {
  return Make<ScorePlugin>(kScores, "score", ScoreNames(), config, error);
}

std::vector<std::string> FilterNames() { return Names(kFilters); }
std::vector<std::string> ScoreNames() { return Names(kScores); }

}  // namespace berth
