#include "core/allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "allocator_test_util.h"
#include "config/flat_node.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

class AllocatorTest : public ::testing::Test {
 protected:
  void Use(Cluster cluster, const std::vector<VirtualClusterSpec>& vcs = {}) {
    a_.reset();
    cluster_ = std::move(cluster);
    a_ = std::make_unique<Allocator>(&cluster_, vcs);
    ASSERT_EQ(a_->error(), "");
    initial_ = Snapshot(*a_);
  }
  void UseExample(const std::string& name, const std::vector<VirtualClusterSpec>& vcs = {}) {
    Use(ExampleCluster(name), vcs);
  }

  // Allocates and expects success; returns the id (-1 on failure, after a test failure).
  int Alloc(const AllocationRequest& req) {
    std::string why;
    const std::optional<int> id = a_->Allocate(req, &why);
    EXPECT_TRUE(id.has_value()) << why;
    EXPECT_EQ(a_->CheckConsistency(), "");
    return id.value_or(-1);
  }
  // Expects a refusal that leaves the free lists and the allocations as they were.
  void Refused(const AllocationRequest& req, const std::string& why_part = "") {
    const FreeLists before = Snapshot(*a_);
    const size_t count = a_->allocations().size();
    std::string why;
    const std::optional<int> id = a_->Allocate(req, &why);
    EXPECT_FALSE(id.has_value()) << "allocated " << *id;
    EXPECT_FALSE(why.empty());
    if (!why_part.empty()) {
      EXPECT_NE(why.find(why_part), std::string::npos) << why;
    }
    EXPECT_TRUE(Snapshot(*a_) == before) << "a refused request changed the free lists";
    EXPECT_EQ(a_->allocations().size(), count);
    EXPECT_EQ(a_->CheckConsistency(), "");
  }
  void Release(int id) {
    a_->Release(id);
    EXPECT_EQ(a_->CheckConsistency(), "");
  }
  void ReleaseAll() {
    std::vector<int> ids;
    for (const auto& [id, alloc] : a_->allocations()) ids.push_back(id);
    for (int id : ids) Release(id);
  }
  void ExpectInitial() { EXPECT_TRUE(Snapshot(*a_) == initial_) << "free lists differ"; }

  // A replica of an allocation; an empty placement (and a test failure) if there is none.
  const ReplicaPlacement& R(int id, int replica = 0) const {
    static const ReplicaPlacement kNone = [] {
      ReplicaPlacement r;
      r.gpus = {-1};
      return r;
    }();
    const Allocation* alloc = a_->Find(id);
    if (alloc && replica < static_cast<int>(alloc->replicas.size()))
      return alloc->replicas[replica];
    ADD_FAILURE() << "no replica " << replica << " of allocation " << id;
    return kNone;
  }
  // (node, first GPU) of an allocation's first replica.
  std::pair<int, int> Where(int id) const { return {R(id).node, R(id).gpus.at(0)}; }
  int SwitchOf(int node, int gpu) const {
    return node < 0 || gpu < 0 ? -1 : cluster_.nodes[node].gpus[gpu].pcie_switch;
  }
  int SocketOf(int node, int gpu) const {
    return node < 0 || gpu < 0 ? -1 : cluster_.nodes[node].switches[SwitchOf(node, gpu)].socket;
  }
  std::set<int> Sockets(const ReplicaPlacement& r) const {
    std::set<int> s;
    for (int g : r.gpus) s.insert(SocketOf(r.node, g));
    return s;
  }
  std::set<int> Switches(const ReplicaPlacement& r) const {
    std::set<int> s;
    for (int g : r.gpus) s.insert(SwitchOf(r.node, g));
    return s;
  }
  // The VC pool a replica's first GPU is in (0: physical).
  int PoolOf(const ReplicaPlacement& r) const {
    return a_->buddy().pool(a_->tree().gpu_cell(r.node, r.gpus[0]));
  }

  Cluster cluster_;
  std::unique_ptr<Allocator> a_;
  FreeLists initial_;
};

// ---------------------------------------------------------------------------------------------
// Topology affinity

TEST_F(AllocatorTest, SwitchAffinityKeepsGpusOnOnePcieSwitch) {
  UseExample("pcie8.yaml");
  const int first = Alloc(WholeGpus(1));
  const int pair = Alloc(WholeGpus(2, Level::kSwitch));
  EXPECT_EQ(R(pair).gpus.size(), 2u);
  EXPECT_EQ(Switches(R(pair)).size(), 1u);
  EXPECT_NE(*Switches(R(pair)).begin(), SwitchOf(0, R(first).gpus[0]));
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, SwitchAffinityIsRefusedWhenEverySwitchIsBroken) {
  UseExample("pcie8.yaml");
  for (int g : {0, 2, 4, 6}) a_->SetGpuBad(0, g, true);
  Refused(WholeGpus(2, Level::kSwitch));
  const int socket = Alloc(WholeGpus(2, Level::kSocket));
  EXPECT_EQ(Sockets(R(socket)).size(), 1u);
  EXPECT_EQ(Switches(R(socket)).size(), 2u);
  Refused(WholeGpus(3, Level::kSocket));
  const int node = Alloc(WholeGpus(2));  // unset: anywhere on one node
  EXPECT_EQ(R(node).gpus.size(), 2u);
  ReleaseAll();
  for (int g : {0, 2, 4, 6}) a_->SetGpuBad(0, g, false);
  ExpectInitial();
}

TEST_F(AllocatorTest, TwoGpusGoIntoTheBrokenSocket) {
  // After one GPU is taken, the 2-GPU job must use the free switch next to it, keeping the other
  // socket whole for a 4-GPU job.
  for (std::optional<Level> affinity :
       {std::optional<Level>(), std::optional<Level>(Level::kSwitch),
        std::optional<Level>(Level::kSocket)}) {
    UseExample("pcie8.yaml");
    const int one = Alloc(WholeGpus(1));
    const int broken = SocketOf(0, R(one).gpus[0]);
    const int two = Alloc(WholeGpus(2, affinity));
    EXPECT_EQ(Sockets(R(two)), std::set<int>{broken});
    EXPECT_EQ(Switches(R(two)).size(), 1u);
    const int four = Alloc(WholeGpus(4, Level::kSocket));
    EXPECT_EQ(Sockets(R(four)), std::set<int>{1 - broken});
    Release(two);
    Release(four);
    Release(one);
    ExpectInitial();
  }
}

