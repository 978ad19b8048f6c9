#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/plugins/plugin.h"
#include "plugin_test_util.h"

namespace berth {
namespace {

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(PluginRegistryTest, ListsEveryPlugin) {
  for (const char* name : {"node-health", "gpu-model", "resources-fit", "node-selector",
                           "topology-spread", "gpu-memory-threshold"})
    EXPECT_TRUE(Has(FilterNames(), name)) << name;
  for (const char* name : {"topology-spread", "topology-affinity", "binpack", "spread",
                           "qos-balance", "image-locality", "load"})
    EXPECT_TRUE(Has(ScoreNames(), name)) << name;
  for (const std::string& name : FilterNames()) EXPECT_NE(Filter(name), nullptr) << name;
  for (const std::string& name : ScoreNames()) EXPECT_NE(Score(name), nullptr) << name;
}

TEST(PluginRegistryTest, UnknownPluginNamesTheKnownOnes) {
  std::string error;
  EXPECT_EQ(MakeScore(Config("nope"), &error), nullptr);
  EXPECT_EQ(error.rfind("unknown score plugin \"nope\"; known: ", 0), 0u) << error;
  EXPECT_NE(error.find("binpack"), std::string::npos);
  EXPECT_EQ(MakeFilter(Config("binpack"), &error), nullptr);  // a score, not a filter
  EXPECT_EQ(error.rfind("unknown filter plugin \"binpack\"", 0), 0u) << error;
}

TEST(PluginRegistryTest, UnknownParameterIsAnError) {
  std::string error;
  EXPECT_EQ(MakeScore(Config("binpack", {{"x", 1}}), &error), nullptr);
  EXPECT_EQ(error, "plugin \"binpack\": unknown parameter \"x\"; known: gpu, cpu, memory");
  EXPECT_EQ(MakeFilter(Config("gpu-memory-threshold", {{"ratoi", 0.8}}), &error), nullptr);
  EXPECT_EQ(error, "plugin \"gpu-memory-threshold\": unknown parameter \"ratoi\"; known: ratio");
  EXPECT_EQ(MakeFilter(Config("node-health", {{"x", 1}}), &error), nullptr);
  EXPECT_EQ(error, "plugin \"node-health\": unknown parameter \"x\"; known: none");
}

TEST(PluginRegistryTest, BadParameterValuesAreErrors) {
  std::string error;
  EXPECT_EQ(MakeFilter(Config("gpu-memory-threshold", {{"ratio", 0}}), &error), nullptr);
  EXPECT_NE(error.find("ratio"), std::string::npos);
  EXPECT_EQ(MakeScore(Config("spread", {{"gpu", -1}}), &error), nullptr);
  EXPECT_EQ(MakeScore(Config("binpack", {{"gpu", 0}, {"cpu", 0}, {"memory", 0}}), &error), nullptr);
  EXPECT_EQ(MakeScore(Config("topology-affinity", {{"fragmentation", 2}}), &error), nullptr);
  // Huge weights would overflow the weighted sums to inf.
  EXPECT_EQ(MakeScore(Config("binpack", {{"gpu", 1e308}}), &error), nullptr);
  EXPECT_EQ(error, "plugin \"binpack\": weights gpu, cpu and memory must be from 0 to 1e6");
  EXPECT_NE(MakeScore(Config("binpack", {{"gpu", 1e6}}), &error), nullptr);
  EXPECT_EQ(MakeScore(Config("scarcity", {{"scale", 1e7}}), &error), nullptr);
  EXPECT_EQ(MakeScore(Config("fgd", {{"resolution", 1e300}}), &error), nullptr);
  EXPECT_NE(error.find("parameter \"resolution\" must be from 0 to 1e6"), std::string::npos);
  EXPECT_NE(MakeScore(Config("topology-affinity", {{"switch", 90}, {"node", 10}}), &error),
            nullptr);
}

}  // namespace
}  // namespace berth
