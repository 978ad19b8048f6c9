#include "agent/gpu_discovery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "../config/config_test_util.h"
#include "agent_test_util.h"
#include "config/cluster_file.h"
#include "core/node_comparison.h"

namespace berth {
namespace {

HostTopology OneNumaHost(const std::string& cpus) {
  HostTopology host;
  host.cpus = ParseCpuList(cpus, "cpus");
  host.packages = {{0, host.cpus}};
  host.numa_nodes = {{0, host.cpus, 2097152}};
  return host;
}

// Asserts that the node passes ValidateCluster in a one-node cluster of its models.
void ExpectValid(const DiscoveredNode& d) {
  Cluster cluster;
  cluster.name = "discovered";
  cluster.models = d.models;
  cluster.nodes = {d.node};
  EXPECT_EQ(ValidateCluster(cluster), "");
}

std::vector<std::vector<int>> SwitchGroups(const Node& node) {
  std::vector<std::vector<int>> groups(node.switches.size());
  for (size_t g = 0; g < node.gpus.size(); ++g)
    groups[node.gpus[g].pcie_switch].push_back(static_cast<int>(g));
  return groups;
}

DiscoveredNode Discover(const std::string& dir, const HostTopology& host, bool list = false) {
  const GpuQuery query = ParseGpuQuery(Capture(dir + "/query.csv"), "query.csv");
  const GpuTopology topo =
      ParseTopology(Capture((dir == "dgx-a100-mig" ? "dgx-a100" : dir) + "/topo.txt"), "topo");
  if (!list) return BuildNode("host", query, topo, host, nullptr);
  const GpuList gpus = ParseGpuList(Capture(dir + "/list.txt"), "list.txt");
  return BuildNode("host", query, topo, host, &gpus);
}

TEST(GpuQueryTest, ParsesTheDgxRows) {
  const GpuQuery q = ParseGpuQuery(Capture("dgx-a100/query.csv"), "q");
  ASSERT_EQ(q.gpus.size(), 8u);
  EXPECT_TRUE(q.conditions.empty());
  const GpuRecord& g = q.gpus[3];
  EXPECT_EQ(g.index, 3);
  EXPECT_EQ(g.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(g.memory_mib, 81920);
  EXPECT_EQ(g.bus_id, "00000000:4E:00.0");
  EXPECT_EQ(g.mig_current, MigMode::kDisabled);
  EXPECT_EQ(g.uuid.substr(0, 4), "GPU-");
  EXPECT_TRUE(g.problem.empty());
}

TEST(GpuQueryTest, AGpuOffTheBusIsReportedNotFatal) {
  const GpuQuery q = ParseGpuQuery(Capture("lost-gpu/query.csv"), "q");
  ASSERT_EQ(q.gpus.size(), 8u);
  EXPECT_EQ(q.gpus[5].problem, "[GPU requires reset]");
  ASSERT_EQ(q.conditions.size(), 1u);
  EXPECT_NE(q.conditions[0].find("GPU 5 (00000000:A1:00.0)"), std::string::npos);
  EXPECT_NE(q.conditions[0].find("reboot"), std::string::npos);
  // nvidia-smi's line for a GPU it cannot open at all, and a row of unknown errors.
  const GpuQuery lost = ParseGpuQuery(
      "0, GPU-a, NVIDIA L40S, 46068, 00000000:01:00.0, [N/A], [N/A]\n"
      "Unable to determine the device handle for GPU0000:21:00.0: Unknown Error\n"
      "1, [Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error], "
      "[Unknown Error]\n",
      "q");
  ASSERT_EQ(lost.gpus.size(), 2u);
  EXPECT_EQ(lost.gpus[1].problem, "[Unknown Error]");
  ASSERT_EQ(lost.conditions.size(), 2u);
  EXPECT_NE(lost.conditions[0].find("GPU0000:21:00.0: Unknown Error"), std::string::npos);
}

TEST(GpuQueryTest, MigPendingReboot) {
  const GpuQuery q = ParseGpuQuery(Capture("mig-pending/query.csv"), "q");
  ASSERT_EQ(q.conditions.size(), 1u);
  EXPECT_EQ(q.conditions[0],
            "GPU 0: MIG pending reboot: its MIG mode is Disabled now and Enabled after a GPU "
            "reset or reboot; berth uses it as Disabled until then");
  EXPECT_EQ(q.gpus[1].mig_current, MigMode::kEnabled);
}

TEST(GpuQueryTest, GarbageNamesTheLine) {
  EXPECT_TRUE(ThrowsConfigError(
      [] { ParseGpuQuery("0, GPU-a, NVIDIA L40S, 46068, 01:00.0, [N/A], [N/A]\nhello\n", "q"); },
      "q:2: ", {"expected 7 comma-separated fields", "nvidia-smi --query-gpu="}));
  EXPECT_TRUE(ThrowsConfigError(
      [] { ParseGpuQuery("0, GPU-a, NVIDIA L40S, 46068 MiB, 01:00.0, [N/A], [N/A]\n", "q"); },
      "q:1: memory.total: ", {"\"46068 MiB\"", "nounits"}));
  EXPECT_TRUE(ThrowsConfigError(
      [] { ParseGpuQuery("64, GPU-a, NVIDIA L40S, 1, 01:00.0, [N/A], [N/A]\n", "q"); },
      "q:1: index: ", {"from 0 to 63"}));
  EXPECT_TRUE(ThrowsConfigError(
      [] {
        ParseGpuQuery(
            "0, GPU-a, L40S, 1, 01:00.0, [N/A], [N/A]\n"
            "0, GPU-b, L40S, 1, 02:00.0, [N/A], [N/A]\n",
            "q");
      },
      "q:2: index: ", {"listed twice"}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseGpuQuery("0, GPU-a, L40S, 1, 01:00.0, On, [N/A]\n", "q"); },
                        "q:1: mig.mode.current: ", {"\"On\""}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseGpuQuery("0, abc, L40S, 1, 01:00.0, [N/A], [N/A]\n", "q"); },
                        "q:1: uuid: ", {"GPU-"}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseGpuQuery(std::string(2 << 20, 'x'), "q"); }, "q: ", {"bytes"}));
}

