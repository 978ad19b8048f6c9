#include "config/openb_node_list.h"

#include <gtest/gtest.h>

#include <string>

#include "config_test_util.h"

namespace berth {
namespace {

std::string Trace(const std::string& name) {
  return std::string(BERTH_SOURCE_DIR) + "/data/openb/" + name;
}

TEST(OpenbNodeListTest, LoadsTheGpuNodeList) {
  const Cluster c = LoadOpenbNodeList(Trace("openb_node_list_gpu_node.csv"));
  EXPECT_EQ(c.name, "openb_node_list_gpu_node");
  EXPECT_EQ(c.nodes.size(), 1213u);
  EXPECT_EQ(c.gpu_count(), 6212);
  EXPECT_EQ(c.models.size(), 7u);
  EXPECT_EQ(c.FindModel("T4")->memory_mib, 15360);
  EXPECT_EQ(c.FindModel("V100M32")->memory_mib, 32768);
  EXPECT_EQ(c.FindModel("G2")->memory_mib, 0);  // undisclosed
  const Node& n = c.nodes[0];
  EXPECT_EQ(n.name, "openb-node-0000");
  EXPECT_EQ(n.shape, "");
  EXPECT_EQ(n.cpu_milli, 64000);
  EXPECT_EQ(n.memory_mib, 262144);
  ASSERT_EQ(n.gpus.size(), 2u);
  EXPECT_EQ(n.gpus[1].model, "P100");
  ASSERT_EQ(n.sockets.size(), 1u);
  EXPECT_TRUE(n.sockets[0].cpus.empty());
  EXPECT_EQ(n.sockets[0].memory_mib, 262144);
  EXPECT_EQ(n.switches.size(), 1u);
}

TEST(OpenbNodeListTest, KeepsCpuOnlyNodes) {
  const Cluster c = LoadOpenbNodeList(Trace("openb_node_list_all_node.csv"));
  EXPECT_EQ(c.nodes.size(), 1213u + 310u);
  EXPECT_EQ(c.gpu_count(), 6212);
  EXPECT_TRUE(c.nodes[0].gpus.empty());
  EXPECT_EQ(c.nodes[0].cpu_milli, 32000);
}

TEST(OpenbNodeListTest, MalformedRows) {
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model\r\n";
  const std::string bad_gpu =
      WriteTempFile("openb_bad_gpu.csv", header + "a,1000,2048,2,T4\r\nb,1000,2048,x,T4\r\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(bad_gpu); }, bad_gpu + ":3: ",
                                {"column 'gpu': expected an integer", "got 'x'"}));
  const std::string columns = WriteTempFile("openb_columns.csv", header + "a,1000,2048,2\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(columns); },
                                columns + ":2: ", {"expected 5 columns", "got 4"}));
  const std::string no_model = WriteTempFile("openb_no_model.csv", header + "a,1,2,1,\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(no_model); },
                                no_model + ":2: ", {"column 'model'"}));
  const std::string bad_header = WriteTempFile("openb_header.csv", "name,cpu\na,1\n");
  EXPECT_TRUE(
      ThrowsConfigError([&] { LoadOpenbNodeList(bad_header); }, bad_header + ":1: ",
                        {"header", "\"sn,cpu_milli,memory_mib,gpu,model\"", "got \"name,cpu\""}));
  const std::string twice = WriteTempFile("openb_twice.csv", header + "a,1,2,0,\na,1,2,0,\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(twice); }, twice + ":3: ",
                                {"column 'sn'", "\"a\" is already listed at line 2"}));
}

}  // namespace
}  // namespace berth
