#include "config/cluster_file.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config_error.h"
#include "config_test_util.h"

namespace berth {
namespace {

std::string Example(const std::string& name) {
  return std::string(BERTH_SOURCE_DIR) + "/examples/" + name;
}

// A valid cluster file with one shape "s"; tests splice a broken part into it.
std::string WithShape(const std::string& shape_body, const std::string& models = "") {
  return "name: t\n"
         "gpuModels:\n"
         "  - {name: A100-80GB, memoryMiB: 81920, mig: builtin}\n"
         "  - {name: T4, memoryMiB: 15360}\n" +
         models +
         "nodeShapes:\n"
         "  s:\n" +
         shape_body + "nodes:\n  - {name: n0, shape: s}\n";
}

// Expects ParseClusterYaml(text, "bad.yaml") to fail at the line of `marker`.
::testing::AssertionResult FailsAt(const std::string& text, const std::string& marker,
                                   std::initializer_list<std::string> parts) {
  return ThrowsConfigErrorAtLine([&] { ParseClusterYaml(text, "bad.yaml"); }, "bad.yaml",
                                 LineOf(text, marker), parts);
}

TEST(ClusterFileTest, DgxA100Example) {
  const Cluster c = LoadClusterFile(Example("dgx-a100.yaml"));
  EXPECT_EQ(c.name, "dgx-a100");
  ASSERT_EQ(c.nodes.size(), 1u);
  const Node& n = c.nodes[0];
  EXPECT_EQ(n.name, "dgx-01");
  EXPECT_EQ(n.shape, "dgx-a100");
  EXPECT_EQ(n.rack, "");
  ASSERT_EQ(n.sockets.size(), 2u);
  ASSERT_EQ(n.switches.size(), 4u);
  ASSERT_EQ(n.gpus.size(), 8u);
  // "0-63,128-191": cores, then their hyperthread siblings.
  ASSERT_EQ(n.sockets[0].cpus.size(), 128u);
  EXPECT_EQ(n.sockets[0].cpus[63], 63);
  EXPECT_EQ(n.sockets[0].cpus[64], 128);
  EXPECT_EQ(n.sockets[1].cpus.front(), 64);
  EXPECT_EQ(n.sockets[1].cpus.back(), 255);
  EXPECT_EQ(n.sockets[1].memory_mib, 1048576);
  EXPECT_EQ(n.cpu_milli, 256000);
  EXPECT_EQ(n.memory_mib, 2097152);
  EXPECT_EQ(n.switches[2].socket, 1);
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(n.gpus[g].model, "A100-80GB");
    EXPECT_EQ(n.gpus[g].pcie_switch, g / 2);
    EXPECT_EQ(n.gpus[g].nvlink_domain, 0);
    EXPECT_FALSE(n.gpus[g].mig_enabled);
  }
  ASSERT_NE(c.FindModel("A100-80GB"), nullptr);
  EXPECT_TRUE(c.FindModel("A100-80GB")->mig_capable());
  EXPECT_FALSE(c.explicit_cells.has_value());
}

TEST(ClusterFileTest, Pcie8Example) {
  const Cluster c = LoadClusterFile(Example("pcie8.yaml"));
  ASSERT_EQ(c.nodes.size(), 1u);
  const Node& n = c.nodes[0];
  EXPECT_EQ(n.sockets.size(), 2u);
  EXPECT_EQ(n.switches.size(), 4u);
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_EQ(n.sockets[0].cpus.size(), 64u);
  EXPECT_EQ(n.cpu_milli, 128000);
  EXPECT_EQ(n.gpus[7].model, "L40S");
  EXPECT_EQ(n.gpus[7].pcie_switch, 3);
  EXPECT_EQ(n.gpus[7].nvlink_domain, -1);
  EXPECT_EQ(c.FindModel("L40S")->memory_mib, 46068);
  EXPECT_FALSE(c.FindModel("L40S")->mig_capable());
}

TEST(ClusterFileTest, MultiRackExample) {
  const Cluster c = LoadClusterFile(Example("multi-rack.yaml"));
  EXPECT_EQ(c.name, "multi-rack");
  EXPECT_EQ(c.racks, (std::vector<std::string>{"rack-a", "rack-b", "rack-c", "rack-d"}));
  ASSERT_EQ(c.nodes.size(), 16u);
  EXPECT_EQ(c.gpu_count(), 128);
  int dgx = 0;
  for (const Node& n : c.nodes) dgx += n.shape == "dgx-a100";
  EXPECT_EQ(dgx, 10);
  const Node& a0 = c.nodes[c.FindNode("dgx-a-0")];
  EXPECT_EQ(a0.rack, "rack-a");
  EXPECT_EQ(a0.labels, (std::map<std::string, std::string>{
                           {"pool", "train"}, {"rack", "rack-a"}, {"zone", "zone-1"}}));
  EXPECT_GE(c.FindNode("dgx-b-3"), 0);
  const Node& d1 = c.nodes[c.FindNode("pcie-d-1")];
  EXPECT_EQ(d1.rack, "rack-d");
  EXPECT_EQ(d1.shape, "pcie8");
  EXPECT_EQ(d1.labels.at("zone"), "zone-2");
  EXPECT_EQ(d1.sockets[1].cpus.size(), 64u);
}

TEST(ClusterFileTest, H100MigExample) {
  const Cluster c = LoadClusterFile(Example("h100-mig.yaml"));
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.gpu_count(), 24);
  EXPECT_TRUE(c.FindModel("H100-80GB")->mig_capable());
  const Node& dynamic = c.nodes[c.FindNode("h100-1")];
  EXPECT_EQ(dynamic.sockets[1].cpus.size(), 112u);  // the YAML alias shares the sockets
  for (const Gpu& gpu : dynamic.gpus) {
    EXPECT_TRUE(gpu.mig_enabled);
    EXPECT_TRUE(gpu.mig_layout.empty());
  }
  const Node& fixed = c.nodes[c.FindNode("h100-fixed-0")];
  EXPECT_EQ(fixed.shape, "hgx-h100-fixed");
  EXPECT_EQ(fixed.switches.size(), 4u);
  for (const Gpu& gpu : fixed.gpus) {
    EXPECT_TRUE(gpu.mig_enabled);
    EXPECT_EQ(gpu.mig_layout,
              (std::vector<std::string>{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}));
  }
}

