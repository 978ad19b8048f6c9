// berth's NVML adapter (src/agent/nvml.h) against a fake libnvidia-ml (tests/agent/fake_nvml.cc)
// that answers as the DGX A100 of tests/data/agent/dgx-a100/. This stands in for hardware the
// machines these tests run on do not have (it was checked once on a real H200: nvml.h). What it
// checks is that, given NVML's documented answers, the adapter builds the same node as the
// nvidia-smi parsers do from that machine's captures.
#include "agent/nvml.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "agent_test_util.h"
#include "core/node_comparison.h"

namespace berth {
namespace {

DiscoveredNode FromNvidiaSmi() {
  const GpuQuery query = ParseGpuQuery(Capture("dgx-a100/query.csv"), "query.csv");
  const GpuTopology topo = ParseTopology(Capture("dgx-a100/topo.txt"), "topo.txt");
  const GpuList list = ParseGpuList(Capture("dgx-a100/list.txt"), "list.txt");
  return BuildNode("host", query, topo, DgxHost(), &list);
}

std::vector<std::vector<int>> SwitchGroups(const Node& node) {
  std::vector<std::vector<int>> groups(node.switches.size());
  for (size_t g = 0; g < node.gpus.size(); ++g)
    groups[node.gpus[g].pcie_switch].push_back(static_cast<int>(g));
  return groups;
}

TEST(NvmlTest, TheDgxA100AsNvidiaSmiShowsIt) {
  std::string why;
  const std::optional<DiscoveredNode> nvml =
      DiscoverWithNvml(BERTH_FAKE_NVML, "host", DgxHost(), &why);
  ASSERT_TRUE(nvml) << why;
  const DiscoveredNode smi = FromNvidiaSmi();
  EXPECT_EQ(nvml->conditions, smi.conditions);
  EXPECT_EQ(nvml->gpu_uuids, smi.gpu_uuids);
  EXPECT_EQ(nvml->host_index, smi.host_index);
  ASSERT_EQ(nvml->models.size(), smi.models.size());
  for (size_t m = 0; m < smi.models.size(); ++m) {
    EXPECT_EQ(nvml->models[m].name, smi.models[m].name);
    EXPECT_EQ(nvml->models[m].memory_mib, smi.models[m].memory_mib);
  }
  const Node& a = nvml->node;
  const Node& b = smi.node;
  EXPECT_EQ(a.cpu_milli, b.cpu_milli);
  EXPECT_EQ(a.memory_mib, b.memory_mib);
  ASSERT_EQ(a.sockets.size(), b.sockets.size());
  for (size_t s = 0; s < b.sockets.size(); ++s) EXPECT_EQ(a.sockets[s].cpus, b.sockets[s].cpus);
  ASSERT_EQ(a.switches.size(), b.switches.size());
  for (size_t s = 0; s < b.switches.size(); ++s)
    EXPECT_EQ(a.switches[s].socket, b.switches[s].socket);
  ASSERT_EQ(a.gpus.size(), 8u);
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (size_t g = 0; g < b.gpus.size(); ++g) {
    EXPECT_EQ(a.gpus[g].model, b.gpus[g].model) << g;
    EXPECT_EQ(a.gpus[g].pcie_switch, b.gpus[g].pcie_switch) << g;
    EXPECT_EQ(a.gpus[g].nvlink_domain, b.gpus[g].nvlink_domain) << g;
    EXPECT_EQ(a.gpus[g].mig_enabled, b.gpus[g].mig_enabled) << g;
  }
  EXPECT_EQ(SwitchGroups(a), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_TRUE(CompareNodes(a, b).empty());
}

TEST(NvmlTest, TheReadingMatchesTheCaptures) {
  std::string why;
  const std::optional<NvmlReading> r = ReadNvml(BERTH_FAKE_NVML, &why);
  ASSERT_TRUE(r) << why;
  EXPECT_TRUE(r->notes.empty());
  const GpuQuery q = ParseGpuQuery(Capture("dgx-a100/query.csv"), "q");
  ASSERT_EQ(r->query.gpus.size(), q.gpus.size());
  for (size_t g = 0; g < q.gpus.size(); ++g) {
    EXPECT_EQ(r->query.gpus[g].uuid, q.gpus[g].uuid);
    EXPECT_EQ(r->query.gpus[g].name, q.gpus[g].name);
    EXPECT_EQ(r->query.gpus[g].memory_mib, q.gpus[g].memory_mib);
    EXPECT_EQ(r->query.gpus[g].bus_id, q.gpus[g].bus_id);
    EXPECT_EQ(r->query.gpus[g].mig_current, q.gpus[g].mig_current);
  }
  const GpuTopology t = ParseTopology(Capture("dgx-a100/topo.txt"), "t");
  EXPECT_EQ(r->topology.links, t.links);  // NV12 everywhere, X on the diagonal
  EXPECT_EQ(r->topology.cpus, t.cpus);
  EXPECT_EQ(r->topology.numa, t.numa);
  EXPECT_EQ(r->list.gpu_uuids, ParseGpuList(Capture("dgx-a100/list.txt"), "l").gpu_uuids);
}

TEST(NvmlSamplerTest, SamplesTheNodesGpusByTheirIndexInItsList) {
  std::string why;
  const std::vector<std::string> uuids = FromNvidiaSmi().gpu_uuids;
  // The agent's list in another order, with a GPU NVML does not have: indices are the list's.
  const std::vector<std::string> list = {uuids[3], "GPU-not-here", uuids[0]};
  const std::unique_ptr<NvmlSampler> sampler = NvmlSampler::Open(BERTH_FAKE_NVML, list, &why);
  ASSERT_NE(sampler, nullptr) << why;
  for (int round = 0; round < 2; ++round) {  // NVML stays open between samples
    const std::vector<GpuReport> gpus = sampler->Sample();
    ASSERT_EQ(gpus.size(), 2u);
    std::map<int, GpuReport> by_gpu;
    for (const GpuReport& g : gpus) by_gpu[g.gpu] = g;
    ASSERT_TRUE(by_gpu.count(0) && by_gpu.count(2));
    EXPECT_EQ(by_gpu[0].fb_used_mib, 3 * 1024);  // the fake's GPU 3
    EXPECT_EQ(by_gpu[0].fb_free_mib, 81920 - 3 * 1024);
    EXPECT_EQ(by_gpu[0].util_percent, 30);
    EXPECT_EQ(by_gpu[2].fb_used_mib, 0);
    EXPECT_EQ(by_gpu[2].util_percent, 0);
    EXPECT_EQ(by_gpu[2].sm_active, -1);  // DCGM's alone
    EXPECT_EQ(by_gpu[2].xid, -1);
  }
}

TEST(NvmlSamplerTest, SaysWhyItCannotSample) {
  std::string why;
  EXPECT_EQ(NvmlSampler::Open("/nonexistent/libnvidia-ml.so.1", {"GPU-x"}, &why), nullptr);
  EXPECT_EQ(why.rfind("NVML: /nonexistent/libnvidia-ml.so.1: ", 0), 0u) << why;
  EXPECT_EQ(NvmlSampler::Open(BERTH_FAKE_NVML_NOUUID, {"GPU-x"}, &why), nullptr);
  EXPECT_NE(why.find("lacks nvmlDeviceGetUUID"), std::string::npos) << why;
  EXPECT_EQ(NvmlSampler::Open(BERTH_FAKE_NVML, {"GPU-not-here"}, &why), nullptr);
  EXPECT_EQ(why, "NVML finds none of the node's GPUs");
}

TEST(NvmlTest, NoLibraryFallsBackWithAReason) {
  std::string why;
  EXPECT_FALSE(DiscoverWithNvml("/nonexistent/libnvidia-ml.so.1", "host", DgxHost(), &why));
  EXPECT_EQ(why.rfind("NVML: /nonexistent/libnvidia-ml.so.1: ", 0), 0u) << why;
}

TEST(NvmlTest, AMissingRequiredFunctionIsNamed) {
  std::string why;
  EXPECT_FALSE(ReadNvml(BERTH_FAKE_NVML_NOUUID, &why));
  EXPECT_NE(why.find("lacks nvmlDeviceGetUUID"), std::string::npos) << why;
}

TEST(NvmlTest, AGpuWhoseHandleFailsIsACondition) {
  ::setenv("BERTH_FAKE_NVML_LOST", "5", 1);
  std::string why;
  const std::optional<DiscoveredNode> d =
      DiscoverWithNvml(BERTH_FAKE_NVML, "host", DgxHost(), &why);
  ::unsetenv("BERTH_FAKE_NVML_LOST");
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->node.gpus.size(), 7u);
  EXPECT_EQ(d->host_index, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));
  ASSERT_EQ(d->conditions.size(), 1u);
  EXPECT_NE(d->conditions[0].find("GPU 5"), std::string::npos) << d->conditions[0];
  EXPECT_NE(d->conditions[0].find("GPU is lost"), std::string::npos) << d->conditions[0];
  // GPU 4 lost its PCIe partner: a switch of its own.
  EXPECT_EQ(SwitchGroups(d->node), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4}, {5, 6}}));
}

