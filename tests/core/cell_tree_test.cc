#include "core/cell_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "config/cluster_file.h"
#include "config/flat_node.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

Cluster Example(const std::string& name) {
  return LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/" + name);
}

CellTree Build(const Cluster& cluster) {
  CellTree tree;
  const std::string error = CellTree::Build(cluster, &tree);
  EXPECT_EQ(error, "");
  return tree;
}

int CountCells(const CellTree& tree, int type) {
  int n = 0;
  for (const Cell& c : tree.cells()) n += c.type == type;
  return n;
}

std::vector<std::string> TypeNames(const CellTree& tree) {
  std::vector<std::string> names;
  for (const CellType& t : tree.types()) names.push_back(t.name);
  return names;
}

// The GPU leaves under `cell`, found through parent links only.
int LeavesUnder(const CellTree& tree, int cell) {
  int n = 0;
  for (int leaf : tree.leaves())
    for (int c = leaf; c >= 0; c = tree.cells()[c].parent)
      if (c == cell) {
        ++n;
        break;
      }
  return n;
}

// Checks the structural invariants every tree must satisfy.
void ExpectWellFormed(const CellTree& tree) {
  const auto& cells = tree.cells();
  ASSERT_GE(tree.root(), 0);
  EXPECT_EQ(cells[tree.root()].parent, -1);
  EXPECT_EQ(tree.subtree_end(tree.root()), static_cast<int>(cells.size()));
  for (int c = 0; c < static_cast<int>(cells.size()); ++c) {
    const CellType& type = tree.type_of(c);
    // Preorder: a cell's subtree is exactly the cells whose ancestor chain reaches it.
    for (int d = 0; d < static_cast<int>(cells.size()); ++d) {
      bool below = false;
      for (int a = d; a >= 0; a = cells[a].parent) below = below || a == c;
      EXPECT_EQ(below, c <= d && d < tree.subtree_end(c)) << c << " " << d;
      EXPECT_EQ(below, tree.IsWithin(d, c)) << c << " " << d;
    }
    EXPECT_EQ(LeavesUnder(tree, c), type.leaf_count) << cells[c].address;
    // The type's composition is the cell's children.
    std::vector<std::pair<int, int>> kids;
    for (int k : cells[c].children) {
      EXPECT_EQ(cells[k].parent, c);
      auto it =
          std::find_if(kids.begin(), kids.end(), [&](auto& p) { return p.first == cells[k].type; });
      if (it == kids.end())
        kids.push_back({cells[k].type, 1});
      else
        ++it->second;
      EXPECT_LT(tree.type_of(k).level, type.level) << cells[k].address;
    }
    std::sort(kids.begin(), kids.end());
    EXPECT_EQ(kids, type.children) << cells[c].address;
    EXPECT_LE(type.tight_level, type.level) << type.name;
    if (type.level == Level::kGpu) {
      EXPECT_GE(cells[c].gpu, 0);
      EXPECT_EQ(tree.gpu_cell(cells[c].node, cells[c].gpu), c);
    }
    if (type.level == Level::kNode) {
      EXPECT_EQ(tree.node_cell(cells[c].node), c);
    }
  }
}

TEST(LevelTest, NamesAndParsing) {
  Level level = Level::kGpu;
  for (Level l :
       {Level::kGpu, Level::kSwitch, Level::kSocket, Level::kNode, Level::kRack, Level::kCluster}) {
    ASSERT_TRUE(ParseLevel(LevelName(l), &level)) << LevelName(l);
    EXPECT_EQ(level, l);
  }
  ASSERT_TRUE(ParseLevel("any", &level));
  EXPECT_EQ(level, Level::kCluster);
  level = Level::kSwitch;
  EXPECT_FALSE(ParseLevel("numa", &level));
  EXPECT_FALSE(ParseLevel("Node", &level));
  EXPECT_EQ(level, Level::kSwitch);  // untouched on failure
  EXPECT_STREQ(LevelName(Level::kSocket), "socket");
}

