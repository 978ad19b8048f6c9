#include "agent/host_topology.h"

#include <gtest/gtest.h>

#include "../config/config_test_util.h"
#include "agent_test_util.h"
#include "core/cluster.h"

namespace berth {
namespace {

TEST(CpuListTest, ParsesRangesAndSingles) {
  EXPECT_EQ(ParseCpuList("0-3,8-11\n", "x"), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(ParseCpuList("5", "x"), (std::vector<int>{5}));
  EXPECT_EQ(ParseCpuList(" 16-17,0 ", "x"), (std::vector<int>{0, 16, 17}));
  EXPECT_TRUE(ParseCpuList("\n", "x").empty());
  EXPECT_EQ(ParseCpuList("4095", "x"), (std::vector<int>{4095}));
}

TEST(CpuListTest, RefusesGarbageNamingTheSource) {
  EXPECT_TRUE(ThrowsConfigError([] { ParseCpuList("0-3,x", "online"); }, "online: cpulist",
                                {"\"x\" is not a CPU id"}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseCpuList("7-3", "f"); }, "f: cpulist", {"runs backwards"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseCpuList("0-4096", "f"); }, "f: cpulist", {"4095"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseCpuList("0-3,2", "f"); }, "f: cpulist",
                                {"CPU 2 is listed twice"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseCpuList("1,,2", "f"); }, "f: cpulist", {"\"\""}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseCpuList("-1", "f"); }, "f: cpulist", {}));
}

TEST(CpuListTest, FormatsRanges) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(HostTopologyTest, ReadsTwoSocketsWithSmt) {
  const HostTopology host = ReadHostTopology(AgentData("sys-2socket"));
  EXPECT_EQ(host.cpus.size(), 32u);
  ASSERT_EQ(host.packages.size(), 2u);
  EXPECT_EQ(FormatCpuList(host.packages[0].cpus), "0-7,16-23");
  EXPECT_EQ(FormatCpuList(host.packages[1].cpus), "8-15,24-31");
  ASSERT_EQ(host.numa_nodes.size(), 2u);
  EXPECT_EQ(host.numa_nodes[1].id, 1);
  EXPECT_EQ(FormatCpuList(host.numa_nodes[1].cpus), "8-15,24-31");
  EXPECT_EQ(host.numa_nodes[0].memory_mib, 263853468 / 1024);
  ASSERT_EQ(host.cores.size(), 16u);
  EXPECT_EQ(host.cores[0], (std::vector<int>{0, 16}));
  EXPECT_EQ(host.cores[15], (std::vector<int>{15, 31}));
  EXPECT_EQ(host.FindNumaNode(1), 1);
  EXPECT_EQ(host.FindNumaNode(7), -1);
}

TEST(HostTopologyTest, AKernelWithoutNumaIsOneNode) {
  const HostTopology host = ReadHostTopology(AgentData("sys-flat"));
  ASSERT_EQ(host.numa_nodes.size(), 1u);
  EXPECT_EQ(host.numa_nodes[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(host.numa_nodes[0].memory_mib, 0);
  EXPECT_EQ(host.cores.size(), 4u);
}

TEST(HostTopologyTest, AMissingTreeIsAClearError) {
  const std::string root = AgentData("no-such-sys");
  EXPECT_TRUE(ThrowsConfigError([&] { ReadHostTopology(root); },
                                root + "/devices/system/cpu/online: missing", {"/sys tree"}));
}

}  // namespace
}  // namespace berth