TEST_F(AllocatorTest, TwoGpusPackIntoTheBrokenNode) {
  Use(SyntheticDgxCluster(3, 3, 0));
  const int one = Alloc(WholeGpus(1));
  const int node = R(one).node;
  const int two = Alloc(WholeGpus(2));
  EXPECT_EQ(R(two).node, node);
  EXPECT_EQ(Sockets(R(two)), Sockets(R(one)));
  const int three = Alloc(WholeGpus(1));  // the buddy of the first GPU
  EXPECT_EQ(R(three).node, node);
  EXPECT_EQ(Switches(R(three)), Switches(R(one)));
  // Two whole nodes remain for 8-GPU jobs.
  Alloc(WholeGpus(8));
  Alloc(WholeGpus(8));
  Refused(WholeGpus(8));
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, UnsetAffinityStaysInOneNodeAndPrefersTighterCells) {
  Use(SyntheticDgxCluster(2, 2, 0));
  const int two = Alloc(WholeGpus(2));
  EXPECT_EQ(Switches(R(two)).size(), 1u);
  Release(two);
  const int three = Alloc(WholeGpus(3));
  EXPECT_EQ(Sockets(R(three)).size(), 1u);
  const int four = Alloc(WholeGpus(4));
  EXPECT_EQ(Sockets(R(four)).size(), 1u);
  EXPECT_EQ(R(four).node, R(three).node);  // the other half of the broken node
  EXPECT_NE(Sockets(R(four)), Sockets(R(three)));
  const int eight = Alloc(WholeGpus(8));
  EXPECT_NE(R(eight).node, R(three).node);
  EXPECT_EQ(Sockets(R(eight)), (std::set<int>{0, 1}));
  const int last = Alloc(WholeGpus(1));
  EXPECT_EQ(R(last).node, R(three).node);
  EXPECT_EQ(Sockets(R(last)), Sockets(R(three)));
  Refused(WholeGpus(1));
  ReleaseAll();
  ExpectInitial();
  // Nine GPUs never fit one node; five spread over one node's sockets, not two nodes.
  Refused(WholeGpus(9));
  const int five = Alloc(WholeGpus(5));
  EXPECT_EQ(Sockets(R(five)).size(), 2u);
  const int five_again = Alloc(WholeGpus(5));
  EXPECT_NE(R(five_again).node, R(five).node);
  Refused(WholeGpus(4));  // 3 + 3 free, on two nodes
  const int three_more = Alloc(WholeGpus(3));
  EXPECT_EQ(R(three_more).gpus.size(), 3u);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, SocketAffinityRefusesWhatOnlyANodeHolds) {
  UseExample("dgx-a100.yaml");
  Refused(WholeGpus(5, Level::kSocket));
  Refused(WholeGpus(3, Level::kSwitch));
  const int four = Alloc(WholeGpus(4, Level::kSocket));
  EXPECT_EQ(Sockets(R(four)).size(), 1u);
  const int one = Alloc(WholeGpus(1, Level::kGpu));
  EXPECT_NE(Sockets(R(one)), Sockets(R(four)));
  Refused(WholeGpus(2, Level::kGpu));
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, ModelFilter) {
  UseExample("multi-rack.yaml");
  AllocationRequest l40s = WholeGpus(8);
  l40s.demand.models = {"L40S"};
  for (int i = 0; i < 6; ++i) {
    const int id = Alloc(l40s);
    EXPECT_EQ(cluster_.nodes[R(id).node].gpus[0].model, "L40S");
  }
  Refused(l40s);
  AllocationRequest other = WholeGpus(1);
  other.demand.models = {"H100-80GB"};
  Refused(other);
  other.demand.models = {"H100-80GB", "A100-80GB"};
  const int a100 = Alloc(other);
  EXPECT_EQ(cluster_.nodes[R(a100).node].gpus[0].model, "A100-80GB");
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, ExplicitHivedCells) {
  Use(ParseClusterYaml(R"(name: k80-pool
skuTypes: {K80: {gpu: 1, cpu: 4, memory: 32Gi}}
cellTypes:
  K80-PAIR: {childCellType: K80, childCellNumber: 2}
  K80-NODE: {childCellType: K80-PAIR, childCellNumber: 2, isNodeLevel: true}
  K80-NODE-POOL: {childCellType: K80-NODE, childCellNumber: 2}
physicalCells:
  - {cellType: K80-NODE-POOL, cellAddress: pool-a}
)",
                       "k80.yaml"),
      {{"vc", {{"K80-NODE-POOL.K80-NODE", 1}}}});
  const int one = Alloc(WholeGpus(1));
  // Two GPUs with PAIR (switch-level) affinity: the other pair, not one GPU from each.
  const int two = Alloc(WholeGpus(2, Level::kSwitch));
  const int leaf0 = a_->tree().gpu_cell(R(two).node, R(two).gpus[0]);
  const int leaf1 = a_->tree().gpu_cell(R(two).node, R(two).gpus[1]);
  EXPECT_EQ(a_->tree().cells()[leaf0].parent, a_->tree().cells()[leaf1].parent);
  EXPECT_EQ(a_->tree().type_of(a_->tree().cells()[leaf0].parent).name, "K80-PAIR");
  EXPECT_EQ(R(two).node, R(one).node);
  // The VC's guaranteed node is the other one: work outside VCs may not take it.
  Refused(WholeGpus(2), "guarantee");
  const int vc = Alloc(ForVc(WholeGpus(4), 0));
  EXPECT_NE(R(vc).node, R(one).node);
  EXPECT_EQ(a_->vcs()[0].bound_cells.size(), 1u);
  ReleaseAll();
  ExpectInitial();
}

// ---------------------------------------------------------------------------------------------
// Gangs