TEST(CellTreeTest, DgxA100) {
  const Cluster cluster = Example("dgx-a100.yaml");
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  EXPECT_EQ(TypeNames(tree),
            (std::vector<std::string>{"A100-80GB", "dgx-a100/switch", "dgx-a100/socket",
                                      "dgx-a100/node", "cluster"}));
  const std::vector<int> counts = {8, 4, 2, 1, 1};
  const std::vector<int> leaves = {1, 2, 4, 8, 8};
  const std::vector<Level> levels = {Level::kGpu, Level::kSwitch, Level::kSocket, Level::kNode,
                                     Level::kCluster};
  for (int t = 0; t < 5; ++t) {
    const CellType& type = tree.types()[t];
    EXPECT_EQ(CountCells(tree, t), counts[t]) << type.name;
    EXPECT_EQ(type.leaf_count, leaves[t]) << type.name;
    EXPECT_EQ(type.level, levels[t]) << type.name;
    EXPECT_EQ(type.tight_level, levels[t]) << type.name;
    EXPECT_EQ(type.model, "A100-80GB");
    EXPECT_FALSE(type.mig);
  }
  EXPECT_EQ(tree.types()[3].children, (std::vector<std::pair<int, int>>{{2, 2}}));
  EXPECT_EQ(tree.cells().size(), 16u);
  EXPECT_EQ(tree.leaves().size(), 8u);
  EXPECT_EQ(tree.cells()[tree.root()].address, "dgx-a100");
  const int node = tree.node_cell(0);
  EXPECT_EQ(tree.cells()[node].address, "dgx-01");
  // GPU 5 hangs off switch 2 (the first of socket 1).
  const int gpu5 = tree.gpu_cell(0, 5);
  EXPECT_EQ(tree.cells()[gpu5].address, "dgx-01/gpu5");
  const int sw = tree.cells()[gpu5].parent;
  EXPECT_EQ(tree.cells()[sw].address, "dgx-01/switch2");
  EXPECT_EQ(tree.cells()[tree.cells()[sw].parent].address, "dgx-01/socket1");
  EXPECT_EQ(tree.cells()[tree.cells()[sw].parent].parent, node);
  EXPECT_TRUE(tree.IsWithin(gpu5, node));
  EXPECT_FALSE(tree.IsWithin(gpu5, tree.cells()[tree.gpu_cell(0, 0)].parent));
  for (int g = 0; g < 8; ++g) EXPECT_EQ(tree.cells()[tree.gpu_cell(0, g)].gpu, g);
}

TEST(CellTreeTest, Pcie8MatchesItsComment) {
  const CellTree tree = Build(Example("pcie8.yaml"));
  ExpectWellFormed(tree);
  EXPECT_EQ(TypeNames(tree), (std::vector<std::string>{"L40S", "pcie8/switch", "pcie8/socket",
                                                       "pcie8/node", "cluster"}));
}

TEST(CellTreeTest, FlatNodeCollapsesToTheNode) {
  Cluster cluster;
  cluster.name = "flat";
  cluster.models.push_back({"T4", 15360, {}});
  cluster.nodes.push_back(MakeFlatNode("t4-0", 32000, 65536, 4, "T4"));
  cluster.nodes.push_back(MakeFlatNode("t4-1", 32000, 65536, 4, "T4"));
  cluster.nodes.push_back(MakeFlatNode("cpu-0", 32000, 65536, 0, ""));
  cluster.nodes.push_back(MakeFlatNode("t4-2", 32000, 65536, 1, "T4"));
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  EXPECT_EQ(TypeNames(tree), (std::vector<std::string>{"T4", "T4x4/node", "T4x1/node", "cluster"}));
  const CellType& node = tree.types()[1];
  EXPECT_EQ(node.level, Level::kNode);
  EXPECT_EQ(node.tight_level, Level::kSwitch);  // one PCIe switch: as tight as a switch
  EXPECT_EQ(node.children, (std::vector<std::pair<int, int>>{{0, 4}}));
  EXPECT_EQ(tree.types()[2].tight_level, Level::kSwitch);
  // GPUs hang directly off the node cell; the CPU-only node is no cell.
  EXPECT_EQ(tree.cells()[tree.gpu_cell(0, 2)].parent, tree.node_cell(0));
  EXPECT_EQ(tree.node_cell(2), -1);
  EXPECT_EQ(tree.node_cell(3), tree.cells()[tree.gpu_cell(3, 0)].parent);
  EXPECT_EQ(tree.cells().size(), 1u + 3u + 9u);
}

