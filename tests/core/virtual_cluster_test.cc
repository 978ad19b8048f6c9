#include "core/virtual_cluster.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "config/vc_file.h"

namespace berth {
namespace {

class VirtualClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/multi-rack.yaml");
    ASSERT_EQ(CellTree::Build(cluster_, &tree_), "");
  }
  std::string Resolve(const std::vector<VirtualClusterSpec>& specs) {
    return ResolveVirtualClusters(cluster_, tree_, specs, &vcs_);
  }
  int Type(const std::string& name) const {
    const int t = tree_.FindType(name);
    EXPECT_GE(t, 0) << name;
    return t;
  }

  Cluster cluster_;
  CellTree tree_;
  std::vector<VirtualCluster> vcs_;
};

TEST_F(VirtualClusterTest, ResolvesTheExampleVcs) {
  ASSERT_EQ(Resolve(LoadVcFile(std::string(BERTH_SOURCE_DIR) + "/examples/vcs.yaml")), "");
  ASSERT_EQ(vcs_.size(), 4u);
  EXPECT_EQ(vcs_[0].name, "research");
  EXPECT_EQ(vcs_[0].guarantee_types, std::vector<int>{Type("dgx-a100/node")});
  EXPECT_EQ(vcs_[0].guarantee_counts, std::vector<int>{2});
  EXPECT_EQ(vcs_[0].bound_counts, std::vector<int>{0});
  EXPECT_TRUE(vcs_[0].bound_cells.empty());
  EXPECT_EQ(vcs_[2].guarantee_types, (std::vector<int>{Type("L40S"), Type("pcie8/socket")}));
  EXPECT_EQ(vcs_[2].guarantee_counts, (std::vector<int>{4, 1}));
  EXPECT_TRUE(vcs_[3].guarantee_types.empty());
}

TEST_F(VirtualClusterTest, UnknownCellTypesNameTheKnownOnes) {
  const std::string error = Resolve({{"a", {{"dgx-a100/node", 1}}}, {"b", {{"H100/node", 1}}}});
  EXPECT_NE(error.find("virtualClusters.b: unknown cellType \"H100/node\""), std::string::npos)
      << error;
  EXPECT_NE(error.find("dgx-a100/node, "), std::string::npos) << error;
  EXPECT_NE(error.find("pcie8/socket"), std::string::npos) << error;
}

TEST_F(VirtualClusterTest, CountsBelowOneAreRefused) {
  const std::string error = Resolve({{"a", {{"L40S", 0}}}});
  EXPECT_NE(error.find("virtualClusters.a: cellNumber of L40S must be at least 1"),
            std::string::npos)
      << error;
}

TEST_F(VirtualClusterTest, GuaranteesMustFitTogether) {
  // 10 DGX nodes in all.
  EXPECT_EQ(Resolve({{"a", {{"dgx-a100/node", 6}}}, {"b", {{"dgx-a100/node", 4}}}}), "");
  const std::string error = Resolve({{"a", {{"dgx-a100/node", 6}}}, {"b", {{"dgx-a100/node", 5}}}});
  EXPECT_NE(error.find("ask for 11 x dgx-a100/node"), std::string::npos) << error;
  EXPECT_NE(error.find("back only 10"), std::string::npos) << error;
  // Racks are cut for nodes, not the other way round: 2 DGX racks leave 2 DGX nodes (rack-d).
  EXPECT_EQ(Resolve({{"a", {{"rack(4xdgx-a100/node)", 2}}}, {"b", {{"dgx-a100/node", 2}}}}), "");
  EXPECT_NE(Resolve({{"a", {{"rack(4xdgx-a100/node)", 2}}}, {"b", {{"dgx-a100/node", 3}}}}), "");
  // The mixed rack holds the last 2 DGX nodes.
  EXPECT_EQ(Resolve({{"a", {{"rack(2xdgx-a100/node+2xpcie8/node)", 1}, {"dgx-a100/node", 8}}}}),
            "");
  EXPECT_NE(Resolve({{"a", {{"rack(2xdgx-a100/node+2xpcie8/node)", 1}, {"dgx-a100/node", 9}}}}),
            "");
  // 48 L40S GPUs: 6 nodes' worth of sockets and single GPUs together.
  EXPECT_EQ(Resolve({{"a", {{"pcie8/socket", 10}, {"L40S", 8}}}}), "");
  EXPECT_NE(Resolve({{"a", {{"pcie8/socket", 10}, {"L40S", 9}}}}), "");
}

TEST_F(VirtualClusterTest, QualifiedNamesResolveToTheLastPart) {
  ASSERT_EQ(Resolve({{"a", {{"rack(4xdgx-a100/node).dgx-a100/node", 3}}}}), "");
  EXPECT_EQ(vcs_[0].guarantee_types, std::vector<int>{Type("dgx-a100/node")});
}