TEST(ClusterFileTest, ShapeDefaultsAndExplicitGpuLists) {
  const Cluster c = ParseClusterYaml(WithShape("    gpuModel: A100-80GB\n"
                                               "    cpuMilli: 7000\n"
                                               "    sockets:\n"
                                               "      - cpus: [0, 1, 2]\n"
                                               "        switches: [{gpus: [0, 2]}]\n"
                                               "      - memoryMiB: 100\n"
                                               "        switches: [{gpus: [3, 1], model: T4}]\n"),
                                     "t.yaml");
  const Node& n = c.nodes[0];
  EXPECT_EQ(n.cpu_milli, 7000);
  EXPECT_EQ(n.memory_mib, 100);
  EXPECT_EQ(n.sockets[0].cpus, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(n.gpus.size(), 4u);
  EXPECT_EQ(n.gpus[0].pcie_switch, 0);
  EXPECT_EQ(n.gpus[1].pcie_switch, 1);
  EXPECT_EQ(n.gpus[1].model, "T4");
  EXPECT_EQ(n.gpus[2].model, "A100-80GB");
  EXPECT_EQ(n.gpus[3].model, "T4");
  EXPECT_EQ(n.gpus[3].nvlink_domain, -1);
}

TEST(ClusterFileTest, HivedExplicitCellsCreateNodes) {
  const Cluster c = ParseClusterYaml(R"(name: hived
skuTypes: {K80: {gpu: 1, cpu: 5, memory: 54Gi}}
cellTypes:
  K80-NODE: {childCellType: K80, childCellNumber: 4, isNodeLevel: true}
  K80-NODE-POOL: {childCellType: K80-NODE, childCellNumber: 3}
physicalCells:
  - cellType: K80-NODE-POOL
    cellChildren: [{cellAddress: node1}, {cellAddress: node2}, {cellAddress: node3}]
)",
                                     "hived.yaml");
  ASSERT_TRUE(c.explicit_cells.has_value());
  ASSERT_EQ(c.explicit_cells->cell_types.size(), 2u);
  EXPECT_EQ(c.explicit_cells->cell_types[0].name, "K80-NODE");
  EXPECT_EQ(c.explicit_cells->cell_types[0].child_type, "K80");
  EXPECT_EQ(c.explicit_cells->cell_types[0].child_count, 4);
  EXPECT_TRUE(c.explicit_cells->cell_types[0].is_node_level);
  ASSERT_EQ(c.explicit_cells->physical_cells.size(), 1u);
  const PhysicalCellSpec& pool = c.explicit_cells->physical_cells[0];
  EXPECT_EQ(pool.cell_type, "K80-NODE-POOL");
  ASSERT_EQ(pool.children.size(), 3u);
  EXPECT_EQ(pool.children[2].address, "node3");
  EXPECT_EQ(pool.children[2].cell_type, "K80-NODE");
  ASSERT_NE(c.FindModel("K80"), nullptr);
  EXPECT_EQ(c.FindModel("K80")->memory_mib, 0);
  ASSERT_EQ(c.nodes.size(), 3u);
  const Node& n = c.nodes[1];
  EXPECT_EQ(n.name, "node2");
  EXPECT_EQ(n.gpus.size(), 4u);
  EXPECT_EQ(n.gpus[3].model, "K80");
  EXPECT_EQ(n.cpu_milli, 20000);
  EXPECT_EQ(n.memory_mib, 4 * 54 * 1024);
  EXPECT_EQ(n.sockets.size(), 1u);
  EXPECT_TRUE(n.sockets[0].cpus.empty());
  EXPECT_EQ(n.switches.size(), 1u);
}