// Builds a node of `model` GPUs: sockets[i] lists the GPU count of each switch of socket i.
Node ShapedNode(const std::string& name, const std::string& shape, const std::string& model,
                const std::vector<std::vector<int>>& sockets) {
  Node node;
  node.name = name;
  node.shape = shape;
  node.cpu_milli = 64000;
  node.memory_mib = 1 << 20;
  for (size_t s = 0; s < sockets.size(); ++s) {
    node.sockets.push_back({{}, 0});
    for (int gpus : sockets[s]) {
      node.switches.push_back({static_cast<int>(s)});
      for (int g = 0; g < gpus; ++g) {
        Gpu gpu;
        gpu.model = model;
        gpu.pcie_switch = static_cast<int>(node.switches.size()) - 1;
        node.gpus.push_back(gpu);
      }
    }
  }
  return node;
}

TEST(CellTreeTest, SingleChildLevelsCollapse) {
  Cluster cluster;
  cluster.models.push_back({"T4", 15360, {}});
  // One switch per socket: the socket level is dropped, the node holds the two switches.
  cluster.nodes.push_back(ShapedNode("a", "two-sockets", "T4", {{2}, {2}}));
  // One socket with two switches: the socket level is dropped.
  cluster.nodes.push_back(ShapedNode("b", "one-socket", "T4", {{2, 2}}));
  // Switches with one GPU each: dropped; the sockets hold GPUs.
  cluster.nodes.push_back(ShapedNode("c", "single-gpu-switches", "T4", {{1, 1}, {1, 1}}));
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  const int a_switch = tree.FindType("two-sockets/switch");
  ASSERT_GE(a_switch, 0);
  EXPECT_EQ(tree.FindType("two-sockets/socket"), -1);
  const int a_node = tree.FindType("two-sockets/node");
  EXPECT_EQ(tree.types()[a_node].children, (std::vector<std::pair<int, int>>{{a_switch, 2}}));
  // Its switches are on different sockets: a cell of the node is no tighter than a node.
  EXPECT_EQ(tree.types()[a_node].tight_level, Level::kNode);

  const int b_switch = tree.FindType("one-socket/switch");
  ASSERT_GE(b_switch, 0);
  EXPECT_EQ(tree.FindType("one-socket/socket"), -1);
  const int b_node = tree.FindType("one-socket/node");
  EXPECT_EQ(tree.types()[b_node].children, (std::vector<std::pair<int, int>>{{b_switch, 2}}));
  EXPECT_EQ(tree.types()[b_node].tight_level, Level::kSocket);

  EXPECT_EQ(tree.FindType("single-gpu-switches/switch"), -1);
  const int c_socket = tree.FindType("single-gpu-switches/socket");
  ASSERT_GE(c_socket, 0);
  EXPECT_EQ(tree.types()[c_socket].children, (std::vector<std::pair<int, int>>{{0, 2}}));
  EXPECT_EQ(tree.types()[tree.FindType("single-gpu-switches/node")].tight_level, Level::kNode);
}