TEST_F(AllocatorTest, GangOfFourEightsLandsInOneRack) {
  UseExample("multi-rack.yaml");
  const int single = Alloc(WholeGpus(1));
  const std::string broken_rack = cluster_.nodes[R(single).node].rack;
  std::set<std::string> racks;
  for (int g = 0; g < 3; ++g) {
    const int gang = Alloc(Gang(4, 8, std::nullopt));
    const Allocation* alloc = a_->Find(gang);
    ASSERT_EQ(alloc->replicas.size(), 4u);
    std::set<int> nodes;
    std::set<std::string> gang_racks;
    for (const ReplicaPlacement& r : alloc->replicas) {
      nodes.insert(r.node);
      gang_racks.insert(cluster_.nodes[r.node].rack);
      EXPECT_EQ(r.gpus.size(), 8u);
    }
    EXPECT_EQ(nodes.size(), 4u);
    ASSERT_EQ(gang_racks.size(), 1u);
    EXPECT_NE(*gang_racks.begin(), broken_rack);
    racks.insert(*gang_racks.begin());
  }
  EXPECT_EQ(racks.size(), 3u);
  Refused(Gang(4, 8, std::nullopt));  // 31 GPUs are left
  const int three = Alloc(Gang(3, 8, Level::kRack));
  EXPECT_EQ(cluster_.nodes[R(three).node].rack, broken_rack);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, GangAffinityRackIsRefusedWhenNoRackCanHoldIt) {
  UseExample("multi-rack.yaml");
  // One GPU taken on the first node of every rack.
  std::set<std::string> seen;
  for (size_t n = 0; n < cluster_.nodes.size(); ++n)
    if (seen.insert(cluster_.nodes[n].rack).second)
      Alloc(OnNode(WholeGpus(1), static_cast<int>(n)));
  ASSERT_EQ(seen.size(), 4u);
  Refused(Gang(4, 8, Level::kRack), "");
  Refused(Gang(2, 8, Level::kNode));
  // Looser affinity: the gang spreads over racks.
  const int spread = Alloc(Gang(4, 8, std::nullopt));
  std::set<std::string> racks;
  for (const ReplicaPlacement& r : a_->Find(spread)->replicas)
    racks.insert(cluster_.nodes[r.node].rack);
  EXPECT_GE(racks.size(), 2u);
  const int in_rack = Alloc(Gang(2, 8, Level::kRack));
  EXPECT_EQ(cluster_.nodes[R(in_rack, 0).node].rack, cluster_.nodes[R(in_rack, 1).node].rack);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, GangOfSmallReplicasPacksIntoOneNode) {
  UseExample("multi-rack.yaml");
  const int gang = Alloc(Gang(4, 2, std::nullopt));
  std::set<int> nodes;
  for (const ReplicaPlacement& r : a_->Find(gang)->replicas) nodes.insert(r.node);
  EXPECT_EQ(nodes.size(), 1u);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, GangTriesEveryRackNotOnlyTheBestFit) {
  UseExample("multi-rack.yaml");
  auto node = [&](const std::string& name) {
    const int n = cluster_.FindNode(name);
    EXPECT_GE(n, 0) << name;
    return n;
  };
  // rack-a is the best fit for 16 GPUs (31 free) but its whole nodes have no CPU left; rack-d's
  // two DGX nodes are broken. Only rack-b can hold a 2x8 A100 gang.
  Alloc(OnNode(WholeGpus(1), node("dgx-a-0")));
  for (const char* name : {"dgx-a-1", "dgx-a-2", "dgx-a-3"})
    Alloc(OnNode(CpuOnly(a_->node_resources().cpu_milli(node(name)), 0), node(name)));
  Alloc(OnNode(WholeGpus(1), node("dgx-d-0")));
  Alloc(OnNode(WholeGpus(1), node("dgx-d-1")));
  AllocationRequest gang = Gang(2, 8, Level::kRack);
  gang.demand.models = {"A100-80GB"};
  gang.demand.cpu_milli = 1000;
  const int id = Alloc(gang);
  EXPECT_EQ(cluster_.nodes[R(id, 0).node].rack, "rack-b");
  EXPECT_EQ(cluster_.nodes[R(id, 1).node].rack, "rack-b");
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, CpuOnlyGangsWithAffinityAcrossCpuOnlyNodes) {
  // A GPU node with little CPU and a CPU-only node (no cell): a CPU-only gang spreads over both.
  Cluster cluster;
  cluster.models.push_back({"T4", 15360, {}});
  cluster.nodes.push_back(MakeFlatNode("gpu", 3000, 8192, 2, "T4"));
  cluster.nodes.push_back(MakeFlatNode("cpu", 8000, 8192, 0, ""));
  Use(std::move(cluster));
  AllocationRequest gang = CpuOnly(2000, 0);
  gang.replicas = 2;
  gang.gang_affinity = Level::kNode;
  Refused(gang, "node");
  gang.gang_affinity = Level::kCluster;
  const int spread = Alloc(gang);
  EXPECT_NE(R(spread, 0).node, R(spread, 1).node);
  Release(spread);
  // Both fit on the CPU-only node: one node, as asked.
  gang.demand.cpu_milli = 4000;
  gang.gang_affinity = Level::kNode;
  const int together = Alloc(gang);
  EXPECT_EQ(R(together, 0).node, 1);
  EXPECT_EQ(R(together, 1).node, 1);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, AFailingGangChangesNothing) {
  UseExample("multi-rack.yaml");
  // One GPU on 15 of the 16 nodes: one whole node remains, so the first replica of a 2x8 gang
  // is placed and the second is not.
  for (int n = 1; n < 16; ++n) Alloc(OnNode(WholeGpus(1), n));
  Refused(Gang(2, 8, std::nullopt));
  Refused(Gang(2, 8, Level::kRack));
  const int one = Alloc(Gang(1, 8, std::nullopt));
  EXPECT_EQ(R(one).node, 0);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, AFailingVcGangUnbindsWhatItBound) {
  UseExample("multi-rack.yaml", ExampleVcs());
  const int training = VcIndex(*a_, "training");
  Refused(ForVc(Gang(5, 8, std::nullopt), training));
  EXPECT_TRUE(a_->vcs()[training].bound_cells.empty());
  const int gang = Alloc(ForVc(Gang(4, 8, Level::kRack), training));
  EXPECT_EQ(a_->vcs()[training].bound_cells.size(), 4u);
  std::set<std::string> racks;
  for (const ReplicaPlacement& r : a_->Find(gang)->replicas) {
    racks.insert(cluster_.nodes[r.node].rack);
    EXPECT_EQ(PoolOf(r), training + 1);
  }
  EXPECT_EQ(racks.size(), 1u);
  Release(gang);
  EXPECT_TRUE(a_->vcs()[training].bound_cells.empty());
  ExpectInitial();
}

// ---------------------------------------------------------------------------------------------
// CPU and memory

TEST_F(AllocatorTest, CpusArePinnedToTheGpusSockets) {
  UseExample("dgx-a100.yaml");
  const std::vector<int>& socket0 = cluster_.nodes[0].sockets[0].cpus;
  const std::vector<int>& socket1 = cluster_.nodes[0].sockets[1].cpus;
  ASSERT_EQ(socket0.size(), 128u);
  const int two = Alloc(WholeGpus(2));
  const int s = *Sockets(R(two)).begin();
  EXPECT_EQ(R(two).sockets, std::vector<int>{s});
  EXPECT_EQ(R(two).cpus, cluster_.nodes[0].sockets[s].cpus);
  const int share = Alloc(Share(300));
  const int share_socket = SocketOf(0, R(share).gpus[0]);
  EXPECT_EQ(R(share).sockets, std::vector<int>{share_socket});
  EXPECT_EQ(R(share).cpus, cluster_.nodes[0].sockets[share_socket].cpus);
  const int cpu = Alloc(CpuOnly(1000, 1024));
  EXPECT_EQ(R(cpu).sockets, (std::vector<int>{0, 1}));
  std::vector<int> all = socket0;
  all.insert(all.end(), socket1.begin(), socket1.end());
  EXPECT_EQ(R(cpu).cpus, all);
  ReleaseAll();
  const int eight = Alloc(WholeGpus(8));
  EXPECT_EQ(R(eight).sockets, (std::vector<int>{0, 1}));
  EXPECT_EQ(R(eight).cpus, all);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, NodeCpuAndMemoryExhaustionBlockGpus) {
  UseExample("dgx-a100.yaml");
  const int64_t cpu = a_->node_resources().cpu_milli(0);
  const int64_t memory = a_->node_resources().memory_mib(0);
  ASSERT_EQ(cpu, 256000);
  ASSERT_EQ(memory, 2097152);
  const int hog = Alloc(CpuOnly(cpu, 0));
  AllocationRequest gpu = WholeGpus(1);
  gpu.demand.cpu_milli = 1;
  Refused(gpu);
  Refused(CpuOnly(1, 0));
  gpu.demand.cpu_milli = 0;
  const int free_ride = Alloc(gpu);
  Release(free_ride);
  Release(hog);
  const int memory_hog = Alloc(CpuOnly(0, memory));
  gpu.demand.memory_mib = 1;
  Refused(gpu);
  Release(memory_hog);
  const int fits = Alloc(gpu);
  EXPECT_EQ(a_->node_resources().free_memory_mib(0), memory - 1);
  Release(fits);
  ExpectInitial();
  EXPECT_EQ(a_->node_resources().free_cpu_milli(0), cpu);
}

TEST_F(AllocatorTest, AFullNodeSendsGpuJobsElsewhere) {
  Use(SyntheticDgxCluster(2, 2, 0));
  const int hog = Alloc(OnNode(CpuOnly(128000, 0), 0));
  EXPECT_EQ(R(hog).node, 0);
  AllocationRequest gpu = WholeGpus(8);
  gpu.demand.cpu_milli = 1000;
  const int placed = Alloc(gpu);
  EXPECT_EQ(R(placed).node, 1);
  Refused(gpu);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, AFullSocketSendsGpuJobsToTheOtherSocket) {
  UseExample("dgx-a100.yaml");
  // A 2-GPU job takes all of its socket's CPU (128 CPUs) and half its memory.
  AllocationRequest hog = WholeGpus(2);
  hog.demand.cpu_milli = 128000;
  const int h = Alloc(hog);
  const int hog_socket = *Sockets(R(h)).begin();
  // Packing would put the next GPU next to it; the socket has no CPU left, so it goes across.
  AllocationRequest one = WholeGpus(1);
  one.demand.cpu_milli = 1000;
  const int o = Alloc(one);
  EXPECT_EQ(Sockets(R(o)), std::set<int>{1 - hog_socket});
  // Any 4 GPUs now span both sockets, and the full one has no CPU for its half: refused.
  AllocationRequest spread = WholeGpus(4);
  spread.demand.cpu_milli = 2000;
  Refused(spread);
  AllocationRequest rest = WholeGpus(3);
  rest.demand.cpu_milli = 2000;
  const int r = Alloc(rest);
  EXPECT_EQ(Sockets(R(r)), std::set<int>{1 - hog_socket});
  ReleaseAll();
  ExpectInitial();
}