TEST(ClusterFileTest, HivedCellsAutoNameChildrenAndUseDeclaredNodes) {
  const Cluster c = ParseClusterYaml(R"(name: hived
gpuModels: [{name: T4, memoryMiB: 15360}]
nodeShapes:
  t4x2: {gpuModel: T4, sockets: [{cpus: "0-7", switches: [2]}]}
nodes: [{name: pool-0, shape: t4x2}]
cellTypes:
  T4-NODE: {childCellType: T4, childCellNumber: 2, isNodeLevel: true}
  T4-POOL: {childCellType: T4-NODE, childCellNumber: 2}
physicalCells:
  - {cellType: T4-POOL, cellAddress: pool}
)",
                                     "hived.yaml");
  const PhysicalCellSpec& pool = c.explicit_cells->physical_cells[0];
  ASSERT_EQ(pool.children.size(), 2u);
  EXPECT_EQ(pool.children[0].address, "pool-0");
  EXPECT_EQ(pool.children[1].address, "pool-1");
  EXPECT_TRUE(pool.children[1].children.empty());  // below node level: not listed
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].shape, "t4x2");  // the declared node
  EXPECT_EQ(c.nodes[0].sockets[0].cpus.size(), 8u);
  EXPECT_EQ(c.nodes[1].name, "pool-1");  // created from the cell
  EXPECT_EQ(c.nodes[1].shape, "");
}

TEST(ClusterFileTest, UnknownField) {
  const std::string text = WithShape(
      "    gpuModel: T4\n"
      "    sockets:\n"
      "      - switches: [2, {gpu: [0]}]\n");
  EXPECT_TRUE(FailsAt(text, "{gpu:",
                      {"nodeShapes.s.sockets[0].switches[1]", "unknown field \"gpu\"",
                       "known fields: gpus, model"}));
  EXPECT_TRUE(FailsAt("name: t\nnode: []\n", "node:", {"unknown field \"node\"", "nodeShapes"}));
}

