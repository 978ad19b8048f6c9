#include "agent/local_node.h"

#include <gtest/gtest.h>

#include "core/mig.h"

namespace berth {
namespace {

Node NodeOf(std::vector<Gpu> gpus) {
  Node n;
  n.name = "n";
  n.gpus = std::move(gpus);
  return n;
}

Gpu H100(bool mig, std::vector<std::string> layout = {}) {
  Gpu g;
  g.model = "H100-80GB-HBM3";
  g.mig_enabled = mig;
  g.mig_layout = std::move(layout);
  return g;
}

const std::vector<GpuModel> kModels = {
    {"H100-80GB-HBM3", 81559, BuiltinMigProfiles("H100-80GB-HBM3")}};

// berth up prints a first command to type: it must fit the machine it runs on (a cloud VM has
// one GPU; on a device run it said --gpus 2, which waits for ever).
TEST(FirstRunGpuFlagsTest, AsksForNoMoreWholeGpusThanTheNodeHas) {
  EXPECT_EQ(FirstRunGpuFlags(NodeOf({H100(false)}), kModels), "--gpus 1");
  EXPECT_EQ(FirstRunGpuFlags(NodeOf(std::vector<Gpu>(8, H100(false))), kModels), "--gpus 2");
  EXPECT_EQ(FirstRunGpuFlags(NodeOf({H100(true), H100(false)}), kModels), "--gpus 1");
  HostTopology host;
  host.cpus = {0, 1};
  host.numa_nodes = {{0, {0, 1}, 4096}};
  const Cluster one = SimulatedCluster("vm", 1, host);
  EXPECT_EQ(FirstRunGpuFlags(one.nodes[0], one.models), "--gpus 1");
}

TEST(FirstRunGpuFlagsTest, AsksForAMigSliceWhenEveryGpuIsInMigMode) {
  EXPECT_EQ(FirstRunGpuFlags(NodeOf({H100(true)}), kModels), "--mig 1g.10gb");
  EXPECT_EQ(FirstRunGpuFlags(NodeOf({H100(true, {"3g.40gb@4", "4g.40gb@0"})}), kModels),
            "--mig 3g.40gb");
}

}  // namespace
}  // namespace berth