TEST(CellTreeTest, AShapeNameReusedForAnotherShapeGetsASuffix) {
  Cluster cluster;
  cluster.models.push_back({"T4", 15360, {}});
  cluster.nodes.push_back(ShapedNode("a", "box", "T4", {{2, 2}}));
  cluster.nodes.push_back(ShapedNode("b", "box", "T4", {{2, 2, 2}}));
  cluster.nodes.push_back(ShapedNode("c", "box", "T4", {{2, 2}}));
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  const int four = tree.cells()[tree.node_cell(0)].type;
  const int six = tree.cells()[tree.node_cell(1)].type;
  EXPECT_EQ(tree.types()[four].name, "box/node");
  EXPECT_EQ(tree.types()[six].name, "box/node#2");
  EXPECT_EQ(tree.cells()[tree.node_cell(2)].type, four);  // same shape: same type
  EXPECT_EQ(tree.types()[six].leaf_count, 6);
}

TEST(CellTreeTest, MultiRackNamesRackTypesByComposition) {
  const Cluster cluster = Example("multi-rack.yaml");
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  const int dgx = tree.FindType("dgx-a100/node");
  const int pcie = tree.FindType("pcie8/node");
  const int rack_dgx = tree.FindType("rack(4xdgx-a100/node)");
  const int rack_pcie = tree.FindType("rack(4xpcie8/node)");
  const int rack_mixed = tree.FindType("rack(2xdgx-a100/node+2xpcie8/node)");
  ASSERT_GE(dgx, 0);
  ASSERT_GE(pcie, 0);
  ASSERT_GE(rack_dgx, 0);
  ASSERT_GE(rack_pcie, 0);
  ASSERT_GE(rack_mixed, 0);
  EXPECT_EQ(tree.FindType("rack"), -1);
  EXPECT_EQ(CountCells(tree, dgx), 10);
  EXPECT_EQ(CountCells(tree, pcie), 6);
  EXPECT_EQ(CountCells(tree, rack_dgx), 2);
  EXPECT_EQ(CountCells(tree, rack_pcie), 1);
  EXPECT_EQ(CountCells(tree, rack_mixed), 1);
  EXPECT_EQ(CountCells(tree, tree.FindType("L40S")), 48);
  EXPECT_EQ(CountCells(tree, tree.FindType("A100-80GB")), 80);
  EXPECT_EQ(tree.types()[rack_mixed].model, "");
  EXPECT_EQ(tree.types()[rack_mixed].leaf_count, 32);
  EXPECT_EQ(tree.types()[rack_mixed].children,
            (std::vector<std::pair<int, int>>{{dgx, 2}, {pcie, 2}}));
  EXPECT_EQ(tree.types()[rack_dgx].model, "A100-80GB");
  EXPECT_EQ(tree.type_of(tree.root()).leaf_count, 128);
  EXPECT_EQ(tree.type_of(tree.root()).model, "");
  // Racks are the root's children, in declaration order.
  std::vector<std::string> racks;
  for (int r : tree.cells()[tree.root()].children) {
    racks.push_back(tree.cells()[r].address);
    EXPECT_EQ(tree.type_of(r).level, Level::kRack);
  }
  EXPECT_EQ(racks, (std::vector<std::string>{"rack-a", "rack-b", "rack-c", "rack-d"}));
  // Every node cell sits in the rack its node names.
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    const int cell = tree.node_cell(static_cast<int>(n));
    ASSERT_GE(cell, 0);
    EXPECT_EQ(tree.cells()[tree.cells()[cell].parent].address, cluster.nodes[n].rack);
  }
}

TEST(CellTreeTest, UniformRacksAreNamedRack) {
  const CellTree tree = Build(SyntheticDgxCluster(8, 4, 0));
  ExpectWellFormed(tree);
  const int rack = tree.FindType("rack");
  ASSERT_GE(rack, 0);
  EXPECT_EQ(CountCells(tree, rack), 2);
  EXPECT_EQ(tree.types()[rack].leaf_count, 32);
  EXPECT_EQ(tree.types()[rack].tight_level, Level::kRack);
}