TEST(GpuListTest, MigDeviceUuids) {
  const GpuList list = ParseGpuList(Capture("dgx-a100-mig/list.txt"), "l");
  ASSERT_EQ(list.gpu_uuids.size(), 8u);
  ASSERT_EQ(list.mig_devices.size(), 5u);
  EXPECT_EQ(list.mig_devices[0].gpu, 0);
  EXPECT_EQ(list.mig_devices[0].profile, "3g.40gb");
  EXPECT_EQ(list.mig_devices[0].uuid.substr(0, 4), "MIG-");
  EXPECT_EQ(list.mig_devices[4].gpu, 1);
  EXPECT_EQ(list.mig_devices[4].device, 2);
  EXPECT_EQ(list.mig_devices[4].profile, "1g.10gb");
  // The legacy MIG UUID form (drivers before R470).
  const GpuList legacy = ParseGpuList(
      "GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
      "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0)\n",
      "l");
  ASSERT_EQ(legacy.mig_devices.size(), 1u);
  EXPECT_EQ(legacy.mig_devices[0].uuid, "MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0");
  EXPECT_TRUE(ThrowsConfigError([] { ParseGpuList("  MIG 1g.5gb Device 0: (UUID: MIG-x)\n", "l"); },
                                "l:1: ", {"before any GPU"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseGpuList("GPU 0: x (UUID: GPU-a)\nbanana\n", "l"); },
                                "l:2: ", {"nvidia-smi -L"}));
}