TEST(ClusterFileTest, GpuUnderTwoSwitches) {
  const std::string text = WithShape(
      "    gpuModel: T4\n"
      "    sockets:\n"
      "      - switches: [{gpus: [0, 1]}]\n"
      "      - switches: [{gpus: [2]}, {gpus: [3, 1]}]\n");
  EXPECT_TRUE(FailsAt(text, "{gpus: [3, 1]}",
                      {"nodeShapes.s.sockets[1].switches[1].gpus[1]", "GPU 1 is under two switches",
                       "sockets[0].switches[0]", "sockets[1].switches[1]"}));
}

TEST(ClusterFileTest, GpuIndexGap) {
  const std::string text = WithShape(
      "    gpuModel: T4\n"
      "    sockets:\n"
      "      - switches: [{gpus: [0, 1]}, {gpus: [3]}]\n");
  // A problem with a whole list is reported where the list starts.
  EXPECT_TRUE(FailsAt(text, "      - switches", {"nodeShapes.s.sockets", "GPU 2 is missing"}));
}

TEST(ClusterFileTest, BadCpuList) {
  for (const std::string cpus : {"0-", "5-3", "a", "0,,2", "1-2-3"}) {
    const std::string text = WithShape(
        "    gpuModel: T4\n"
        "    sockets:\n"
        "      - {cpus: \"" +
        cpus + "\", switches: [1]}\n");
    EXPECT_TRUE(FailsAt(
        text, "- {cpus:", {"nodeShapes.s.sockets[0].cpus", "bad cpulist \"" + cpus + "\""}));
  }
  const std::string twice = WithShape(
      "    gpuModel: T4\n"
      "    sockets:\n"
      "      - {cpus: \"0-3\", switches: [1]}\n"
      "      - {cpus: \"3-4\", switches: [1]}\n");
  EXPECT_TRUE(FailsAt(twice, "\"3-4\"", {"sockets[1].cpus", "CPU 3 is also in sockets[0]"}));
}

TEST(ClusterFileTest, BadInteger) {
  const std::string text = WithShape(
      "    gpuModel: T4\n"
      "    sockets:\n"
      "      - memoryMiB: 12x\n"
      "        switches: [1]\n");
  EXPECT_TRUE(FailsAt(
      text, "12x",
      {"nodeShapes.s.sockets[0].memoryMiB", "expected an integer from 0 to", "got \"12x\""}));
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets: [{switches: [0]}]\n"),
                      "switches: [0]", {"switches[0]", "expected an integer from 1"}));
}

TEST(ClusterFileTest, UnknownShapeAndModel) {
  const std::string text =
      "name: t\n"
      "nodeShapes:\n"
      "  s: {gpuModel: T4, sockets: [{switches: [1]}]}\n";
  EXPECT_TRUE(FailsAt(text, "gpuModel", {"nodeShapes.s.gpuModel", "unknown GPU model \"T4\""}));
  const std::string nodes = WithShape("    gpuModel: T4\n    sockets: [{switches: [1]}]\n") +
                            "  - {name: n1, shape: dgx}\n";
  EXPECT_TRUE(
      FailsAt(nodes, "shape: dgx", {"nodes[1].shape", "unknown shape \"dgx\"", "declared: s"}));
}

TEST(ClusterFileTest, MissingRequiredFields) {
  EXPECT_TRUE(FailsAt("name: t\ngpuModels:\n  - {name: T4}\n", "{name: T4}",
                      {"gpuModels[0]", "missing required field \"memoryMiB\""}));
  // A missing field is reported where its map starts.
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n"), "    gpuModel",
                      {"nodeShapes.s", "missing required field \"sockets\""}));
  EXPECT_TRUE(FailsAt("gpuModels: []\n", "gpuModels", {"missing required field \"name\""}));
}