// ---------------------------------------------------------------------------------------------
// Fractional shares

TEST_F(AllocatorTest, SharesPackUpToOneGpu) {
  UseExample("dgx-a100.yaml");
  const int a = Alloc(Share(500));
  const int b = Alloc(Share(500));
  const int gpu = R(a).gpus[0];
  EXPECT_EQ(R(b).gpus[0], gpu);
  EXPECT_EQ(R(a).gpu_milli, 500);
  EXPECT_EQ(a_->gpu_used_milli(0, gpu), 1000);
  EXPECT_FALSE(a_->gpu_free(0, gpu));
  const int c = Alloc(Share(500));
  const int second = R(c).gpus[0];
  EXPECT_NE(second, gpu);
  EXPECT_EQ(SwitchOf(0, second), SwitchOf(0, gpu)) << "fresh shared GPUs pack too";
  const int d = Alloc(Share(600));  // 500 left on the second GPU: a third one
  const int third = R(d).gpus[0];
  EXPECT_NE(third, gpu);
  EXPECT_NE(third, second);
  const int e = Alloc(Share(400));  // best fit: the third GPU has exactly 400 left
  EXPECT_EQ(R(e).gpus[0], third);
  EXPECT_EQ(a_->gpu_used_milli(0, third), 1000);
  EXPECT_EQ(a_->gpu_used_milli(0, second), 500);
  // A whole-GPU job never gets a shared GPU.
  const int whole = Alloc(WholeGpus(4, Level::kSocket));
  for (int g : R(whole).gpus) EXPECT_TRUE(g != gpu && g != second && g != third);
  Refused(WholeGpus(2));  // one GPU free
  // The last share leaving gives the GPU back.
  Release(a);
  EXPECT_FALSE(a_->gpu_free(0, gpu));
  EXPECT_EQ(a_->gpu_used_milli(0, gpu), 500);
  Release(b);
  EXPECT_TRUE(a_->gpu_free(0, gpu));
  EXPECT_EQ(a_->gpu_used_milli(0, gpu), 0);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, SharesAccountGpuMemory) {
  UseExample("dgx-a100.yaml");  // 81920 MiB per GPU
  const int a = Alloc(Share(100, 60000));
  const int b = Alloc(Share(100, 30000));
  EXPECT_NE(R(b).gpus[0], R(a).gpus[0]) << "60000 + 30000 MiB do not fit one GPU";
  EXPECT_EQ(R(b).gpu_memory_mib, 30000);
  const int c = Alloc(Share(100, 21920));
  EXPECT_EQ(R(c).gpus[0], R(a).gpus[0]);
  Refused(Share(100, 81921));
  const int d = Alloc(Share(100, 81920));
  EXPECT_NE(R(d).gpus[0], R(a).gpus[0]);
  EXPECT_NE(R(d).gpus[0], R(b).gpus[0]);
  Refused(Share(1000));
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, ShareRequestsAreValidated) {
  UseExample("dgx-a100.yaml");
  AllocationRequest both = Share(500);
  both.demand.gpus = 1;
  Refused(both, "not several");
  Refused(Share(-5));
  AllocationRequest replicas = WholeGpus(1);
  replicas.replicas = 0;
  Refused(replicas);
  Refused(ForVc(WholeGpus(1), 0), "unknown virtual cluster");
}

TEST_F(AllocatorTest, ShareGangsPlaceEveryReplica) {
  UseExample("pcie8.yaml");
  AllocationRequest gang = Share(400);
  gang.replicas = 5;
  const int id = Alloc(gang);
  int milli = 0;
  for (int g = 0; g < 8; ++g) milli += a_->gpu_used_milli(0, g);
  EXPECT_EQ(milli, 2000);
  std::set<int> gpus;
  for (const ReplicaPlacement& r : a_->Find(id)->replicas) gpus.insert(r.gpus[0]);
  EXPECT_EQ(gpus.size(), 3u);  // 2 + 2 + 1
  gang.replicas = 20;          // 8000 milli at most on 8 GPUs, 400 a piece: 16 fit
  Refused(gang);
  ReleaseAll();
  ExpectInitial();
}

// ---------------------------------------------------------------------------------------------
// MIG

constexpr char kDynamicMigYaml[] = R"(name: mig
gpuModels:
  - {name: H100-80GB, memoryMiB: 81920, mig: builtin}
nodeShapes:
  hgx:
    gpuModel: H100-80GB
    mig: {enabled: true}
    sockets:
      - {cpus: "0-7", memoryMiB: 65536, switches: [2, 2]}
      - {cpus: "8-15", memoryMiB: 65536, switches: [2, 2]}
nodes:
  - {namePrefix: hgx-, count: 2, shape: hgx}
)";

TEST_F(AllocatorTest, SevenOneSliceInstancesShareAGpu) {
  Use(ParseClusterYaml(kDynamicMigYaml, "mig.yaml"));
  std::vector<int> ids;
  std::set<int> starts;
  for (int i = 0; i < 7; ++i) {
    ids.push_back(Alloc(Mig("1g.10gb")));
    EXPECT_EQ(Where(ids.back()), Where(ids[0]));
    starts.insert(R(ids.back()).mig_start);
    EXPECT_GE(R(ids.back()).mig_profile, 0);
  }
  EXPECT_EQ(starts, (std::set<int>{0, 1, 2, 3, 4, 5, 6}));
  const int node = R(ids[0]).node;
  const int gpu = R(ids[0]).gpus[0];
  EXPECT_EQ(a_->mig_layout(node, gpu).used_compute(), 7);
  const int eighth = Alloc(Mig("1g.10gb"));
  EXPECT_NE(Where(eighth), Where(ids[0]));
  // The GPU returns to the free space when its last instance leaves.
  for (int id : ids) {
    EXPECT_FALSE(a_->gpu_free(node, gpu));
    Release(id);
  }
  EXPECT_TRUE(a_->gpu_free(node, gpu));
  EXPECT_TRUE(a_->mig_layout(node, gpu).empty());
  Release(eighth);
  ExpectInitial();
}

TEST_F(AllocatorTest, MigProfilesFollowThePlacementRules) {
  Use(ParseClusterYaml(kDynamicMigYaml, "mig.yaml"));
  const int a = Alloc(Mig("3g.40gb"));
  const int b = Alloc(Mig("3g.40gb"));
  EXPECT_EQ(Where(a), Where(b));
  EXPECT_EQ((std::set<int>{R(a).mig_start, R(b).mig_start}), (std::set<int>{0, 4}));
  const int c = Alloc(Mig("4g.40gb"));
  EXPECT_NE(Where(c), Where(a));
  EXPECT_EQ(R(c).mig_start, 0);
  const int d = Alloc(Mig("3g.40gb"));  // 4g@0 + 3g@4
  EXPECT_EQ(Where(d), Where(c));
  EXPECT_EQ(R(d).mig_start, 4);
  const int e = Alloc(Mig("2g.20gb"));
  EXPECT_NE(Where(e), Where(c));
  const int f = Alloc(Mig("1g.20gb"));  // packs next to the 2g
  EXPECT_EQ(Where(f), Where(e));
  EXPECT_NE(R(f).mig_start, R(e).mig_start);
  const int g = Alloc(Mig("7g.80gb"));
  const MigLayout& full = a_->mig_layout(R(g).node, R(g).gpus[0]);
  EXPECT_EQ(full.used_slots(), 0xff);
  const int me = Alloc(Mig("1g.10gb+me"));
  EXPECT_EQ(Where(me), Where(e));
  const int me2 = Alloc(Mig("1g.10gb+me"));
  EXPECT_NE(Where(me2), Where(e)) << "one +me instance per GPU";
  Refused(Mig("5g.50gb"));
  Refused(Mig("3g.20gb"));  // an A100-40GB name
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, MigGpusServeOnlyMigRequests) {
  UseExample("h100-mig.yaml");
  Refused(WholeGpus(1));
  Refused(Share(100));
  UseExample("dgx-a100.yaml");  // MIG-capable model, MIG off
  Refused(Mig("1g.10gb"));
}

