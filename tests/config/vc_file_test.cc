#include "config/vc_file.h"

#include <gtest/gtest.h>

#include <string>

#include "config/cluster_file.h"
#include "config/limits.h"
#include "config_test_util.h"
#include "core/allocator.h"

namespace berth {
namespace {

// Expects ParseVcYaml(text, "vcs.yaml") to fail at the line of `marker`.
::testing::AssertionResult FailsAt(const std::string& text, const std::string& marker,
                                   std::initializer_list<std::string> parts) {
  return ThrowsConfigErrorAtLine([&] { ParseVcYaml(text, "vcs.yaml"); }, "vcs.yaml",
                                 LineOf(text, marker), parts);
}

TEST(VcFileTest, Example) {
  const std::vector<VirtualClusterSpec> vcs =
      LoadVcFile(std::string(BERTH_SOURCE_DIR) + "/examples/vcs.yaml");
  ASSERT_EQ(vcs.size(), 4u);
  EXPECT_EQ(vcs[0].name, "research");
  ASSERT_EQ(vcs[0].guarantees.size(), 1u);
  EXPECT_EQ(vcs[0].guarantees[0].cell_type, "dgx-a100/node");
  EXPECT_EQ(vcs[0].guarantees[0].count, 2);
  EXPECT_EQ(vcs[1].name, "training");
  ASSERT_EQ(vcs[1].guarantees.size(), 1u);
  EXPECT_EQ(vcs[1].guarantees[0].count, 4);
  EXPECT_EQ(vcs[2].name, "inference");
  ASSERT_EQ(vcs[2].guarantees.size(), 2u);
  EXPECT_EQ(vcs[2].guarantees[0].cell_type, "L40S");
  EXPECT_EQ(vcs[2].guarantees[1].cell_type, "pcie8/socket");
  EXPECT_EQ(vcs[3].name, "dev");
  EXPECT_TRUE(vcs[3].guarantees.empty());
}

TEST(VcFileTest, HivedQualifiedNamesAreKept) {
  const std::vector<VirtualClusterSpec> vcs = ParseVcYaml(
      "virtualClusters:\n"
      "  vc1: {virtualCells: [{cellType: K80-NODE-POOL.K80-NODE, cellNumber: 1}]}\n"
      "  vc2: {}\n",
      "vcs.yaml");
  ASSERT_EQ(vcs.size(), 2u);
  EXPECT_EQ(vcs[0].guarantees[0].cell_type, "K80-NODE-POOL.K80-NODE");
  EXPECT_TRUE(vcs[1].guarantees.empty());
}

TEST(VcFileTest, LendingLimits) {
  const std::vector<VirtualClusterSpec> vcs = ParseVcYaml(
      "virtualClusters:\n"
      "  a:\n"
      "    guarantees: {T4: 4, V100: 2}\n"
      "    lendingLimit: {T4: 1}\n",
      "vcs.yaml");
  ASSERT_EQ(vcs[0].guarantees.size(), 2u);
  EXPECT_EQ(vcs[0].guarantees[0].lending_limit, 1);
  EXPECT_EQ(vcs[0].guarantees[1].lending_limit, -1);  // all of it may be lent
  const std::string other =
      "virtualClusters:\n  a:\n    guarantees: {T4: 4}\n    lendingLimit: {V100: 1}\n";
  EXPECT_TRUE(FailsAt(other, "V100", {"virtualClusters.a.lendingLimit.V100", "not one of"}));
  const std::string more =
      "virtualClusters:\n  a:\n    guarantees: {T4: 4}\n    lendingLimit: {T4: 5}\n";
  EXPECT_TRUE(FailsAt(more, "lendingLimit", {"virtualClusters.a.lendingLimit.T4", "from 0 to 4"}));
}

// A VC named "" or with a control character in its name was accepted.
TEST(VcFileTest, NamesAreNames) {
  EXPECT_TRUE(FailsAt("virtualClusters:\n  '': {guarantees: {T4: 1}}\n", "''",
                      {"virtualClusters", "expected a name as the key"}));
  EXPECT_TRUE(FailsAt("virtualClusters:\n  \"a\\tb\": {guarantees: {T4: 1}}\n", "a\\tb",
                      {"virtualClusters", "a control character (byte 0x09) at byte 2"}));
}

TEST(VcFileTest, Errors) {
  const std::string zero =
      "virtualClusters:\n  a:\n    virtualCells:\n"
      "      - {cellType: T4, cellNumber: 0}\n";
  EXPECT_TRUE(
      FailsAt(zero, "cellNumber",
              {"virtualClusters.a.virtualCells[0].cellNumber", "expected an integer from 1"}));
  const std::string unknown = "virtualClusters:\n  a:\n    guarantee: {T4: 1}\n";
  EXPECT_TRUE(FailsAt(unknown, "guarantee:",
                      {"virtualClusters.a", "unknown field \"guarantee\"",
                       "known fields: guarantees, lendingLimit, virtualCells"}));
  const std::string count = "virtualClusters:\n  a:\n    guarantees:\n      T4: four\n";
  EXPECT_TRUE(FailsAt(count, "four", {"virtualClusters.a.guarantees.T4", "expected an integer"}));
  const std::string twice =
      "virtualClusters:\n  a:\n    virtualCells:\n"
      "      - {cellType: T4, cellNumber: 1}\n"
      "      - {cellNumber: 2, cellType: T4}\n";
  EXPECT_TRUE(FailsAt(twice, "{cellNumber: 2", {"virtualCells[1]", "listed twice"}));
  const std::string both = "virtualClusters:\n  a:\n    virtualCells: []\n    guarantees: {}\n";
  EXPECT_TRUE(FailsAt(both, "guarantees", {"either virtualCells or guarantees"}));
  EXPECT_TRUE(FailsAt("vcs: {}\n", "vcs", {"unknown field \"vcs\""}));
  EXPECT_TRUE(FailsAt("{}\n", "{}", {"missing required field \"virtualClusters\""}));
}

// What the engine refuses once it sees the cluster names the guarantee's file and line.
TEST(VcFileTest, EngineRefusalsNameTheLine) {
  const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/multi-rack.yaml");
  const auto engine_error = [&](const std::string& text) {
    return Allocator(&cluster, ParseVcYaml(text, "vcs.yaml")).error();
  };
  EXPECT_EQ(engine_error("virtualClusters:\n  a:\n    guarantees: {nope: 1}\n")
                .rfind("vcs.yaml:3:18: virtualClusters.a: unknown cellType \"nope\"", 0),
            0u);
  EXPECT_EQ(
      engine_error("virtualClusters:\n  a: {guarantees: {dgx-a100/node: 8}}\n"
                   "  b: {guarantees: {dgx-a100/node: 8}}\n")
          .rfind("vcs.yaml:3:20: virtualClusters: the guarantees ask for 16 x dgx-a100/node", 0),
      0u);
}

TEST(VcFileTest, SizesAreBounded) {
  // 2,200 VCs of a million GPUs each overflowed the engine's int sum and were accepted.
  std::string many = "virtualClusters:\n";
  for (int i = 0; i <= limits::Get().queues; ++i)
    many += "  v" + std::to_string(i) + ": {guarantees: {T4: 1}}\n";
  EXPECT_TRUE(FailsAt(many, "  v0:", {"1001 VCs, more than the limit of 1000 VCs"}));
  EXPECT_TRUE(FailsAt("virtualClusters:\n  a:\n    guarantees: {T4: 200000, K80: 100000}\n", "K80",
                      {"more than the limit of 262144 cells in all"}));
}

}  // namespace
}  // namespace berth