TEST(TopologyTest, DgxMatrixWithNics) {
  const GpuTopology t = ParseTopology(Capture("dgx-a100/topo.txt"), "topo");
  EXPECT_EQ(t.gpu_count, 8);
  EXPECT_EQ(t.nics.size(), 10u);
  EXPECT_EQ(t.links[0][7], (Link{LinkKind::kNvLink, 12}));
  EXPECT_EQ(t.links[3][3].kind, LinkKind::kSelf);
  EXPECT_EQ(t.nic_links[1][0].kind, LinkKind::kPxb);
  EXPECT_EQ(t.nic_links[1][2].kind, LinkKind::kNode);
  EXPECT_EQ(t.nic_links[7][0].kind, LinkKind::kSys);
  EXPECT_EQ(FormatCpuList(t.cpus[5]), "64-127,192-255");
  EXPECT_EQ(t.numa[5], 1);
}

TEST(TopologyTest, NewerDriverWithGpuNumaIdAndNicLegend) {
  const GpuTopology t = ParseTopology(Capture("pcie-l40s/topo.txt"), "topo");
  EXPECT_EQ(t.gpu_count, 8);
  EXPECT_EQ(t.nics, (std::vector<std::string>{"NIC0", "NIC1"}));
  EXPECT_EQ(t.links[0][1].kind, LinkKind::kPix);
  EXPECT_EQ(t.links[0][2].kind, LinkKind::kNode);
  EXPECT_EQ(t.links[0][4].kind, LinkKind::kSys);
  EXPECT_EQ(t.numa[7], 1);
  EXPECT_EQ(FormatCpuList(t.cpus[0]), "0-7,16-23");
}

TEST(TopologyTest, OlderDriverWithoutNumaAffinity) {
  const GpuTopology t = ParseTopology(Capture("old-driver/topo.txt"), "topo");
  EXPECT_EQ(t.gpu_count, 4);
  EXPECT_EQ(t.numa, (std::vector<int>{-1, -1, -1, -1}));
  EXPECT_EQ(FormatCpuList(t.cpus[3]), "8-15,24-31");
}

TEST(TopologyTest, EscapesAndNaAffinity) {
  const GpuTopology t = ParseTopology(
      "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
      "GPU0\t X \tPHB\tN/A\tN/A\n"
      "GPU1\tPHB\t X \tN/A\tN/A\n",
      "topo");
  EXPECT_EQ(t.gpu_count, 2);
  EXPECT_TRUE(t.cpus[0].empty());
  EXPECT_EQ(t.numa[1], -1);
  EXPECT_EQ(t.links[0][1].kind, LinkKind::kPhb);
}

TEST(TopologyTest, GarbageNamesTheLine) {
  EXPECT_TRUE(ThrowsConfigError(
      [] { ParseTopology("\tGPU0\tGPU1\nGPU0\t X \tNVX\nGPU1\tPHB\t X \n", "topo"); },
      "topo:2: column 3: ", {"unknown link \"NVX\""}));
  // Whole-matrix mistakes name the header's line (issue 10: every refusal names a line).
  EXPECT_TRUE(ThrowsConfigError([] { ParseTopology("\n\tGPU0\tGPU1\nGPU0\t X \tPHB\n", "topo"); },
                                "topo:2: ", {"GPU1 has a column but no row"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseTopology("\tGPU0\tGPU1\nGPU0\tPHB\t X \n", "topo"); },
                                "topo:2: ", {"expected X on the diagonal"}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseTopology("\tGPU0\tCPU Affinity\nGPU0\t X \t0-3,x\n", "topo"); },
                        "topo:2: CPU Affinity: cpulist", {"\"x\""}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseTopology("GPU0 GPU1\n", "topo"); }, "topo:1: ", {"header row"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParseTopology("\n\n", "topo"); }, "topo:1: ", {"empty"}));
  // An escape sequence never finished swallowed the lines after it, shifting every line number.
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseTopology("\tGPU0\x1b[4\nGPU0\t X \nGPU1\t X \n", "topo"); },
                        "topo:3: ", {"row \"GPU1\" has no column"}));
}

