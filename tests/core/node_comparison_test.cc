#include "core/node_comparison.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/cluster_file.h"

namespace berth {
namespace {

TEST(ModelMatchesTest, EveryDeclaredWordIsOneOfTheFoundName) {
  EXPECT_TRUE(ModelMatches("A100-SXM4-80GB", "A100-80GB"));
  EXPECT_TRUE(ModelMatches("L40S", "l40s"));
  EXPECT_TRUE(ModelMatches("NVIDIA H100 80GB HBM3", "H100-80GB"));
  EXPECT_FALSE(ModelMatches("A100-SXM4-80GB", "A100-40GB"));
  EXPECT_FALSE(ModelMatches("L40", "L40S"));
}

// Declared nodes against each other: what differs is named once per kind, with its GPUs.
TEST(CompareNodesTest, NamesEachKindOfDifference) {
  const std::string examples = std::string(BERTH_SOURCE_DIR) + "/examples/";
  const Node dgx = LoadClusterFile(examples + "dgx-a100.yaml").nodes[0];
  EXPECT_EQ(CompareNodes(dgx, dgx), std::vector<std::string>{});

  Node changed = dgx;
  changed.gpus[3].model = "H100-SXM5-80GB";
  changed.gpus[5].mig_enabled = !changed.gpus[5].mig_enabled;
  changed.gpus[6].nvlink_domain = -1;
  changed.gpus[7].nvlink_domain = -1;
  const std::vector<std::string> diff = CompareNodes(changed, dgx);
  ASSERT_EQ(diff.size(), 3u);
  EXPECT_EQ(diff[0], "GPU 3 is H100-SXM5-80GB, the cluster file declares " + dgx.gpus[3].model);
  EXPECT_NE(diff[1].find("GPU 5: MIG is"), std::string::npos) << diff[1];
  EXPECT_EQ(diff[2], "NVLink domains are [0-5], the cluster file declares [0-7]");

  Node fewer = dgx;
  fewer.gpus.pop_back();
  EXPECT_EQ(CompareNodes(fewer, dgx).front(), "found 7 GPUs, the cluster file declares 8");
}

}  // namespace
}  // namespace berth