TEST(CellTreeTest, MigGpusAreTheirOwnTypes) {
  const CellTree tree = Build(Example("h100-mig.yaml"));
  ExpectWellFormed(tree);
  const int dynamic = tree.FindType("H100-80GB/mig");
  const int fixed = tree.FindType("H100-80GB/mig[3g.40gb,2g.20gb,1g.10gb,1g.10gb]");
  ASSERT_GE(dynamic, 0);
  ASSERT_GE(fixed, 0);
  EXPECT_EQ(tree.FindType("H100-80GB"), -1);
  EXPECT_EQ(CountCells(tree, dynamic), 16);
  EXPECT_EQ(CountCells(tree, fixed), 8);
  for (const CellType& t : tree.types()) {
    EXPECT_TRUE(t.mig) << t.name;
    EXPECT_EQ(t.model, "H100-80GB");
  }
  EXPECT_FALSE(tree.Contains(tree.FindType("hgx-h100/node"), fixed));
  EXPECT_TRUE(tree.Contains(tree.FindType("hgx-h100-fixed/node"), fixed));
}

TEST(CellTreeTest, MigAndPlainGpusMixToANonMigType) {
  Cluster cluster = SyntheticDgxCluster(1, 1, 0);
  cluster.nodes[0].gpus[7].mig_enabled = true;
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  EXPECT_TRUE(tree.type_of(tree.gpu_cell(0, 7)).mig);
  EXPECT_EQ(tree.type_of(tree.gpu_cell(0, 7)).name, "A100-80GB/mig");
  EXPECT_FALSE(tree.type_of(tree.node_cell(0)).mig);
  EXPECT_NE(tree.cells()[tree.gpu_cell(0, 7)].type, tree.cells()[tree.gpu_cell(0, 6)].type);
  // The switch holding the MIG GPU differs from the other three.
  EXPECT_NE(tree.cells()[tree.cells()[tree.gpu_cell(0, 7)].parent].type,
            tree.cells()[tree.cells()[tree.gpu_cell(0, 0)].parent].type);
}

TEST(CellTreeTest, ContainsFollowsComposition) {
  const CellTree tree = Build(Example("multi-rack.yaml"));
  const int a100 = tree.FindType("A100-80GB");
  const int l40s = tree.FindType("L40S");
  const int dgx_socket = tree.FindType("dgx-a100/socket");
  const int dgx_node = tree.FindType("dgx-a100/node");
  const int rack_dgx = tree.FindType("rack(4xdgx-a100/node)");
  const int rack_mixed = tree.FindType("rack(2xdgx-a100/node+2xpcie8/node)");
  const int cluster = tree.cells()[tree.root()].type;
  for (int t = 0; t < static_cast<int>(tree.types().size()); ++t) {
    EXPECT_TRUE(tree.Contains(t, t));
    EXPECT_TRUE(tree.Contains(cluster, t));
  }
  EXPECT_TRUE(tree.Contains(dgx_node, a100));
  EXPECT_TRUE(tree.Contains(dgx_node, dgx_socket));
  EXPECT_FALSE(tree.Contains(dgx_socket, dgx_node));
  EXPECT_FALSE(tree.Contains(a100, dgx_socket));
  EXPECT_FALSE(tree.Contains(dgx_node, l40s));
  EXPECT_FALSE(tree.Contains(rack_dgx, l40s));
  EXPECT_TRUE(tree.Contains(rack_mixed, l40s));
  EXPECT_TRUE(tree.Contains(rack_mixed, dgx_socket));
  EXPECT_FALSE(tree.Contains(rack_dgx, rack_mixed));
}

