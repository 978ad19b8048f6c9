#include "core/job.h"

#include <gtest/gtest.h>

#include <string>

#include "core/synthetic_cluster.h"

namespace berth {
namespace {

JobSpec Whole(int gpus, int replicas = 1) {
  JobSpec spec;
  TaskGroup group;
  group.replicas = replicas;
  group.demand.gpus = gpus;
  spec.groups.push_back(group);
  return spec;
}

bool NeverFits(const Cluster& cluster, const JobSpec& spec, const std::string& part) {
  const std::string why = WhyJobNeverFits(cluster, spec);
  EXPECT_NE(why.find(part), std::string::npos) << "why: \"" << why << "\"";
  return !why.empty();
}

// An affinity tighter than any cell that could hold the replica, or the gang, is known at
// once: the job is reported as never fitting rather than left pending without a word.
TEST(JobTest, AnAffinityTighterThanEveryCellNeverFits) {
  const Cluster cluster = SyntheticDgxCluster(2, 2, 0);
  int per_switch = 0;
  for (const Gpu& g : cluster.nodes[0].gpus) per_switch += g.pcie_switch == 0;
  ASSERT_GE(per_switch, 1);

  JobSpec two_on_a_gpu = Whole(2);
  two_on_a_gpu.groups[0].demand.affinity = Level::kGpu;
  EXPECT_TRUE(NeverFits(cluster, two_on_a_gpu, "2 GPUs on one gpu"));

  JobSpec switch_plus_one = Whole(per_switch + 1);
  switch_plus_one.groups[0].demand.affinity = Level::kSwitch;
  EXPECT_TRUE(NeverFits(cluster, switch_plus_one, "on one switch"));
  JobSpec one_switch = Whole(per_switch);
  one_switch.groups[0].demand.affinity = Level::kSwitch;
  EXPECT_EQ(WhyJobNeverFits(cluster, one_switch), "");

  JobSpec gang = Whole(1, 2);
  gang.gang_affinity = Level::kGpu;
  EXPECT_TRUE(NeverFits(cluster, gang, "gangAffinity gpu puts on one gpu"));
  gang.groups[0].replicas = 1;
  EXPECT_EQ(WhyJobNeverFits(cluster, gang), "");
  gang.groups[0].replicas = 8;
  gang.gang_affinity = Level::kNode;
  EXPECT_EQ(WhyJobNeverFits(cluster, gang), "");  // 8 x 1 GPU on one 8-GPU node
  gang.groups[0].replicas = 9;
  EXPECT_TRUE(NeverFits(cluster, gang, "gangAffinity node puts on one node"));
}

// A node selector reads "node" as the node's name, as the node-selector filter does (review: a
// job pinned to a node by name was refused as fitting no node, though the filter would take it).
TEST(JobTest, ANodeSelectorOnTheNodesNameFits) {
  const Cluster cluster = SyntheticDgxCluster(2, 2, 0);
  JobSpec pinned = Whole(8);
  pinned.groups[0].node_selector["node"] = "dgx-1";
  EXPECT_EQ(WhyJobNeverFits(cluster, pinned), "");
  pinned.groups[0].node_selector["node"] = "dgx-9";
  EXPECT_TRUE(NeverFits(cluster, pinned, "matching its node selector"));
}

}  // namespace
}  // namespace berth