TEST_F(AllocatorTest, FixedLayoutsServeOnlyTheirProfiles) {
  UseExample("h100-mig.yaml");
  const int fixed = cluster_.FindNode("h100-fixed-0");
  ASSERT_GE(fixed, 0);
  Refused(OnNode(Mig("4g.40gb"), fixed));
  Refused(OnNode(Mig("1g.20gb"), fixed));
  Refused(OnNode(Mig("7g.80gb"), fixed));
  Refused(OnNode(Mig("1g.10gb+me"), fixed));
  // Per GPU: 3g.40gb, 2g.20gb and two 1g.10gb; the 3g can only sit at slot 4.
  std::set<int> gpus;
  for (int i = 0; i < 8; ++i) {
    const int id = Alloc(OnNode(Mig("3g.40gb"), fixed));
    EXPECT_EQ(R(id).node, fixed);
    EXPECT_EQ(R(id).mig_start, 4);
    gpus.insert(R(id).gpus[0]);
  }
  EXPECT_EQ(gpus.size(), 8u);
  Refused(OnNode(Mig("3g.40gb"), fixed));
  std::set<std::pair<int, int>> ones;
  for (int i = 0; i < 16; ++i) {
    const int id = Alloc(OnNode(Mig("1g.10gb"), fixed));
    EXPECT_NE(R(id).mig_start, 4);
    ones.insert({R(id).gpus[0], R(id).mig_start});
  }
  EXPECT_EQ(ones.size(), 16u);
  Refused(OnNode(Mig("1g.10gb"), fixed));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(R(Alloc(OnNode(Mig("2g.20gb"), fixed))).node, fixed);
  Refused(OnNode(Mig("2g.20gb"), fixed));
  ReleaseAll();
  ExpectInitial();
  // Without a node: 4g instances only ever land on the 16 carve-on-demand GPUs.
  for (int i = 0; i < 16; ++i) EXPECT_NE(R(Alloc(Mig("4g.40gb"))).node, fixed);
  Refused(Mig("4g.40gb"));
  ReleaseAll();
  ExpectInitial();
}

// ---------------------------------------------------------------------------------------------
// Health

TEST_F(AllocatorTest, ABadGpuIsNeverHandedOut) {
  UseExample("dgx-a100.yaml");
  a_->SetGpuBad(0, 3, true);
  EXPECT_FALSE(a_->gpu_usable(0, 3));
  EXPECT_FALSE(a_->gpu_free(0, 3));
  EXPECT_EQ(a_->CheckConsistency(), "");
  Refused(WholeGpus(8));
  const int four = Alloc(WholeGpus(4, Level::kSocket));
  EXPECT_EQ(Sockets(R(four)), std::set<int>{1});
  Refused(WholeGpus(4, Level::kSocket));
  Release(four);
  for (int i = 0; i < 7; ++i) {
    const int id = Alloc(WholeGpus(1));
    EXPECT_NE(R(id).gpus[0], 3);
  }
  Refused(WholeGpus(1));
  Refused(Share(10));
  a_->SetGpuBad(0, 3, false);
  EXPECT_TRUE(a_->gpu_free(0, 3));
  const int healed = Alloc(WholeGpus(1));
  EXPECT_EQ(R(healed).gpus[0], 3);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, AGpuThatGoesBadWhileUsedIsHeldBack) {
  UseExample("dgx-a100.yaml");
  const int all = Alloc(WholeGpus(8));
  a_->SetGpuBad(0, 5, true);
  EXPECT_EQ(a_->CheckConsistency(), "");
  EXPECT_FALSE(a_->gpu_usable(0, 5));
  Release(all);
  EXPECT_FALSE(a_->gpu_free(0, 5));
  EXPECT_TRUE(a_->gpu_free(0, 4));
  Refused(WholeGpus(8));
  // The socket without GPU 5 is whole.
  const int socket = Alloc(WholeGpus(4, Level::kSocket));
  EXPECT_EQ(Sockets(R(socket)), std::set<int>{0});
  Refused(WholeGpus(4, Level::kSocket));
  Release(socket);
  a_->SetGpuBad(0, 5, false);
  EXPECT_TRUE(a_->gpu_free(0, 5));
  EXPECT_EQ(a_->CheckConsistency(), "");
  ExpectInitial();
}

TEST_F(AllocatorTest, ASharedGpuThatGoesBadIsHeldBack) {
  UseExample("dgx-a100.yaml");
  const int a = Alloc(Share(300));
  const int gpu = R(a).gpus[0];
  a_->SetGpuBad(0, gpu, true);
  const int b = Alloc(Share(300));
  EXPECT_NE(R(b).gpus[0], gpu);
  Release(a);
  EXPECT_FALSE(a_->gpu_free(0, gpu));
  Release(b);
  a_->SetGpuBad(0, gpu, false);
  EXPECT_EQ(a_->CheckConsistency(), "");
  ExpectInitial();
}

TEST_F(AllocatorTest, CordonedNodesGetNothing) {
  Use(SyntheticDgxCluster(2, 2, 0));
  a_->SetNodeCordoned(0, true);
  EXPECT_FALSE(a_->gpu_usable(0, 0));
  EXPECT_EQ(a_->CheckConsistency(), "");
  const int eight = Alloc(WholeGpus(8));
  EXPECT_EQ(R(eight).node, 1);
  Refused(WholeGpus(1));
  Refused(OnNode(CpuOnly(1000, 0), 0));
  const int cpu = Alloc(CpuOnly(1000, 0));
  EXPECT_EQ(R(cpu).node, 1);
  // Cordoning a node in use: its GPUs stay out when the job ends.
  a_->SetNodeCordoned(1, true);
  Release(eight);
  Release(cpu);
  EXPECT_FALSE(a_->gpu_free(1, 0));
  Refused(WholeGpus(1));
  a_->SetNodeCordoned(0, false);
  EXPECT_EQ(R(Alloc(WholeGpus(8))).node, 0);
  a_->SetNodeCordoned(1, false);
  EXPECT_EQ(R(Alloc(WholeGpus(8))).node, 1);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, BadMigGpuIsHeldBack) {
  Use(ParseClusterYaml(kDynamicMigYaml, "mig.yaml"));
  const int a = Alloc(Mig("3g.40gb"));
  a_->SetGpuBad(R(a).node, R(a).gpus[0], true);
  const int b = Alloc(Mig("3g.40gb"));
  EXPECT_NE(Where(b), Where(a));
  const int node = R(a).node, gpu = R(a).gpus[0];
  Release(a);
  EXPECT_FALSE(a_->gpu_free(node, gpu));
  Release(b);
  a_->SetGpuBad(node, gpu, false);
  ExpectInitial();
}

// ---------------------------------------------------------------------------------------------
// Virtual clusters