TEST(CellTreeTest, SubtreeRanges) {
  const CellTree tree = Build(Example("dgx-a100.yaml"));
  const int node = tree.node_cell(0);
  EXPECT_EQ(tree.subtree_end(node) - node, 15);  // the node, 2 sockets, 4 switches, 8 GPUs
  for (int leaf : tree.leaves()) EXPECT_EQ(tree.subtree_end(leaf), leaf + 1);
  const int socket1 = tree.cells()[node].children[1];
  std::vector<int> gpus;
  for (int c = socket1; c < tree.subtree_end(socket1); ++c)
    if (tree.cells()[c].gpu >= 0) gpus.push_back(tree.cells()[c].gpu);
  EXPECT_EQ(gpus, (std::vector<int>{4, 5, 6, 7}));
}

constexpr char kExplicitYaml[] = R"(name: k80-pool
skuTypes: {K80: {gpu: 1, cpu: 5, memory: 54Gi}}
cellTypes:
  K80-PAIR: {childCellType: K80, childCellNumber: 2}
  K80-NODE: {childCellType: K80-PAIR, childCellNumber: 2, isNodeLevel: true}
  K80-NODE-POOL: {childCellType: K80-NODE, childCellNumber: 3}
physicalCells:
  - cellType: K80-NODE-POOL
    cellAddress: pool-a
    cellChildren: [{cellAddress: node1}, {cellAddress: node2}, {cellAddress: node3}]
  - cellType: K80-NODE
    cellAddress: node4
)";

TEST(CellTreeTest, ExplicitHivedCells) {
  const Cluster cluster = ParseClusterYaml(kExplicitYaml, "k80.yaml");
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  const int k80 = tree.FindType("K80");
  const int pair = tree.FindType("K80-PAIR");
  const int node = tree.FindType("K80-NODE");
  const int pool = tree.FindType("K80-NODE-POOL");
  ASSERT_GE(k80, 0);
  ASSERT_GE(pair, 0);
  ASSERT_GE(node, 0);
  ASSERT_GE(pool, 0);
  EXPECT_EQ(CountCells(tree, k80), 16);
  EXPECT_EQ(CountCells(tree, pair), 8);
  EXPECT_EQ(CountCells(tree, node), 4);
  EXPECT_EQ(CountCells(tree, pool), 1);
  EXPECT_EQ(tree.types()[node].level, Level::kNode);
  EXPECT_EQ(tree.types()[pool].level, Level::kRack);
  EXPECT_EQ(tree.types()[pair].level, Level::kSwitch);
  EXPECT_EQ(tree.types()[pool].leaf_count, 12);
  EXPECT_EQ(tree.type_of(tree.root()).leaf_count, 16);
  // The root holds the pool and the stand-alone node.
  EXPECT_EQ(tree.cells()[tree.root()].children.size(), 2u);
  const int node4 = cluster.FindNode("node4");
  ASSERT_GE(node4, 0);
  EXPECT_EQ(tree.cells()[tree.node_cell(node4)].address, "node4");
  EXPECT_EQ(tree.cells()[tree.node_cell(node4)].parent, tree.root());
  const int node2 = cluster.FindNode("node2");
  EXPECT_EQ(tree.cells()[tree.cells()[tree.node_cell(node2)].parent].address, "pool-a");
  // Leaves take the node's GPUs in index order.
  for (int g = 0; g < 4; ++g) {
    const int leaf = tree.gpu_cell(node2, g);
    ASSERT_GE(leaf, 0);
    EXPECT_EQ(tree.cells()[leaf].node, node2);
    EXPECT_EQ(tree.cells()[tree.cells()[leaf].parent].parent, tree.node_cell(node2));
  }
  EXPECT_EQ(tree.cells()[tree.gpu_cell(node2, 0)].parent,
            tree.cells()[tree.gpu_cell(node2, 1)].parent);
  EXPECT_NE(tree.cells()[tree.gpu_cell(node2, 1)].parent,
            tree.cells()[tree.gpu_cell(node2, 2)].parent);
}

