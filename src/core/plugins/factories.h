// The factories of the built-in plugins, one per plugins/<name>.cc, and the parameter check they
// share. registry.cc maps policy names to these; add a plugin by declaring its factory here and
// adding one row to the table there.
//
// A factory returns null with `error` set ("unknown parameter \"x\"; known: ratio") when the
// policy entry's parameters are bad; the registry prefixes the plugin (`plugin "binpack": `).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/plugins/plugin.h"
#include "core/policy.h"

namespace berth {

using FilterFactory = std::unique_ptr<FilterPlugin> (*)(const PluginConfig&, std::string* error);
using ScoreFactory = std::unique_ptr<ScorePlugin> (*)(const PluginConfig&, std::string* error);

// True when every parameter of `config` is one of `known`; else false with `error` set to
// "unknown parameter \"x\"; known: a, b" ("known: none" for a plugin without parameters).
bool CheckParams(const PluginConfig& config, const std::vector<std::string>& known,
                 std::string* error);
// The parameter `key`, or `fallback` when the policy does not set it.
double Param(const PluginConfig& config, const std::string& key, double fallback);

// Filters.
std::unique_ptr<FilterPlugin> MakeNodeHealthFilter(const PluginConfig& config, std::string* error);
std::unique_ptr<FilterPlugin> MakeGpuModelFilter(const PluginConfig& config, std::string* error);
std::unique_ptr<FilterPlugin> MakeResourcesFitFilter(const PluginConfig& config,
                                                     std::string* error);
std::unique_ptr<FilterPlugin> MakeNodeSelectorFilter(const PluginConfig& config,
                                                     std::string* error);
std::unique_ptr<FilterPlugin> MakeTopologySpreadFilter(const PluginConfig& config,
                                                       std::string* error);
std::unique_ptr<FilterPlugin> MakeGpuMemoryThresholdFilter(const PluginConfig& config,
                                                           std::string* error);
// gpu-memory-threshold's `ratio` where the policy gives none (the scheduler's crowded GPUs
// follow it too).
inline constexpr double kDefaultGpuMemoryRatio = 0.9;

// Scores.
std::unique_ptr<ScorePlugin> MakeTopologySpreadScore(const PluginConfig& config,
                                                     std::string* error);
std::unique_ptr<ScorePlugin> MakeTopologyAffinityScore(const PluginConfig& config,
                                                       std::string* error);
std::unique_ptr<ScorePlugin> MakeBinpackScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeSpreadScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeQosBalanceScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeImageLocalityScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeLoadScore(const PluginConfig& config, std::string* error);
// The openb fragmentation benchmark's policies (the FGD paper's simulator).
std::unique_ptr<ScorePlugin> MakeRandomScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeDotProdScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeGpuClusteringScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeGpuPackingScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeBestFitScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakeFgdScore(const PluginConfig& config, std::string* error);
std::unique_ptr<ScorePlugin> MakePriorityPackingScore(const PluginConfig& config,
                                                      std::string* error);
// berth's own.
std::unique_ptr<ScorePlugin> MakeScarcityScore(const PluginConfig& config, std::string* error);

}  // namespace berth