TEST(ClusterFileTest, BadMigLayout) {
  const std::string text = WithShape(
      "    gpuModel: A100-80GB\n"
      "    sockets: [{switches: [2]}]\n"
      "    mig:\n"
      "      enabled: true\n"
      "      layout: [\"4g.40gb\", \"4g.40gb\"]\n");
  EXPECT_TRUE(FailsAt(text, "layout:", {"nodeShapes.s.mig.layout", "4g.40gb"}));
  const std::string not_capable = WithShape(
      "    gpuModel: T4\n"
      "    sockets: [{switches: [2]}]\n"
      "    mig: {enabled: true, layout: [\"1g.10gb\"]}\n");
  EXPECT_TRUE(FailsAt(not_capable, "mig: {", {"mig.layout", "T4", "not MIG-capable"}));
  EXPECT_TRUE(FailsAt("name: t\ngpuModels:\n  - {name: T4, memoryMiB: 1, mig: builtin}\n",
                      "mig: builtin", {"gpuModels[0].mig", "no built-in MIG profiles for \"T4\""}));
}

TEST(ClusterFileTest, CellTypeErrors) {
  const std::string cycle = R"(name: t
cellTypes:
  N: {childCellType: A, childCellNumber: 2, isNodeLevel: true}
  A: {childCellType: B, childCellNumber: 2}
  B: {childCellType: A, childCellNumber: 2}
physicalCells: [{cellType: N}]
)";
  EXPECT_TRUE(FailsAt(cycle, "  A:", {"cellTypes.A", "cycle among cell types: A -> B -> A"}));
  const std::string two_levels = R"(name: t
cellTypes:
  N: {childCellType: K80, childCellNumber: 4, isNodeLevel: true}
  P: {childCellType: N, childCellNumber: 2, isNodeLevel: true}
physicalCells: [{cellType: P}]
)";
  EXPECT_TRUE(FailsAt(two_levels, "  P:", {"cellTypes.P", "P -> N -> K80", "2 node-level types"}));
  const std::string no_level = R"(name: t
cellTypes:
  N: {childCellType: K80, childCellNumber: 4}
physicalCells: [{cellType: N, cellAddress: n1}]
)";
  EXPECT_TRUE(
      FailsAt(no_level, "physicalCells", {"physicalCells[0].cellType", "no node-level type"}));
  const std::string zero = R"(name: t
cellTypes:
  N: {childCellType: K80, childCellNumber: 0, isNodeLevel: true}
physicalCells: [{cellType: N}]
)";
  EXPECT_TRUE(FailsAt(zero, "childCellNumber",
                      {"cellTypes.N.childCellNumber", "expected an integer from 1"}));
}

TEST(ClusterFileTest, PhysicalCellErrors) {
  const std::string types = R"(name: t
cellTypes:
  N: {childCellType: K80, childCellNumber: 4, isNodeLevel: true}
  P: {childCellType: N, childCellNumber: 2}
)";
  EXPECT_TRUE(FailsAt(types + "physicalCells: [{cellType: Q}]\n", "physicalCells",
                      {"physicalCells[0].cellType", "unknown cell type \"Q\"", "N, P"}));
  EXPECT_TRUE(
      FailsAt(types + "physicalCells:\n  - {cellType: P, cellChildren: [{cellAddress: a}]}\n",
              "cellChildren", {"physicalCells[0].cellChildren", "expected 2 children", "got 1"}));
  EXPECT_TRUE(FailsAt(types + "physicalCells:\n  - {cellType: N, cellAddress: a}\n"
                              "  - {cellAddress: a, cellType: N}\n",
                      "{cellAddress: a, cellType: N}",
                      {"physicalCells[1]", "node \"a\" is already the cell at physicalCells[0]"}));
  EXPECT_TRUE(ThrowsConfigError(
      [&] { ParseClusterYaml("name: t\nskuTypes: {K80: {cpu: 1}}\n", "bad.yaml"); },
      "bad.yaml:1:1: ", {"missing field \"cellTypes\""}));
}

TEST(ClusterFileTest, CellOnDeclaredNodeWithOtherGpus) {
  const std::string text = WithShape("    gpuModel: T4\n    sockets: [{switches: [2]}]\n") +
                           "cellTypes:\n"
                           "  N: {childCellType: T4, childCellNumber: 4, isNodeLevel: true}\n"
                           "physicalCells: [{cellType: N, cellAddress: n0}]\n";
  EXPECT_TRUE(FailsAt(text, "physicalCells:", {"node \"n0\" has 2 GPUs but a N cell holds 4"}));
}