TEST_F(AllocatorTest, GuaranteedAllocationsStayInsideBoundCells) {
  UseExample("multi-rack.yaml", ExampleVcs());
  const int research = VcIndex(*a_, "research");
  const VirtualCluster& vc = a_->vcs()[research];
  const int node_type = a_->tree().FindType("dgx-a100/node");
  const int eight = Alloc(ForVc(WholeGpus(8), research));
  ASSERT_EQ(vc.bound_cells.size(), 1u);
  EXPECT_EQ(a_->tree().type_of(vc.bound_cells[0]).name, "dgx-a100/node");
  EXPECT_EQ(vc.bound_counts, std::vector<int>{1});
  EXPECT_EQ(a_->tree().node_cell(R(eight).node), vc.bound_cells[0]);
  EXPECT_EQ(PoolOf(R(eight)), research + 1);
  const int one = Alloc(ForVc(WholeGpus(1), research));
  ASSERT_EQ(vc.bound_cells.size(), 2u);
  EXPECT_EQ(a_->tree().node_cell(R(one).node), vc.bound_cells[1]);
  EXPECT_EQ(PoolOf(R(one)), research + 1);
  // Both guaranteed nodes are bound: no more whole nodes for research, though the cluster has.
  Refused(ForVc(WholeGpus(8), research));
  const int seven = Alloc(ForVc(WholeGpus(7), research));
  EXPECT_EQ(R(seven).node, R(one).node);
  // Shares and gangs of the VC stay inside as well.
  Release(one);
  EXPECT_EQ(vc.bound_cells.size(), 2u);
  const int share = Alloc(ForVc(Share(250), research));
  EXPECT_EQ(R(share).node, R(seven).node);
  EXPECT_EQ(PoolOf(R(share)), research + 1);
  Refused(ForVc(WholeGpus(1), research));
  EXPECT_TRUE(a_->buddy().free_list(research + 1, node_type).empty());
  // A bound cell goes back when empty.
  Release(eight);
  EXPECT_EQ(vc.bound_cells.size(), 1u);
  EXPECT_EQ(vc.bound_counts, std::vector<int>{1});
  Release(seven);
  Release(share);
  EXPECT_TRUE(vc.bound_cells.empty());
  EXPECT_EQ(vc.bound_counts, std::vector<int>{0});
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  ExpectInitial();
}

// A bound cell whose GPUs are all idle, some of them out of use (a cordoned node, a bad GPU),
// goes back: the VC binds a usable cell for its guarantee rather than keep one it cannot use.
TEST_F(AllocatorTest, AnIdleBoundCellOutOfUseGoesBackAndTheGuaranteeBindsElsewhere) {
  UseExample("multi-rack.yaml", ExampleVcs());
  const int research = VcIndex(*a_, "research");  // guaranteed two DGX nodes
  const VirtualCluster& vc = a_->vcs()[research];
  const int first = Alloc(ForVc(WholeGpus(8), research));
  const int second = Alloc(ForVc(WholeGpus(8), research));
  const int cordoned = R(first).node, broken = R(second).node;
  a_->SetNodeCordoned(cordoned, true);
  EXPECT_EQ(vc.bound_cells.size(), 2u);  // its job still runs there
  Release(first);
  EXPECT_EQ(vc.bound_cells.size(), 1u);
  const int again = Alloc(ForVc(WholeGpus(8), research));
  EXPECT_NE(R(again).node, cordoned);
  EXPECT_EQ(a_->CheckConsistency(), "");
  a_->SetGpuBad(broken, 3, true);
  Release(second);
  EXPECT_EQ(vc.bound_cells.size(), 1u);
  const int third = Alloc(ForVc(WholeGpus(8), research));
  EXPECT_NE(R(third).node, broken);
  EXPECT_NE(R(third).node, cordoned);
  EXPECT_EQ(a_->CheckConsistency(), "");
  // Part of a bound node idle and out of use, the rest held: bound until its job ends.
  Release(third);
  const int half = Alloc(ForVc(WholeGpus(4), research));
  const int node = R(half).node;
  a_->SetNodeCordoned(node, true);
  EXPECT_EQ(vc.bound_cells.size(), 2u);
  Release(half);
  EXPECT_EQ(vc.bound_cells.size(), 1u);
  Release(again);
  EXPECT_TRUE(vc.bound_cells.empty());
  EXPECT_EQ(vc.bound_counts, std::vector<int>{0});
  for (int n : {cordoned, node}) a_->SetNodeCordoned(n, false);
  a_->SetGpuBad(broken, 3, false);
  EXPECT_EQ(a_->CheckConsistency(), "");
  ExpectInitial();
}

TEST_F(AllocatorTest, GuaranteesOfSmallCells) {
  UseExample("multi-rack.yaml", ExampleVcs());
  const int inference = VcIndex(*a_, "inference");
  const VirtualCluster& vc = a_->vcs()[inference];
  AllocationRequest l40s = ForVc(WholeGpus(1), inference);
  // The smallest guarantee type that holds the replica is bound first: single L40S GPUs.
  std::vector<int> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Alloc(l40s));
  EXPECT_EQ(vc.bound_cells.size(), 4u);
  for (int id : ids) EXPECT_EQ(cluster_.nodes[R(id).node].gpus[0].model, "L40S");
  // Then the socket; after that nothing.
  const int four = Alloc(ForVc(WholeGpus(4), inference));
  EXPECT_EQ(Sockets(R(four)).size(), 1u);
  EXPECT_EQ(vc.bound_cells.size(), 5u);
  Refused(ForVc(WholeGpus(1), inference));
  Refused(ForVc(WholeGpus(1), VcIndex(*a_, "dev")));  // no guarantee: only opportunistic
  ReleaseAll();
  EXPECT_TRUE(vc.bound_cells.empty());
  ExpectInitial();
}