TEST(CellTreeTest, FindTypeAcceptsHivedQualifiedNames) {
  const CellTree tree = Build(ParseClusterYaml(kExplicitYaml, "k80.yaml"));
  const int k80 = tree.FindType("K80");
  const int node = tree.FindType("K80-NODE");
  EXPECT_EQ(tree.FindType("K80-NODE-POOL.K80-NODE.K80-PAIR.K80"), k80);
  EXPECT_EQ(tree.FindType("K80-NODE-POOL.K80-NODE"), node);
  EXPECT_EQ(tree.FindType("K80-NODE.K80-PAIR"), tree.FindType("K80-PAIR"));
  EXPECT_EQ(tree.FindType("K80-NODE-POOL.K80-NODE.K80-GONE"), -1);
  EXPECT_EQ(tree.FindType("K80-NODE-"), -1);
  EXPECT_EQ(tree.FindType(""), -1);
  EXPECT_EQ(tree.FindType("k80"), -1);  // names are exact
}

TEST(CellTreeTest, FindTypePrefersTheWholeName) {
  // A model name with a dot is found whole before it is read as a qualified name.
  Cluster cluster;
  cluster.models.push_back({"GPU.v2", 1024, {}});
  cluster.nodes.push_back(MakeFlatNode("n", 1000, 1024, 2, "GPU.v2"));
  const CellTree tree = Build(cluster);
  EXPECT_EQ(tree.FindType("GPU.v2"), 0);
  EXPECT_EQ(tree.FindType("GPU.v2x2/node"), 1);
  EXPECT_EQ(tree.FindType("v2"), -1);
}

TEST(CellTreeTest, ExplicitCellsInCode) {
  Cluster cluster;
  cluster.name = "code";
  cluster.models.push_back({"V100", 16384, {}});
  cluster.nodes.push_back(MakeFlatNode("n0", 8000, 8192, 2, "V100"));
  cluster.nodes.push_back(MakeFlatNode("n1", 8000, 8192, 2, "V100"));
  ExplicitCells ex;
  ex.cell_types.push_back({"V100-NODE", "V100", 2, true});
  ex.cell_types.push_back({"V100-RACK", "V100-NODE", 2, false});
  ex.physical_cells.push_back({"V100-RACK", "r0", {{"", "n0", {}}, {"", "n1", {}}}});
  cluster.explicit_cells = ex;
  const CellTree tree = Build(cluster);
  ExpectWellFormed(tree);
  EXPECT_EQ(TypeNames(tree),
            (std::vector<std::string>{"V100", "V100-NODE", "V100-RACK", "cluster"}));
  EXPECT_EQ(tree.cells()[tree.node_cell(1)].address, "n1");
  EXPECT_EQ(tree.cells()[tree.root()].address, "code");

  // A node-level cell whose node has more GPUs than the cell holds.
  cluster.nodes[1] = MakeFlatNode("n1", 8000, 8192, 4, "V100");
  CellTree bad;
  std::string error = CellTree::Build(cluster, &bad);
  EXPECT_NE(error.find("\"n1\" has 4 GPUs"), std::string::npos) << error;
  EXPECT_NE(error.find("V100-NODE"), std::string::npos) << error;

  // A node-level cell naming an undeclared node.
  cluster.nodes[1] = MakeFlatNode("n1", 8000, 8192, 2, "V100");
  cluster.explicit_cells->physical_cells[0].children[1].address = "n9";
  error = CellTree::Build(cluster, &bad);
  EXPECT_NE(error.find("\"n9\" is not declared"), std::string::npos) << error;
}

// The first node to join a server may have only CPUs: its cluster is the root alone.
TEST(CellTreeTest, ACpuOnlyClusterIsTheRootAlone) {
  Cluster cluster;
  cluster.nodes.push_back(MakeFlatNode("cpu", 1000, 1024, 0, ""));
  CellTree tree;
  ASSERT_EQ(CellTree::Build(cluster, &tree), "");
  EXPECT_EQ(tree.cells().size(), 1u);
}

}  // namespace
}  // namespace berth