TEST(GuaranteeShortfallTest, BigCellsAreSplitForSmallGuarantees) {
  const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/dgx-a100.yaml");
  CellTree tree;
  ASSERT_EQ(CellTree::Build(cluster, &tree), "");
  const int gpu = tree.FindType("A100-80GB");
  const int sw = tree.FindType("dgx-a100/switch");
  const int socket = tree.FindType("dgx-a100/socket");
  const int root = tree.cells()[tree.root()].type;
  const int n = static_cast<int>(tree.types().size());
  auto vec = [&](std::initializer_list<std::pair<int, int>> entries) {
    std::vector<int> v(n, 0);
    for (const auto& [t, count] : entries) v[t] = count;
    return v;
  };
  // The whole node backs a socket, a switch and two GPUs; a third GPU is one too many.
  EXPECT_EQ(GuaranteeShortfall(tree, vec({{root, 1}}), vec({{socket, 1}, {sw, 1}, {gpu, 2}})),
            vec({}));
  const std::vector<int> short_one =
      GuaranteeShortfall(tree, vec({{root, 1}}), vec({{socket, 1}, {sw, 1}, {gpu, 3}}));
  EXPECT_EQ(short_one, vec({{gpu, 1}}));
  EXPECT_EQ(ShortfallGpus(tree, short_one), 1);
  // Loose GPUs never add up to a switch.
  const std::vector<int> loose =
      GuaranteeShortfall(tree, vec({{socket, 1}, {gpu, 2}}), vec({{sw, 3}}));
  EXPECT_EQ(loose, vec({{sw, 1}}));
  EXPECT_EQ(ShortfallGpus(tree, loose), 2);
  EXPECT_EQ(GuaranteeShortfall(tree, vec({}), vec({})), vec({}));
}

// Guarantees in MIG instances ("<model>/<profile>") are whole MIG GPUs that hold them.
TEST(VirtualClusterMigTest, InstancesRoundUpToTheGpusThatHoldThem) {
  const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/h100-mig.yaml");
  CellTree tree;
  ASSERT_EQ(CellTree::Build(cluster, &tree), "");
  std::vector<VirtualCluster> vcs;
  VirtualClusterSpec a{"a", {{"H100-80GB/1g.10gb", 10, 7}, {"H100-80GB/3g.40gb", 3}}};
  ASSERT_EQ(ResolveVirtualClusters(cluster, tree, {a}, &vcs), "");
  // Carved on demand: 7 x 1g.10gb or 2 x 3g.40gb per GPU; 7 instances lent is one whole GPU.
  const int on_demand = tree.FindType("H100-80GB/mig");
  EXPECT_EQ(vcs[0].guarantee_types, (std::vector<int>{on_demand, on_demand}));
  EXPECT_EQ(vcs[0].guarantee_counts, (std::vector<int>{2, 2}));
  EXPECT_EQ(vcs[0].unlent_counts, (std::vector<int>{1, 0}));
  // The unlent instances round up: a limit equal to the guarantee lends it all.
  for (const auto& [limit, unlent] : {std::pair{10, 0}, {9, 1}, {3, 1}, {2, 2}, {0, 2}}) {
    VirtualClusterSpec l{"l", {{"H100-80GB/1g.10gb", 10, limit}}};
    ASSERT_EQ(ResolveVirtualClusters(cluster, tree, {l}, &vcs), "");
    EXPECT_EQ(vcs[0].unlent_counts, std::vector<int>{unlent}) << "lendingLimit " << limit;
  }
  // 17 GPUs' worth of instances on 16 on-demand GPUs: refused like any guarantee too large.
  VirtualClusterSpec big{"big", {{"H100-80GB/4g.40gb", 17}}};
  EXPECT_NE(ResolveVirtualClusters(cluster, tree, {big}, &vcs).find("can back only 16"),
            std::string::npos);
  VirtualClusterSpec bad{"bad", {{"H100-80GB/9g.99gb", 1}}};
  const std::string unknown = ResolveVirtualClusters(cluster, tree, {bad}, &vcs);
  EXPECT_NE(unknown.find("unknown cellType \"H100-80GB/9g.99gb\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("<model>/<MIG profile>"), std::string::npos) << unknown;
}

TEST(VirtualClusterMigTest, FixedLayoutsHoldWhatTheirLayoutSays) {
  const std::string models =
      "name: m\ngpuModels: [{name: H100-80GB, memoryMiB: 81920, mig: builtin}]\n";
  auto shape = [](const std::string& name, const std::string& layout) {
    return "  " + name + ":\n    gpuModel: H100-80GB\n    mig: {enabled: true, layout: [" + layout +
           "]}\n    sockets: [{cpus: \"0-7\", memoryMiB: 1024, switches: [2]}]\n";
  };
  const Cluster one =
      ParseClusterYaml(models + "nodeShapes:\n" + shape("f", "3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb") +
                           "nodes: [{name: n, shape: f}]\n",
                       "one.yaml");
  CellTree tree;
  ASSERT_EQ(CellTree::Build(one, &tree), "");
  std::vector<VirtualCluster> vcs;
  ASSERT_EQ(ResolveVirtualClusters(one, tree, {{"a", {{"H100-80GB/1g.10gb", 3}}}}, &vcs), "");
  EXPECT_EQ(vcs[0].guarantee_counts, std::vector<int>{2});  // 2 per GPU
  EXPECT_NE(ResolveVirtualClusters(one, tree, {{"a", {{"H100-80GB/4g.40gb", 1}}}}, &vcs)
                .find("no MIG-enabled H100-80GB GPU of the cluster can hold a 4g.40gb"),
            std::string::npos);
  const Cluster two = ParseClusterYaml(models + "nodeShapes:\n" + shape("f", "3g.40gb, 1g.10gb") +
                                           shape("g", "1g.10gb, 1g.10gb") +
                                           "nodes: [{name: n, shape: f}, {name: o, shape: g}]\n",
                                       "two.yaml");
  ASSERT_EQ(CellTree::Build(two, &tree), "");
  EXPECT_NE(ResolveVirtualClusters(two, tree, {{"a", {{"H100-80GB/1g.10gb", 1}}}}, &vcs)
                .find("several fixed MIG layouts"),
            std::string::npos);
}

}  // namespace
}  // namespace berth