TEST(BuildNodeTest, DgxA100) {
  const DiscoveredNode d = Discover("dgx-a100", DgxHost());
  EXPECT_TRUE(d.conditions.empty());
  const Node& n = d.node;
  ASSERT_EQ(n.gpus.size(), 8u);
  ASSERT_EQ(n.sockets.size(), 2u);
  EXPECT_EQ(FormatCpuList(n.sockets[1].cpus), "64-127,192-255");
  EXPECT_EQ(n.cpu_milli, 256000);
  EXPECT_EQ(n.memory_mib, 2 * 1048576);
  // NVSwitch: the GPU cells all say NV12, the NICs show the PCIe switch pairs.
  EXPECT_EQ(SwitchGroups(n), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(n.switches[2].socket, 1);
  for (const Gpu& gpu : n.gpus) {
    EXPECT_EQ(gpu.nvlink_domain, 0);
    EXPECT_EQ(gpu.model, "A100-SXM4-80GB");
    EXPECT_FALSE(gpu.mig_enabled);
  }
  ASSERT_EQ(d.models.size(), 1u);
  EXPECT_EQ(d.models[0].memory_mib, 81920);
  EXPECT_TRUE(d.models[0].mig_capable());  // MIG disabled, yet supported
  EXPECT_EQ(d.gpu_uuids.size(), 8u);
  EXPECT_EQ(d.host_index, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  ExpectValid(d);
}

TEST(BuildNodeTest, PcieServerFromTheFakeSys) {
  const DiscoveredNode d = Discover("pcie-l40s", ReadHostTopology(AgentData("sys-2socket")));
  EXPECT_TRUE(d.conditions.empty());
  const Node& n = d.node;
  EXPECT_EQ(SwitchGroups(n), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(n.switches[0].socket, 0);
  EXPECT_EQ(n.switches[3].socket, 1);
  for (const Gpu& gpu : n.gpus) EXPECT_EQ(gpu.nvlink_domain, -1);
  EXPECT_EQ(n.gpus[0].model, "L40S");
  EXPECT_FALSE(d.models[0].mig_capable());
  EXPECT_EQ(n.cpu_milli, 32000);
  ExpectValid(d);
}

TEST(BuildNodeTest, OldDriverTakesTheSocketFromCpuAffinity) {
  const DiscoveredNode d = Discover("old-driver", ReadHostTopology(AgentData("sys-2socket")));
  const Node& n = d.node;
  EXPECT_EQ(SwitchGroups(n), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(n.switches[0].socket, 0);
  EXPECT_EQ(n.switches[1].socket, 1);
  EXPECT_EQ(n.gpus[0].model, "RTX-A6000");
  ExpectValid(d);
}

TEST(BuildNodeTest, ALostGpuIsLeftOut) {
  const GpuQuery q = ParseGpuQuery(Capture("lost-gpu/query.csv"), "q");
  const GpuTopology t = ParseTopology(Capture("pcie-l40s/topo.txt"), "topo");
  const DiscoveredNode d =
      BuildNode("h", q, t, ReadHostTopology(AgentData("sys-2socket")), nullptr);
  EXPECT_EQ(d.node.gpus.size(), 7u);
  EXPECT_EQ(d.host_index, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(SwitchGroups(d.node), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4}, {5, 6}}));
  ASSERT_EQ(d.conditions.size(), 1u);
  EXPECT_NE(d.conditions[0].find("GPU 5"), std::string::npos);
  ExpectValid(d);
}

TEST(BuildNodeTest, MigOnADgx) {
  const DiscoveredNode d = Discover("dgx-a100-mig", DgxHost(), true);
  EXPECT_TRUE(d.node.gpus[0].mig_enabled);
  EXPECT_TRUE(d.node.gpus[1].mig_enabled);
  EXPECT_FALSE(d.node.gpus[2].mig_enabled);
  ASSERT_EQ(d.mig_devices.size(), 5u);
  EXPECT_EQ(d.mig_devices[2].profile, "4g.40gb");
  EXPECT_EQ(FindMigProfile(d.models[0].mig_profiles, "1g.10gb"), 0);
  // The GPUs' layouts are their instances, each pinned where berth laid it out (nvidia-smi -L
  // gives no starts), and every instance has its start: a slice placed there names one.
  EXPECT_EQ(d.node.gpus[0].mig_layout, (std::vector<std::string>{"3g.40gb@0", "3g.40gb@4"}));
  EXPECT_EQ(d.node.gpus[1].mig_layout,
            (std::vector<std::string>{"4g.40gb@0", "2g.20gb@4", "1g.10gb@6"}));
  EXPECT_TRUE(d.node.gpus[2].mig_layout.empty());
  for (const MigDevice& m : d.mig_devices) EXPECT_GE(m.start, 0) << m.uuid;
  EXPECT_TRUE(d.conditions.empty());
  ExpectValid(d);
}

TEST(BuildNodeTest, MigInstancesGivenInAnyOrderArePairedByProfile) {
  const GpuQuery q = ParseGpuQuery(
      "0, GPU-a, NVIDIA A100-SXM4-80GB, 81920, 00000000:01:00.0, Enabled, Enabled\n", "q");
  const GpuTopology t = ParseTopology("\tGPU0\nGPU0\t X \n", "topo");
  // Smallest first, as a listing may order them; starts unknown.
  const GpuList list = ParseGpuList(
      "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n"
      "  MIG 1g.10gb Device 0: (UUID: MIG-small)\n"
      "  MIG 3g.40gb Device 1: (UUID: MIG-big)\n"
      "  MIG 2g.20gb Device 2: (UUID: MIG-mid)\n",
      "l");
  const DiscoveredNode d = BuildNode("h", q, t, OneNumaHost("0-7"), &list);
  ASSERT_EQ(d.mig_devices.size(), 3u);
  std::set<int> slots;
  for (const MigDevice& m : d.mig_devices) {
    const std::string pinned = m.profile + "@" + std::to_string(m.start);
    const std::vector<std::string>& layout = d.node.gpus[0].mig_layout;
    EXPECT_NE(std::find(layout.begin(), layout.end(), pinned), layout.end()) << pinned;
    slots.insert(m.start);
  }
  EXPECT_EQ(slots.size(), 3u);
  ExpectValid(d);
}

TEST(BuildNodeTest, MigStartsTheListerGaveAreKept) {
  const GpuQuery q = ParseGpuQuery(
      "0, GPU-a, NVIDIA A100-SXM4-80GB, 81920, 00000000:01:00.0, Enabled, Enabled\n", "q");
  const GpuTopology t = ParseTopology("\tGPU0\nGPU0\t X \n", "topo");
  GpuList list = ParseGpuList(
      "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n"
      "  MIG 2g.20gb Device 0: (UUID: MIG-a)\n"
      "  MIG 1g.10gb Device 1: (UUID: MIG-b)\n"
      "  MIG 1g.10gb Device 2: (UUID: MIG-c)\n",
      "l");
  list.mig_devices[0].start = 0;  // as NVML says it; the last one's start unknown
  list.mig_devices[1].start = 2;
  const DiscoveredNode d = BuildNode("h", q, t, OneNumaHost("0-7"), &list);
  ASSERT_EQ(d.mig_devices.size(), 3u);
  EXPECT_EQ(d.mig_devices[0].start, 0);
  EXPECT_EQ(d.mig_devices[1].start, 2);
  EXPECT_GE(d.mig_devices[2].start, 3);
  EXPECT_EQ(d.node.gpus[0].mig_layout[0], "2g.20gb@0");
  EXPECT_EQ(d.node.gpus[0].mig_layout[1], "1g.10gb@2");
  ExpectValid(d);
}

TEST(BuildNodeTest, MigInstancesBerthCannotUseAreConditions) {
  const GpuQuery q = ParseGpuQuery(
      "0, GPU-a, NVIDIA A100-SXM4-80GB, 81920, 00000000:01:00.0, Enabled, Enabled\n"
      "1, GPU-b, NVIDIA A100-SXM4-80GB, 81920, 00000000:02:00.0, Enabled, Enabled\n",
      "q");
  const GpuTopology t = ParseTopology("\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n", "topo");
  // GPU 0: no instances made yet. GPU 1: a profile berth has no table entry for.
  const GpuList list = ParseGpuList(
      "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n"
      "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-b)\n"
      "  MIG 5g.50gb Device 0: (UUID: MIG-odd)\n",
      "l");
  const DiscoveredNode d = BuildNode("h", q, t, OneNumaHost("0-7"), &list);
  ASSERT_EQ(d.conditions.size(), 2u);
  EXPECT_NE(d.conditions[0].find("GPU 0: MIG is enabled and it has no MIG instances"),
            std::string::npos)
      << d.conditions[0];
  EXPECT_NE(d.conditions[1].find("GPU 1: its MIG instances (5g.50gb) are not a layout berth "
                                 "knows: unknown MIG profile"),
            std::string::npos)
      << d.conditions[1];
  EXPECT_EQ(d.mig_devices[0].start, -1);
  EXPECT_TRUE(d.node.gpus[1].mig_layout.empty());
  ExpectValid(d);
}

TEST(BuildNodeTest, MigOnH100) {
  const DiscoveredNode d = Discover("h100-mig", OneNumaHost("0-223"), true);
  ASSERT_EQ(d.node.gpus.size(), 4u);
  EXPECT_EQ(d.node.gpus[3].model, "H100-80GB-HBM3");
  EXPECT_TRUE(d.node.gpus[3].mig_enabled);
  EXPECT_EQ(d.node.gpus[3].nvlink_domain, 0);
  EXPECT_EQ(d.mig_devices.size(), 28u);
  EXPECT_EQ(d.mig_devices[27].gpu, 3);
  EXPECT_EQ(d.mig_devices[27].device, 6);
  EXPECT_EQ(d.models[0].mig_profiles[0].name, "1g.10gb");
  // One switch per GPU: nothing links them below the host bridge.
  EXPECT_EQ(d.node.switches.size(), 4u);
  ExpectValid(d);
}

// Real cloud VMs with one GPU (driver 580.159.04), captured on device runs: topo -m with the
// GPU NUMA ID column and no NIC. NVML found the same node there as nvidia-smi's output does.
void ExpectARealOneGpuVm(const std::string& dir, const std::string& model, int64_t memory_mib,
                         const std::string& uuid) {
  const DiscoveredNode d = Discover(dir, OneNumaHost("0-15"), true);
  EXPECT_TRUE(d.conditions.empty());
  ASSERT_EQ(d.node.gpus.size(), 1u);
  EXPECT_EQ(d.node.gpus[0].model, model);
  EXPECT_FALSE(d.node.gpus[0].mig_enabled);
  EXPECT_EQ(d.node.gpus[0].nvlink_domain, -1);
  ASSERT_EQ(d.models.size(), 1u);
  EXPECT_EQ(d.models[0].memory_mib, memory_mib);
  ASSERT_TRUE(d.models[0].mig_capable());
  for (const MigProfile& p : d.models[0].mig_profiles)  // a slice fits in its GPU
    EXPECT_LE(p.memory_mib, d.models[0].memory_mib) << p.name;
  EXPECT_EQ(d.gpu_uuids, std::vector<std::string>{uuid});
  EXPECT_EQ(d.node.cpu_milli, 16000);
  ExpectValid(d);
}

TEST(BuildNodeTest, ARealH200Vm) {
  ExpectARealOneGpuVm("h200-vm", "H200", 143771, "GPU-2b45063c-bc98-6c10-8466-94f9d81d6671");
}

TEST(BuildNodeTest, ARealH100Vm) {
  ExpectARealOneGpuVm("h100-vm", "H100-80GB-HBM3", 81559,
                      "GPU-b5ac8b54-90c4-5697-add2-7dfd3329aa09");
}

TEST(BuildNodeTest, MigOnAModelWithoutProfilesIsOfferedWhole) {
  const GpuQuery q = ParseGpuQuery(
      "0, GPU-a, NVIDIA B300 SXM6 AC, 288000, 00000000:01:00.0, Enabled, Enabled\n", "q");
  const GpuTopology t = ParseTopology("\tGPU0\nGPU0\t X \n", "topo");
  const DiscoveredNode d = BuildNode("h", q, t, OneNumaHost("0-7"), nullptr);
  EXPECT_FALSE(d.node.gpus[0].mig_enabled);
  ASSERT_EQ(d.conditions.size(), 1u);
  EXPECT_NE(d.conditions[0].find("no MIG profiles for B300-SXM6-AC"), std::string::npos);
  ExpectValid(d);
}

TEST(ModelNameTest, StripsTheVendorPrefix) {
  EXPECT_EQ(ModelName("NVIDIA A100-SXM4-80GB"), "A100-SXM4-80GB");
  EXPECT_EQ(ModelName("NVIDIA RTX A6000"), "RTX-A6000");
  EXPECT_EQ(ModelName("Tesla V100-SXM2-32GB"), "V100-SXM2-32GB");
}

TEST(CompareNodesTest, TheDgxMatchesTheExampleShape) {
  const Cluster declared =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/dgx-a100.yaml");
  const DiscoveredNode d = Discover("dgx-a100", DgxHost());
  EXPECT_EQ(CompareNodes(d.node, declared.nodes[0]), std::vector<std::string>{});
}

TEST(CompareNodesTest, ListsTheDifferences) {
  const Cluster declared = LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/pcie8.yaml");
  const DiscoveredNode dgx = Discover("dgx-a100", DgxHost());
  const std::vector<std::string> diff = CompareNodes(dgx.node, declared.nodes[0]);
  const std::vector<std::string> expected = {
      "socket 0 has CPUs 0-63,128-191, the cluster file declares 0-31,64-95",
      "socket 1 has CPUs 64-127,192-255, the cluster file declares 32-63,96-127",
      "GPUs 0-7 are A100-SXM4-80GB, the cluster file declares L40S",
      "NVLink domains are [0-7], the cluster file declares none"};
  EXPECT_EQ(diff, expected);

  const GpuQuery q = ParseGpuQuery(Capture("lost-gpu/query.csv"), "q");
  const GpuTopology t = ParseTopology(Capture("pcie-l40s/topo.txt"), "topo");
  Node lost = BuildNode("h", q, t, ReadHostTopology(AgentData("sys-2socket")), nullptr).node;
  EXPECT_EQ(CompareNodes(lost, declared.nodes[0])[0], "found 7 GPUs, the cluster file declares 8");

  Node regrouped = Discover("pcie-l40s", ReadHostTopology(AgentData("sys-2socket"))).node;
  regrouped.sockets = declared.nodes[0].sockets;
  regrouped.gpus[2].pcie_switch = 0;
  regrouped.gpus[3].pcie_switch = 0;
  regrouped.gpus[4].pcie_switch = 0;  // and onto socket 0
  EXPECT_EQ(CompareNodes(regrouped, declared.nodes[0]),
            (std::vector<std::string>{
                "GPU 4 is on socket 0, the cluster file declares socket 1",
                "GPUs share PCIe switches as [0-4] [5] [6-7], the cluster file declares [0-1] "
                "[2-3] [4-5] [6-7]"}));
}

}  // namespace
}  // namespace berth