TEST(ClusterFileTest, DuplicateNamesNameBothLines) {
  const std::string text = WithShape("    gpuModel: T4\n    sockets: [{switches: [1]}]\n") +
                           "  - {shape: s, name: n0}\n";
  EXPECT_TRUE(FailsAt(text, "{shape: s, name: n0}",
                      {"nodes[1].name", "node \"n0\" is already declared at bad.yaml:"}));
}

// Each of these grew past 6 GiB or ran for minutes from a few KB, or overflowed; now each is an
// error at its line naming the bound.
TEST(ClusterFileTest, SizesAreBoundedBeforeNodesAreMade) {
  const std::string shape = "    gpuModel: T4\n    sockets: [{switches: [128]}]\n";
  const std::string many = WithShape(shape) + "  - {namePrefix: m, count: 9000, shape: s}\n";
  EXPECT_TRUE(
      FailsAt(many, "count: 9000", {"nodes[1].count", "more than the limit of 262144 GPUs"}));
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets: [{switches: [1048576]}]\n"),
                      "switches:", {"switches[0]", "expected an integer from 1 to 128"}));
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets: [{switches: [100, 100]}]\n"),
                      "switches:", {"more than the limit of 128 GPUs a node"}));
  const std::string cpus =
      WithShape("    gpuModel: T4\n    sockets: [{cpus: \"0-65535\", switches: [1]}]\n") +
      "  - {namePrefix: m, count: 1000, shape: s}\n";
  EXPECT_TRUE(FailsAt(cpus, "count: 1000", {"more than the limit of 32000000 CPU ids"}));
  std::string aliases = WithShape("    gpuModel: T4\n    sockets: [{switches: [1]}]\n") +
                        "  - &big {namePrefix: m, count: 60000, shape: s}\n";
  aliases += "  - *big\n";
  EXPECT_TRUE(FailsAt(aliases, "&big", {"nodes[2].count", "more than the limit of 100000 nodes"}));
  std::string labels = "{";
  for (int i = 0; i < 65; ++i) labels += "l" + std::to_string(i) + ": v, ";
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets: [{switches: [1]}]\n") +
                          "  - {name: m, shape: s, labels: " + labels + "}}\n",
                      "labels:", {"nodes[1].labels", "more than the limit of 64 labels a node"}));
  std::string chain = "name: c\ncellTypes:\n";
  for (int i = 0; i < 3000; ++i)
    chain += "  t" + std::to_string(i) + ": {childCellType: t" + std::to_string(i + 1) +
             ", childCellNumber: 1}\n";
  chain +=
      "  t3000: {childCellType: K80, childCellNumber: 1, isNodeLevel: true}\n"
      "physicalCells: [{cellType: t0, cellAddress: a}]\n";
  EXPECT_TRUE(FailsAt(chain, "  t0:", {"cellTypes.t0", "more than the limit of 16 levels"}));
  // Eight levels of ten aliases each stand for 10^8 nodes.
  std::string laughs =
      "name: t\nnodes: []\nracks: []\nbogus:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    laughs += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 10; ++k) laughs += ", " + prev;
    laughs += "]\n";
  }
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml(laughs, "bad.yaml"); },
                                "bad.yaml:", {"with its aliases expanded", "1000000 YAML nodes"}));
  EXPECT_TRUE(FailsAt("name: " + std::string(300, 'n') + "\n",
                      "name:", {"name", "300 characters, more than the limit of 253"}));
}

// A cluster whose shapes give no GPUs was refused later, by the cell tree, with no line.
TEST(ClusterFileTest, AClusterWithoutGpusIsRefusedAtItsNodes) {
  EXPECT_TRUE(
      FailsAt("name: c\n"
              "gpuModels: [{name: A100, memoryMiB: 81920}]\n"
              "nodeShapes:\n"
              "  s: {gpuModel: A100, sockets: [{cpus: \"0-7\", memoryMiB: 1024}]}\n"
              "nodes:\n"
              "  - {namePrefix: n-, count: 2, shape: s}\n",
              "  - {namePrefix", {"nodes: no node has GPUs", "switches:"}));
}

