#include "core/node_resources.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "config/flat_node.h"

namespace berth {
namespace {

TEST(NodeResourcesTest, DgxTotalsAndSockets) {
  const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/dgx-a100.yaml");
  NodeResources r(&cluster);
  EXPECT_EQ(r.cpu_milli(0), 256000);
  EXPECT_EQ(r.memory_mib(0), 2097152);
  EXPECT_TRUE(r.Fits(0, {0}, 128000, 1048576));
  EXPECT_FALSE(r.Fits(0, {0}, 128001, 0));  // one socket has 128 CPUs
  EXPECT_FALSE(r.Fits(0, {1}, 0, 1048577));
  EXPECT_TRUE(r.Fits(0, {0, 1}, 256000, 2097152));
  EXPECT_TRUE(r.Fits(0, {}, 256000, 2097152));  // no sockets: spread over all
  EXPECT_FALSE(r.Fits(0, {}, 256001, 0));

  r.Take(0, {0}, 100000, 1000);
  EXPECT_EQ(r.free_cpu_milli(0), 156000);
  EXPECT_EQ(r.free_memory_mib(0), 2097152 - 1000);
  EXPECT_FALSE(r.Fits(0, {0}, 28001, 0));
  EXPECT_TRUE(r.Fits(0, {0}, 28000, 0));
  EXPECT_TRUE(r.Fits(0, {1}, 128000, 0));
  // Spread over both sockets, each takes half: socket 0 has only 28000 left.
  EXPECT_TRUE(r.Fits(0, {0, 1}, 56000, 0));
  EXPECT_FALSE(r.Fits(0, {0, 1}, 56002, 0));
  r.Give(0, {0}, 100000, 1000);
  EXPECT_EQ(r.free_cpu_milli(0), 256000);
  EXPECT_TRUE(r.Fits(0, {0}, 128000, 1048576));
}

TEST(NodeResourcesTest, UnevenSplitsGoToTheFirstSocket) {
  const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/dgx-a100.yaml");
  NodeResources r(&cluster);
  r.Take(0, {0, 1}, 3, 5);
  // Socket 0 got 2 milli and 3 MiB: 127998 CPU left there, 127999 on socket 1.
  EXPECT_TRUE(r.Fits(0, {0}, 127998, 0));
  EXPECT_FALSE(r.Fits(0, {0}, 127999, 0));
  EXPECT_TRUE(r.Fits(0, {1}, 127999, 0));
  EXPECT_FALSE(r.Fits(0, {1}, 128000, 0));
  EXPECT_TRUE(r.Fits(0, {0}, 0, 1048573));
  EXPECT_FALSE(r.Fits(0, {0}, 0, 1048574));
  EXPECT_TRUE(r.Fits(0, {1}, 0, 1048574));
  r.Give(0, {0, 1}, 3, 5);
  EXPECT_TRUE(r.Fits(0, {0}, 128000, 1048576));
  EXPECT_TRUE(r.Fits(0, {1}, 128000, 1048576));
}

TEST(NodeResourcesTest, NodeTotalsCapTheSockets) {
  Cluster cluster;
  Node node = MakeFlatNode("n", 100000, 4096, 0, "");
  node.sockets = {{{0, 1, 2, 3}, 0}, {{4, 5, 6, 7}, 0}};  // 4 CPUs each; memory split evenly
  cluster.nodes.push_back(node);
  NodeResources r(&cluster);
  EXPECT_TRUE(r.Fits(0, {0}, 4000, 2048));
  EXPECT_FALSE(r.Fits(0, {0}, 4001, 0));
  EXPECT_FALSE(r.Fits(0, {0}, 0, 2049));
  // The node declares less CPU than its sockets list.
  cluster.nodes[0].cpu_milli = 6000;
  NodeResources capped(&cluster);
  EXPECT_TRUE(capped.Fits(0, {0, 1}, 6000, 0));
  EXPECT_FALSE(capped.Fits(0, {0, 1}, 6002, 0));
}

TEST(NodeResourcesTest, FlatNodesShareTheNodeCpu) {
  Cluster cluster;
  cluster.nodes.push_back(MakeFlatNode("flat", 32000, 65536, 2, "T4"));
  NodeResources r(&cluster);
  EXPECT_TRUE(r.Fits(0, {0}, 32000, 65536));
  EXPECT_FALSE(r.Fits(0, {0}, 32001, 0));
  EXPECT_TRUE(r.PinnedCpus(0, {0}).empty());
  EXPECT_TRUE(r.PinnedCpus(0, {}).empty());
}

TEST(NodeResourcesTest, PinnedCpusFollowTheSockets) {
  const Cluster cluster = LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/pcie8.yaml");
  NodeResources r(&cluster);
  std::vector<int> socket1;
  for (int c = 32; c < 64; ++c) socket1.push_back(c);
  for (int c = 96; c < 128; ++c) socket1.push_back(c);
  EXPECT_EQ(r.PinnedCpus(0, {1}), socket1);
  const std::vector<int> all = r.PinnedCpus(0, {});
  EXPECT_EQ(all.size(), 128u);
  EXPECT_EQ(all, r.PinnedCpus(0, {0, 1}));
  EXPECT_EQ(std::vector<int>(all.begin() + 64, all.end()), socket1);
}

}  // namespace
}  // namespace berth