// Crash recovery re-creates a guaranteed replica exactly and binds the guarantee cell holding
// its GPU. A GPU inside a cell a borrower holds whole reads as free in its own count (counts
// below a cell taken whole are not kept): the bind must see that it is taken and refuse.
TEST_F(AllocatorTest, AnExactBindRefusesAGpuInsideACellTakenWhole) {
  UseExample("multi-rack.yaml", ExampleVcs());
  int pcie = -1;
  for (size_t n = 0; n < cluster_.nodes.size() && pcie < 0; ++n)
    if (cluster_.nodes[n].gpus.size() == 8 && cluster_.nodes[n].gpus[0].model == "L40S")
      pcie = static_cast<int>(n);
  ASSERT_GE(pcie, 0);
  AllocationRequest borrower = ForVc(WholeGpus(8), VcIndex(*a_, "dev"), true);
  borrower.only_node = pcie;
  Alloc(borrower);
  std::vector<ReplicaPlacement> exact(1);
  exact[0].node = pcie;
  exact[0].gpus = {0};
  AllocationRequest adopted = ForVc(WholeGpus(1), VcIndex(*a_, "inference"));
  adopted.exact = &exact;
  Refused(adopted);
  EXPECT_TRUE(a_->vcs()[VcIndex(*a_, "inference")].bound_cells.empty());
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, OpportunisticAllocationsArePreemptibleAndBorrowAnything) {
  UseExample("multi-rack.yaml", ExampleVcs());
  const int dev = VcIndex(*a_, "dev");
  for (int i = 0; i < 16; ++i) {
    const int id = Alloc(ForVc(WholeGpus(8), dev, true));
    EXPECT_TRUE(a_->Find(id)->preemptible);
    EXPECT_EQ(a_->Find(id)->vc, dev);
    EXPECT_EQ(PoolOf(R(id)), 0);
    EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  }
  Refused(ForVc(WholeGpus(1), dev, true));
  // Every guarantee is still whole: preempting the borrowers would restore it.
  for (size_t v = 0; v < a_->vcs().size(); ++v)
    for (const Allocator::GuaranteeStatus& s : a_->VcStatus(static_cast<int>(v)))
      EXPECT_EQ(s.healthy, s.guaranteed) << a_->vcs()[v].name;
  // Guaranteed work waits for preemption, which is not the allocator's job.
  Refused(ForVc(WholeGpus(8), VcIndex(*a_, "research")));
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, BorrowersTakeAnotherVcsIdleBoundGpusOnlyWhenNoFreeCellHolds) {
  // Two DGX nodes; A is guaranteed one. A's single small job binds a whole node.
  Use(SyntheticDgxCluster(2, 2, 0), {{"A", {{"dgx-a100/node", 1}}}, {"B", {}}});
  const int a = Alloc(ForVc(WholeGpus(1), 0));
  const int bound = R(a).node;
  const int filler = Alloc(ForVc(WholeGpus(8), 1, true));
  EXPECT_NE(R(filler).node, bound) << "the physical pool goes first";
  EXPECT_EQ(PoolOf(R(filler)), 0);
  // No free cell is left. A plan that waits, and A's own borrowing, never take A's idle GPUs.
  AllocationRequest waits = ForVc(WholeGpus(4), 1, true);
  waits.lent = false;
  Refused(waits);
  Refused(ForVc(WholeGpus(1), 0, true));
  EXPECT_EQ(a_->FreeGpusOn(bound, -1), 7);
  const int lent = Alloc(ForVc(WholeGpus(4), 1, true));
  EXPECT_EQ(R(lent).node, bound);
  EXPECT_EQ(PoolOf(R(lent)), 1) << "inside A's bound cell";
  EXPECT_TRUE(a_->Find(lent)->preemptible);
  EXPECT_EQ(a_->FreeGpusOn(bound, -1), 3);
  EXPECT_EQ(a_->FreeGpusOn(bound, 0), 3);
  EXPECT_EQ(a_->FreeGpusOn(bound, 0, true), 7) << "reclaiming the borrower gives A its GPUs";
  EXPECT_EQ(a_->BoundVcOfGpu(bound, R(lent).gpus[0]), 0);
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  // A's own work still fits beside the borrower.
  const int a2 = Alloc(ForVc(WholeGpus(2), 0));
  EXPECT_EQ(R(a2).node, bound);
  // A's jobs end: the cell goes back to the physical pool at once, the borrower with it (A
  // would bind a free cell rather than reclaim it).
  Release(a);
  EXPECT_EQ(a_->vcs()[0].bound_cells.size(), 1u);
  Release(a2);
  EXPECT_TRUE(a_->vcs()[0].bound_cells.empty());
  EXPECT_EQ(PoolOf(R(lent)), 0);
  EXPECT_EQ(a_->FreeGpusOn(bound, -1), 4);
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  Release(lent);
  Release(filler);
  ExpectInitial();

  // With a lending limit A lends none of its bound cells' idle GPUs, not even the part that it
  // may lend while unbound.
  VcGuarantee limited{"dgx-a100/node", 2};
  limited.lending_limit = 1;
  Use(SyntheticDgxCluster(2, 2, 0), {{"A", {limited}}, {"B", {}}});
  const int small = Alloc(ForVc(WholeGpus(1), 0));  // binds the node A keeps unlent
  const int other = Alloc(ForVc(WholeGpus(8), 1, true));
  EXPECT_NE(R(other).node, R(small).node);
  Refused(ForVc(WholeGpus(1), 1, true));
  EXPECT_EQ(a_->FreeGpusOn(R(small).node, -1), 0);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, WorkOutsideVcsCannotTakeGuaranteedCells) {
  UseExample("multi-rack.yaml", ExampleVcs());
  AllocationRequest dgx = WholeGpus(8);
  dgx.demand.models = {"A100-80GB"};
  // 10 DGX nodes, 6 guaranteed to research and training.
  for (int i = 0; i < 4; ++i) Alloc(dgx);
  Refused(dgx, "guarantee");
  AllocationRequest one = WholeGpus(1);
  one.demand.models = {"A100-80GB"};
  Refused(one, "guarantee");
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  // Opportunistic work may use them.
  const int borrowed = Alloc(ForVc(dgx, -1, true));
  EXPECT_TRUE(a_->Find(borrowed)->preemptible);
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  // The guaranteed VCs still get their nodes, around the borrower.
  const int research = Alloc(ForVc(Gang(2, 8, std::nullopt), VcIndex(*a_, "research")));
  EXPECT_NE(R(research, 0).node, R(borrowed).node);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, BindsThatWouldBreakAnotherGuaranteeAreRefused) {
  // Two DGX nodes; A is guaranteed 4 single GPUs, B one whole node. With node 0 cordoned, every
  // GPU A could bind would break B's node.
  Use(SyntheticDgxCluster(2, 2, 0), {{"A", {{"A100-80GB", 4}}}, {"B", {{"dgx-a100/node", 1}}}});
  a_->SetNodeCordoned(0, true);
  EXPECT_EQ(a_->CheckConsistency(), "");
  const std::vector<Allocator::GuaranteeStatus> a_status = a_->VcStatus(0);
  ASSERT_EQ(a_status.size(), 1u);
  EXPECT_EQ(a_status[0].guaranteed, 4);
  EXPECT_EQ(a_status[0].healthy, 0);
  EXPECT_EQ(a_->VcStatus(1)[0].healthy, 1);
  Refused(ForVc(WholeGpus(1), 0));
  EXPECT_TRUE(a_->vcs()[0].bound_cells.empty());
  const int b = Alloc(ForVc(WholeGpus(8), 1));
  EXPECT_EQ(R(b).node, 1);
  Release(b);
  // Healthy again: A binds its GPUs, B still has a node to back it.
  a_->SetNodeCordoned(0, false);
  EXPECT_EQ(a_->VcStatus(0)[0].healthy, 4);
  // Single-GPU cells hold single-GPU replicas only (as in HiveD).
  Refused(ForVc(WholeGpus(2), 0));
  std::set<int> a_nodes;
  for (int i = 0; i < 4; ++i) a_nodes.insert(R(Alloc(ForVc(WholeGpus(1), 0))).node);
  EXPECT_EQ(a_->vcs()[0].bound_cells.size(), 4u);
  EXPECT_EQ(a_nodes.size(), 1u) << "A's GPUs are bound next to each other";
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  Refused(ForVc(WholeGpus(1), 0));
  const int b2 = Alloc(ForVc(WholeGpus(8), 1));
  EXPECT_EQ(a_nodes.count(R(b2).node), 0u);
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, VcStatusShowsOnlyInevitableLosses) {
  UseExample("multi-rack.yaml", ExampleVcs());
  const int research = VcIndex(*a_, "research");
  const int training = VcIndex(*a_, "training");
  const int inference = VcIndex(*a_, "inference");
  auto healthy = [&](int vc) {
    std::vector<int> out;
    for (const Allocator::GuaranteeStatus& s : a_->VcStatus(vc)) out.push_back(s.healthy);
    return out;
  };
  std::vector<int> dgx_nodes, pcie_nodes;
  for (size_t n = 0; n < cluster_.nodes.size(); ++n)
    (cluster_.nodes[n].shape == "dgx-a100" ? dgx_nodes : pcie_nodes).push_back(static_cast<int>(n));
  ASSERT_EQ(dgx_nodes.size(), 10u);
  // Bad GPUs on 4 DGX nodes: 6 whole ones remain for 6 guaranteed, nobody loses anything.
  for (int i = 0; i < 4; ++i) a_->SetGpuBad(dgx_nodes[i], 0, true);
  EXPECT_EQ(healthy(research), std::vector<int>{2});
  EXPECT_EQ(healthy(training), std::vector<int>{4});
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  // A fifth: one guaranteed node can no longer be backed; it falls on the first VC declared.
  a_->SetGpuBad(dgx_nodes[4], 7, true);
  EXPECT_EQ(healthy(research), std::vector<int>{1});
  EXPECT_EQ(healthy(training), std::vector<int>{4});
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 8);
  // A guaranteed job binding a healthy node does not change the picture.
  const int job = Alloc(ForVc(WholeGpus(8), training));
  EXPECT_EQ(healthy(training), std::vector<int>{4});
  EXPECT_EQ(a_->VcStatus(training)[0].bound, 1);
  EXPECT_EQ(healthy(research), std::vector<int>{1});
  Release(job);
  // Healing one restores everything.
  a_->SetGpuBad(dgx_nodes[2], 0, false);
  EXPECT_EQ(healthy(research), std::vector<int>{2});
  EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  // Inference: one bad GPU per PCIe socket leaves no whole socket, but plenty of single GPUs.
  EXPECT_EQ(healthy(inference), (std::vector<int>{4, 1}));
  for (int n : pcie_nodes)
    for (int g : {0, 4}) a_->SetGpuBad(n, g, true);
  EXPECT_EQ(healthy(inference), (std::vector<int>{4, 0}));
  for (int n : pcie_nodes)
    for (int g : {0, 4}) a_->SetGpuBad(n, g, false);
  EXPECT_EQ(healthy(inference), (std::vector<int>{4, 1}));
  for (int i : {0, 1, 3}) a_->SetGpuBad(dgx_nodes[i], 0, false);
  a_->SetGpuBad(dgx_nodes[4], 7, false);
  EXPECT_EQ(a_->CheckConsistency(), "");
  ExpectInitial();
}