TEST(NvmlTest, MigInstancesAsNvidiaSmiListsThem) {
  ::setenv("BERTH_FAKE_NVML_MIG", "1", 1);
  std::string why;
  const std::optional<DiscoveredNode> nvml =
      DiscoverWithNvml(BERTH_FAKE_NVML, "host", DgxHost(), &why);
  ::unsetenv("BERTH_FAKE_NVML_MIG");
  ASSERT_TRUE(nvml) << why;
  const GpuQuery query = ParseGpuQuery(Capture("dgx-a100-mig/query.csv"), "query.csv");
  const GpuTopology topo = ParseTopology(Capture("dgx-a100/topo.txt"), "topo.txt");
  const GpuList list = ParseGpuList(Capture("dgx-a100-mig/list.txt"), "list.txt");
  const DiscoveredNode smi = BuildNode("host", query, topo, DgxHost(), &list);
  ASSERT_EQ(nvml->node.gpus.size(), smi.node.gpus.size());
  for (size_t g = 0; g < smi.node.gpus.size(); ++g)
    EXPECT_EQ(nvml->node.gpus[g].mig_enabled, smi.node.gpus[g].mig_enabled) << g;
  EXPECT_EQ(nvml->models[0].mig_profiles.size(), smi.models[0].mig_profiles.size());
  ASSERT_EQ(nvml->mig_devices.size(), smi.mig_devices.size());
  for (size_t m = 0; m < smi.mig_devices.size(); ++m) {
    EXPECT_EQ(nvml->mig_devices[m].gpu, smi.mig_devices[m].gpu) << m;
    EXPECT_EQ(nvml->mig_devices[m].device, smi.mig_devices[m].device) << m;
    EXPECT_EQ(nvml->mig_devices[m].profile, smi.mig_devices[m].profile) << m;
    EXPECT_EQ(nvml->mig_devices[m].uuid, smi.mig_devices[m].uuid) << m;
  }
  EXPECT_EQ(nvml->conditions, smi.conditions);
  // NVML also gives each instance's placement, which nvidia-smi -L does not: there berth lays
  // the instances out itself, here as they are.
  std::vector<int> starts, smi_starts;
  for (const MigDevice& d : nvml->mig_devices) starts.push_back(d.start);
  for (const MigDevice& d : smi.mig_devices) smi_starts.push_back(d.start);
  EXPECT_EQ(starts, (std::vector<int>{0, 4, 0, 4, 6}));
  EXPECT_EQ(smi_starts, starts);
  EXPECT_EQ(nvml->node.gpus[1].mig_layout,
            (std::vector<std::string>{"4g.40gb@0", "2g.20gb@4", "1g.10gb@6"}));
}

}  // namespace
}  // namespace berth