TEST(ClusterFileTest, ArithmeticIsChecked) {
  // Two sockets of 2^40 MiB each (each within bounds) add up past a node's bound.
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets:\n"
                                "      - {memoryMiB: 1099511627776, switches: [1]}\n"
                                "      - {memoryMiB: 1099511627776}\n"),
                      "      - {memoryMiB: 1099511627776, switches",
                      {"nodeShapes.s.sockets", "add up to more than the limit"}));
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets:\n"
                                "      - {memoryMiB: 9223372036854775807, switches: [1]}\n"),
                      "9223372036854775807", {"expected an integer from 0 to 1099511627776"}));
  const std::string cells =
      "cellTypes:\n  N: {childCellType: K80, childCellNumber: 8, isNodeLevel: true}\n"
      "physicalCells: [{cellType: N, cellAddress: a}]\n";
  EXPECT_TRUE(FailsAt("name: c\nskuTypes: {K80: {cpu: 1e300}}\n" + cells, "skuTypes",
                      {"skuTypes.K80.cpu", "more than the limit"}));
  EXPECT_TRUE(FailsAt("name: c\nskuTypes: {K80: {memory: 9000000000Ti}}\n" + cells, "skuTypes",
                      {"skuTypes.K80.memory", "at most 1099511627776 MiB"}));
  // Within a GPU's bound, but eight GPUs' worth is past a node's.
  EXPECT_TRUE(FailsAt("name: c\nskuTypes: {K80: {memory: 200000Ti}}\n" + cells, "physicalCells",
                      {"physicalCells[0]", "MiB of memory a node"}));
}

TEST(ClusterFileTest, DuplicatesNameBothLines) {
  EXPECT_TRUE(FailsAt(WithShape("    gpuModel: T4\n    sockets: [{switches: [1]}]\n",
                                "  - {name: T4, memoryMiB: 1}\n"),
                      "{name: T4, memoryMiB: 1}",
                      {"gpuModels[2].name", "model \"T4\" is already declared at bad.yaml:4"}));
  EXPECT_TRUE(ThrowsConfigError(
      [&] { ParseClusterYaml("name: t\nracks:\n  - {name: r}\n  - {name: r}\n", "bad.yaml"); },
      "bad.yaml:4:12: ", {"racks[1].name", "rack \"r\" is already declared at bad.yaml:3:12;"}));
}

// The digits count adds make names longer than the prefix.
TEST(ClusterFileTest, GeneratedNodeNamesAreBoundedToo) {
  const std::string text =
      "name: t\ngpuModels: [{name: T4, memoryMiB: 1}]\n"
      "nodeShapes: {s: {gpuModel: T4, sockets: [{switches: [1]}]}}\n"
      "nodes: [{namePrefix: " +
      std::string(252, 'n') + ", count: 100, shape: s}]\n";
  EXPECT_TRUE(FailsAt(
      text, "namePrefix",
      {"nodes[0].namePrefix", "the node names have 254 characters", "more than the limit of 253"}));
}