TEST_F(AllocatorTest, BusyButHealthyHardwareIsNoLoss) {
  UseExample("multi-rack.yaml", ExampleVcs());
  // Every VC uses its whole guarantee; nothing is lost.
  Alloc(ForVc(Gang(2, 8, std::nullopt), VcIndex(*a_, "research")));
  Alloc(ForVc(Gang(4, 8, std::nullopt), VcIndex(*a_, "training")));
  const int inference = VcIndex(*a_, "inference");
  Alloc(ForVc(WholeGpus(4, Level::kSocket), inference));
  for (int i = 0; i < 4; ++i) Alloc(ForVc(WholeGpus(1), inference));
  for (size_t v = 0; v < a_->vcs().size(); ++v)
    for (const Allocator::GuaranteeStatus& s : a_->VcStatus(static_cast<int>(v))) {
      EXPECT_EQ(s.bound, s.guaranteed);
      EXPECT_EQ(s.healthy, s.guaranteed);
    }
  ReleaseAll();
  ExpectInitial();
}

TEST_F(AllocatorTest, SharingAnomalyCannotStarveAnotherVc) {
  // HiveD's sharing anomaly: A's 1-GPU jobs come and go and fragment its cells; B must still get
  // a whole node every time, and work outside VCs must never take the node B is owed.
  Use(SyntheticDgxCluster(4, 4, 0), {{"A", {{"dgx-a100/node", 2}}}, {"B", {{"dgx-a100/node", 1}}}});
  std::vector<int> a_jobs;
  for (int round = 0; round < 6; ++round) {
    while (true) {
      const std::optional<int> id = a_->Allocate(ForVc(WholeGpus(1), 0));
      if (!id) break;
      a_jobs.push_back(*id);
      ASSERT_EQ(a_->GuaranteeShortfallGpus(), 0);
      ASSERT_LE(a_jobs.size(), 16u);
    }
    EXPECT_EQ(a_jobs.size(), 16u);
    // Release every other job (a different half each round).
    std::vector<int> kept;
    for (size_t i = 0; i < a_jobs.size(); ++i) {
      if (static_cast<int>(i % 2) == round % 2)
        Release(a_jobs[i]);
      else
        kept.push_back(a_jobs[i]);
    }
    a_jobs = kept;
    for (int id : a_jobs) EXPECT_EQ(PoolOf(R(id)), 1);
    // Work outside the VCs fills what is left, but only one node's worth.
    std::vector<int> others;
    while (true) {
      const std::optional<int> id = a_->Allocate(WholeGpus(1));
      if (!id) break;
      others.push_back(*id);
      ASSERT_LE(others.size(), 8u);
    }
    EXPECT_EQ(others.size(), 8u);
    EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
    const int b = Alloc(ForVc(WholeGpus(8), 1));
    EXPECT_EQ(PoolOf(R(b)), 2);
    Release(b);
    for (int id : others) Release(id);
  }
  ReleaseAll();
  ExpectInitial();
}

// Takes the first candidate offered and records how many there were.
class FirstChooser : public PlacementChooser {
 public:
  int Choose(const AllocationRequest&, const CandidateList& candidates,
             const std::vector<ReplicaPlacement>&, size_t) override {
    offered.push_back(static_cast<int>(candidates.size()));
    return candidates.empty() ? -1 : 0;
  }
  std::vector<int> offered;
};

TEST_F(AllocatorTest, AGangsLaterReplicasScanOnPastTheNodesItFilled) {
  // Whole-node replicas with room for two nodes' candidates at a time: each replica fills the
  // node it takes, and the next must still see two nodes, found further along the scan.
  Use(SyntheticDgxCluster(6, 6, 0));
  FirstChooser chooser;
  std::string why;
  const std::optional<int> id = a_->Allocate(Gang(6, 8, std::nullopt), &why, &chooser, 2);
  ASSERT_TRUE(id.has_value()) << why;
  EXPECT_EQ(chooser.offered, (std::vector<int>{2, 2, 2, 2, 2, 1}));
  std::vector<int> nodes;
  for (const ReplicaPlacement& r : a_->Find(*id)->replicas) nodes.push_back(r.node);
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(std::unique(nodes.begin(), nodes.end()), nodes.end()) << "a node taken twice";
  EXPECT_EQ(a_->CheckConsistency(), "");
  // A replica that changes a node only partly sees that node again, with what is left on it.
  Release(*id);
  chooser.offered.clear();
  const std::optional<int> halves = a_->Allocate(Gang(4, 4, std::nullopt), &why, &chooser, 1);
  ASSERT_TRUE(halves.has_value()) << why;
  const auto& replicas = a_->Find(*halves)->replicas;
  EXPECT_EQ(replicas[0].node, replicas[1].node);
  EXPECT_EQ(replicas[2].node, replicas[3].node);
  EXPECT_NE(replicas[0].node, replicas[2].node);
  EXPECT_EQ(a_->CheckConsistency(), "");
}

TEST_F(AllocatorTest, ReplicaSlotsCountsWholeReplicasNodeByNode) {
  Use(SyntheticDgxCluster(4, 4, 0), {{"A", {{"dgx-a100/node", 1}}}});
  // A binds its node only when it places work: the physical pool has all four nodes, and one
  // of them keeps 3 free GPUs.
  Alloc(WholeGpus(5));
  EXPECT_EQ(a_->ReplicaSlots(-1, 8, 100), 3);
  EXPECT_EQ(a_->ReplicaSlots(-1, 4, 100), 6);
  EXPECT_EQ(a_->ReplicaSlots(-1, 3, 100), 7);
  EXPECT_EQ(a_->ReplicaSlots(-1, 4, 1), 2) << "counting stops at the node that reaches enough";
  // A VC's own slots lie on its bound cells only.
  EXPECT_EQ(a_->ReplicaSlots(0, 1, 100), 0);
  Alloc(ForVc(WholeGpus(2), 0));
  EXPECT_EQ(a_->ReplicaSlots(0, 2, 100), 3);
  EXPECT_EQ(a_->ReplicaSlots(-1, 8, 100), 2);
  EXPECT_EQ(a_->CheckConsistency(), "");
}

}  // namespace
}  // namespace berth