TEST(ClusterFileTest, TextIsOneUtf8Document) {
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: t\nracks: [\xff]\n", "bad.yaml"); },
                                "bad.yaml:2:9: ", {"invalid UTF-8 (byte 0xFF)"}));
  // An overlong encoding of '/' and a lone surrogate are not UTF-8 either.
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: \xc0\xaf\n", "bad.yaml"); },
                                "bad.yaml:1:7: ", {"invalid UTF-8"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: \xed\xa0\x80\n", "bad.yaml"); },
                                "bad.yaml:1:7: ", {"invalid UTF-8"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: t\n---\nbogus: 1\n", "bad.yaml"); },
                                "bad.yaml:2:1: ", {"a second YAML document"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: t\n...\nbogus: 1\n", "bad.yaml"); },
                                "bad.yaml:3:1: ", {"a second YAML document"}));
  // yaml-cpp 0.7's LoadAll looped forever, allocating, on a stray comma.
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml(",\n", "bad.yaml"); },
                                "bad.yaml:1:1: ", {"YAML syntax error"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("# only a comment\n", "bad.yaml"); },
                                "bad.yaml:1:1: ", {"no YAML document"}));
  // A byte order mark and CRLF line ends are read as the plain text.
  const std::string crlf =
      "\xef\xbb\xbfname: t\r\ngpuModels: [{name: T4, memoryMiB: 1}]\r\n"
      "nodeShapes: {s: {gpuModel: T4, sockets: [{switches: [1]}]}}\r\n"
      "nodes: [{name: n0, shape: s}]\r\n";
  EXPECT_EQ(ParseClusterYaml(crlf, "ok.yaml").nodes.at(0).name, "n0");
  // A second byte order mark read as an unclosed quote further down (or as part of a key).
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("\xef\xbb\xbf" + crlf, "bad.yaml"); },
                                "bad.yaml:1:1: ", {"a second byte order mark"}));
  // yaml-cpp reads a tagged value as if it had no tag ("!!null 8" was 8): refused, not ignored.
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: !!null t\n", "bad.yaml"); },
                                "bad.yaml:1:7: ", {"a YAML tag", "remove it"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("x: 1\nracks: !custom [a]\n", "bad.yaml"); },
                                "bad.yaml:2:8: ", {"a YAML tag (\"!custom\")"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: t\nnodes: !!map {}\n", "bad.yaml"); },
                                "bad.yaml:2:8: ", {"a YAML tag"}));
  // Old Mac line ends and NUL bytes read as one line and as a "hex number": say what they are.
  EXPECT_TRUE(
      ThrowsConfigError([&] { ParseClusterYaml("name: t\rgpuModels: []\r", "bad.yaml"); },
                        "bad.yaml:1:8: ", {"a carriage return without a line feed", "LF or CRLF"}));
  EXPECT_TRUE(
      ThrowsConfigError([&] { ParseClusterYaml(std::string("name: t\0x\n", 10), "b.yaml"); },
                        "b.yaml:1:8: ", {"a NUL byte"}));
  // An unclosed quote took every later line into the value; the error blamed the missing GPUs.
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("name: \"t\ngpuModels: []\n", "b.yaml"); },
                                "b.yaml:1:7: ", {"no closing \"; close it"}));
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml("x: 1\nname: 'it''s\n", "b.yaml"); },
                                "b.yaml:2:7: ", {"no closing '"}));
  const std::string quoted =
      "name: 'it''s'\ngpuModels: [{name: \"T\\\"4\", memoryMiB: 1}]\n"
      "nodeShapes: {s: {gpuModel: \"T\\\"4\", sockets: [{switches: [1]}]}}\n"
      "nodes: [{name: n0, shape: s}]\n";
  EXPECT_EQ(ParseClusterYaml(quoted, "ok.yaml").name, "it's");
  // Behind a byte order mark, yaml-cpp's positions were taken 3 bytes off: every quoted value
  // after the first line looked unclosed.
  EXPECT_EQ(ParseClusterYaml("\xef\xbb\xbf" + quoted, "ok.yaml").name, "it's");
  const std::string dir = ::testing::TempDir();
  EXPECT_TRUE(ThrowsConfigError([&] { LoadClusterFile(dir); }, dir + ": ", {"is a directory"}));
}

TEST(ClusterFileTest, FileErrors) {
  const std::string path = WriteTempFile("berth_bad_cluster.yaml", "name: t\nracks: [\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadClusterFile(path); }, path + ":", {"YAML syntax error"}));
  const std::string unknown = WriteTempFile("berth_unknown_field.yaml", "name: t\n\nbogus: 1\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadClusterFile(unknown); },
                                unknown + ":3:1: ", {"unknown field \"bogus\""}));
  EXPECT_TRUE(ThrowsConfigError([&] { LoadClusterFile("/nonexistent/c.yaml"); },
                                "/nonexistent/c.yaml: ", {"cannot read"}));
}

}  // namespace
}  // namespace berth
