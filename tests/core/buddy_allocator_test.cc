#include "core/buddy_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

// Free lists of one pool by type name, each sorted.
std::map<std::string, std::vector<int>> Lists(const CellTree& tree, const BuddyAllocator& buddy,
                                              int pool) {
  std::map<std::string, std::vector<int>> out;
  for (size_t t = 0; t < tree.types().size(); ++t) {
    std::vector<int> cells = buddy.free_list(pool, static_cast<int>(t));
    if (cells.empty()) continue;
    std::sort(cells.begin(), cells.end());
    out[tree.types()[t].name] = cells;
  }
  return out;
}

class BuddyAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/dgx-a100.yaml");
    ASSERT_EQ(CellTree::Build(cluster_, &tree_), "");
    gpu_ = tree_.FindType("A100-80GB");
    switch_ = tree_.FindType("dgx-a100/switch");
    socket_ = tree_.FindType("dgx-a100/socket");
    node_ = tree_.FindType("dgx-a100/node");
    root_ = tree_.root();
  }
  int Gpu(int g) const { return tree_.gpu_cell(0, g); }
  int Parent(int c) const { return tree_.cells()[c].parent; }
  int Switch(int s) const { return Parent(Gpu(2 * s)); }
  int Socket(int s) const { return Parent(Switch(2 * s)); }
  int Node() const { return tree_.node_cell(0); }
  std::map<std::string, std::vector<int>> Lists(const BuddyAllocator& b, int pool = 0) const {
    return berth::Lists(tree_, b, pool);
  }

  Cluster cluster_;
  CellTree tree_;
  int gpu_ = -1, switch_ = -1, socket_ = -1, node_ = -1, root_ = -1;
};

using ListMap = std::map<std::string, std::vector<int>>;

TEST_F(BuddyAllocatorTest, StartsWithTheRootListed) {
  BuddyAllocator b(&tree_, 1);
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
  EXPECT_EQ(b.free_leaves(root_), 8);
  EXPECT_EQ(b.free_leaves(Gpu(3)), 1);
  EXPECT_TRUE(b.listed(root_));
  EXPECT_FALSE(b.listed(Node()));
  EXPECT_FALSE(b.taken(Gpu(0)));
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, TakeTypeSplitsTheSmallestFreeCellAbove) {
  BuddyAllocator b(&tree_, 1);
  const int g = b.TakeType(0, gpu_);
  ASSERT_GE(g, 0);
  EXPECT_EQ(tree_.cells()[g].type, gpu_);
  EXPECT_TRUE(b.taken(g));
  EXPECT_EQ(b.CheckConsistency(), "");
  // One free GPU (g's buddy), one switch (its switch's buddy), one socket (the other one).
  const ListMap lists = Lists(b);
  ASSERT_EQ(lists.size(), 3u);
  ASSERT_EQ(lists.at("A100-80GB").size(), 1u);
  ASSERT_EQ(lists.at("dgx-a100/switch").size(), 1u);
  ASSERT_EQ(lists.at("dgx-a100/socket").size(), 1u);
  const int buddy_gpu = lists.at("A100-80GB")[0];
  const int buddy_switch = lists.at("dgx-a100/switch")[0];
  const int other_socket = lists.at("dgx-a100/socket")[0];
  EXPECT_NE(buddy_gpu, g);
  EXPECT_EQ(Parent(buddy_gpu), Parent(g));
  EXPECT_EQ(Parent(buddy_switch), Parent(Parent(g)));
  EXPECT_NE(buddy_switch, Parent(g));
  EXPECT_EQ(Parent(other_socket), Node());
  EXPECT_FALSE(tree_.IsWithin(g, other_socket));
  EXPECT_EQ(b.free_leaves(root_), 7);
  EXPECT_EQ(b.free_leaves(Node()), 7);
  EXPECT_EQ(b.free_leaves(Parent(Parent(g))), 3);
  EXPECT_EQ(b.free_leaves(Parent(g)), 1);
  EXPECT_EQ(b.free_leaves(g), 0);

  b.Give(g);
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
  EXPECT_EQ(b.free_leaves(root_), 8);
  EXPECT_FALSE(b.taken(g));
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, TakeTypeUsesListedCellsBeforeSplitting) {
  BuddyAllocator b(&tree_, 1);
  const int g = b.TakeType(0, gpu_);
  const int sw = b.TakeType(0, switch_);
  // The switch comes from g's socket, which is already split; the other socket stays whole.
  EXPECT_EQ(Parent(sw), Parent(Parent(g)));
  const int g2 = b.TakeType(0, gpu_);
  EXPECT_EQ(Parent(g2), Parent(g));  // g's buddy, not a GPU of the whole socket
  EXPECT_EQ(Lists(b), (ListMap{{"dgx-a100/socket", {Socket(1)}}}));
  EXPECT_EQ(b.TakeType(0, node_), -1);
  EXPECT_EQ(b.TakeType(0, socket_), Socket(1));
  EXPECT_EQ(b.TakeType(0, gpu_), -1);
  EXPECT_EQ(b.TakeType(0, switch_), -1);
  EXPECT_TRUE(Lists(b).empty());
  EXPECT_EQ(b.free_leaves(root_), 0);
  EXPECT_EQ(b.CheckConsistency(), "");
  for (int c : {g2, sw, Socket(1), g}) {
    b.Give(c);
    EXPECT_EQ(b.CheckConsistency(), "");
  }
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
}

TEST_F(BuddyAllocatorTest, BuddiesMergeRecursively) {
  BuddyAllocator b(&tree_, 1);
  std::vector<int> taken;
  for (int i = 0; i < 8; ++i) {
    taken.push_back(b.TakeType(0, gpu_));
    ASSERT_GE(taken.back(), 0);
    ASSERT_EQ(b.CheckConsistency(), "");
  }
  EXPECT_EQ(b.TakeType(0, gpu_), -1);
  std::sort(taken.begin(), taken.end());
  for (int g = 0; g < 8; ++g) EXPECT_EQ(taken[g], Gpu(g));
  EXPECT_TRUE(Lists(b).empty());

  b.Give(Gpu(0));
  EXPECT_EQ(Lists(b), (ListMap{{"A100-80GB", {Gpu(0)}}}));
  b.Give(Gpu(1));
  EXPECT_EQ(Lists(b), (ListMap{{"dgx-a100/switch", {Switch(0)}}}));
  b.Give(Gpu(3));
  EXPECT_EQ(Lists(b), (ListMap{{"A100-80GB", {Gpu(3)}}, {"dgx-a100/switch", {Switch(0)}}}));
  b.Give(Gpu(2));
  EXPECT_EQ(Lists(b), (ListMap{{"dgx-a100/socket", {Socket(0)}}}));
  b.Give(Gpu(7));
  b.Give(Gpu(4));
  b.Give(Gpu(6));
  EXPECT_EQ(Lists(b), (ListMap{{"A100-80GB", {Gpu(4)}},
                               {"dgx-a100/socket", {Socket(0)}},
                               {"dgx-a100/switch", {Switch(3)}}}));
  EXPECT_EQ(b.free_leaves(Socket(1)), 3);
  b.Give(Gpu(5));
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, RandomOrderAlwaysMergesBack) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    BuddyAllocator b(&tree_, 1);
    std::vector<int> taken;
    // Mixed sizes: a socket, a switch and two GPUs fill the node.
    for (int type : {socket_, switch_, gpu_, gpu_}) taken.push_back(b.TakeType(0, type));
    for (int c : taken) ASSERT_GE(c, 0);
    EXPECT_EQ(b.free_leaves(root_), 0);
    std::shuffle(taken.begin(), taken.end(), rng);
    for (int c : taken) {
      b.Give(c);
      ASSERT_EQ(b.CheckConsistency(), "");
    }
    EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
  }
}

TEST_F(BuddyAllocatorTest, TakeCellExposesItsBuddies) {
  BuddyAllocator b(&tree_, 1);
  b.TakeCell(Gpu(5));
  EXPECT_EQ(Lists(b), (ListMap{{"A100-80GB", {Gpu(4)}},
                               {"dgx-a100/socket", {Socket(0)}},
                               {"dgx-a100/switch", {Switch(3)}}}));
  EXPECT_EQ(b.CheckConsistency(), "");
  b.TakeCell(Switch(0));
  EXPECT_EQ(b.free_leaves(Socket(0)), 2);
  EXPECT_EQ(b.free_leaves(root_), 5);
  EXPECT_EQ(b.CheckConsistency(), "");
  b.Give(Gpu(5));
  b.Give(Switch(0));
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
}

TEST_F(BuddyAllocatorTest, WholeFreeSeesACellTakenAbove) {
  BuddyAllocator b(&tree_, 1);
  EXPECT_TRUE(b.WholeFree(Gpu(3)));  // inside the listed root
  b.TakeCell(Switch(1));
  EXPECT_FALSE(b.WholeFree(Switch(1)));
  // Counts below a cell taken whole are not kept: the GPU's own count still reads full.
  EXPECT_EQ(b.free_leaves(Gpu(3)), 1);
  EXPECT_FALSE(b.WholeFree(Gpu(3)));
  EXPECT_FALSE(b.WholeFree(Socket(0)));  // partly taken
  EXPECT_TRUE(b.WholeFree(Switch(0)));
  EXPECT_TRUE(b.WholeFree(Gpu(5)));
}

TEST_F(BuddyAllocatorTest, FindPartialIsBestFit) {
  BuddyAllocator b(&tree_, 1);
  b.TakeCell(Gpu(0));     // socket 0: 3 free, switch 0: 1 free
  b.TakeCell(Switch(2));  // socket 1: 2 free
  ASSERT_EQ(b.CheckConsistency(), "");
  EXPECT_EQ(b.FindPartial(0, socket_, 1), Socket(1));
  EXPECT_EQ(b.FindPartial(0, socket_, 2), Socket(1));
  EXPECT_EQ(b.FindPartial(0, socket_, 3), Socket(0));
  EXPECT_EQ(b.FindPartial(0, socket_, 4), -1);
  EXPECT_EQ(b.FindPartial(0, switch_, 1), Switch(0));
  EXPECT_EQ(b.FindPartial(0, switch_, 2), -1);  // whole free switches are not partial
  EXPECT_EQ(b.FindPartial(0, node_, 5), Node());
  EXPECT_EQ(b.FindPartial(0, node_, 6), -1);
  EXPECT_EQ(b.FindPartial(0, gpu_, 1), -1);
  // FindFast: the partial fit first, then a listed whole cell, then one inside a larger cell.
  EXPECT_EQ(b.FindFast(0, socket_, 3), Socket(0));
  EXPECT_EQ(b.FindFast(0, socket_, 4), -1);
  EXPECT_EQ(b.FindFast(0, switch_, 1), Switch(0));
  const int sw = b.FindFast(0, switch_, 2);
  EXPECT_TRUE(sw == Switch(1) || sw == Switch(3)) << sw;
  EXPECT_EQ(b.FindFast(0, gpu_, 1), Gpu(1));
}

TEST_F(BuddyAllocatorTest, TakeLeavesInsideASocket) {
  BuddyAllocator b(&tree_, 1);
  std::vector<int> taken;
  b.TakeLeaves(Socket(0), 3, &taken);
  ASSERT_EQ(b.CheckConsistency(), "");
  ASSERT_EQ(taken.size(), 2u);  // a whole switch and one GPU of the other
  std::vector<int> types = {tree_.cells()[taken[0]].type, tree_.cells()[taken[1]].type};
  std::sort(types.begin(), types.end());
  EXPECT_EQ(types, (std::vector<int>{gpu_, switch_}));
  for (int c : taken) EXPECT_TRUE(tree_.IsWithin(c, Socket(0)));
  EXPECT_EQ(b.free_leaves(Socket(0)), 1);
  EXPECT_EQ(b.free_leaves(Socket(1)), 4);
  const ListMap lists = Lists(b);
  EXPECT_EQ(lists.at("dgx-a100/socket"), (std::vector<int>{Socket(1)}));
  ASSERT_EQ(lists.at("A100-80GB").size(), 1u);
  const int last = lists.at("A100-80GB")[0];
  EXPECT_TRUE(tree_.IsWithin(last, Socket(0)));

  // One more GPU from the node: the tightest fit is the last GPU of socket 0.
  std::vector<int> more;
  b.TakeLeaves(Node(), 1, &more);
  EXPECT_EQ(more, (std::vector<int>{last}));
  // Three more: socket 1 is the only child that fits; a switch and a GPU of it.
  more.clear();
  b.TakeLeaves(Node(), 3, &more);
  ASSERT_EQ(more.size(), 2u);
  for (int c : more) EXPECT_TRUE(tree_.IsWithin(c, Socket(1)));
  EXPECT_EQ(b.free_leaves(root_), 1);
  ASSERT_EQ(b.CheckConsistency(), "");
  for (int c : taken) b.Give(c);
  b.Give(last);
  for (int c : more) b.Give(c);
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, TakeLeavesPrefersTheFullerChild) {
  BuddyAllocator b(&tree_, 1);
  b.TakeCell(Gpu(0));  // socket 0 has 3 free, socket 1 has 4
  std::vector<int> taken;
  b.TakeLeaves(Node(), 2, &taken);
  EXPECT_EQ(taken, (std::vector<int>{Switch(1)}));
  taken.clear();
  b.TakeLeaves(Node(), 6 - 1, &taken);  // 5: one from socket 0, all of socket 1
  EXPECT_EQ(b.free_leaves(root_), 0);
  EXPECT_EQ(b.CheckConsistency(), "");
  EXPECT_NE(std::find(taken.begin(), taken.end(), Socket(1)), taken.end());
}

TEST_F(BuddyAllocatorTest, PlanLeavesGoesAroundTheGpusItIsToAvoid) {
  BuddyAllocator b(&tree_, 1);
  const std::function<bool(int)> avoid_gpu0 = [&](int c) { return c == Gpu(0); };
  // Five of the node: all of socket 1 and, of socket 0, a GPU other than GPU 0 (without the
  // filter the plan would take socket 0 whole).
  std::vector<int> plan;
  ASSERT_TRUE(b.PlanLeaves(Node(), 5, &plan, avoid_gpu0));
  std::vector<int> expected = {Socket(1), Gpu(1)};
  std::sort(plan.begin(), plan.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(plan, expected);
  // Seven are all the node has besides GPU 0; eight are refused, planning nothing.
  plan.clear();
  ASSERT_TRUE(b.PlanLeaves(Node(), 7, &plan, avoid_gpu0));
  int planned = 0;
  for (int c : plan) {
    EXPECT_FALSE(tree_.IsWithin(Gpu(0), c)) << tree_.cells()[c].address;
    planned += tree_.type_of(c).leaf_count;
  }
  EXPECT_EQ(planned, 7);
  plan.clear();
  EXPECT_FALSE(b.PlanLeaves(Node(), 8, &plan, avoid_gpu0));
  EXPECT_TRUE(plan.empty());
  // A GPU already taken is not counted twice: GPU 1 taken and GPU 0 avoided leave 6.
  b.TakeCell(Gpu(1));
  EXPECT_FALSE(b.PlanLeaves(Node(), 7, &plan, avoid_gpu0));
  EXPECT_TRUE(b.PlanLeaves(Node(), 6, &plan, avoid_gpu0));
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, TakeLeavesWholeCell) {
  BuddyAllocator b(&tree_, 1);
  std::vector<int> taken;
  b.TakeLeaves(Node(), 8, &taken);
  EXPECT_EQ(taken, (std::vector<int>{Node()}));
  EXPECT_TRUE(Lists(b).empty());
  b.Give(Node());
  EXPECT_EQ(Lists(b), (ListMap{{"cluster", {root_}}}));
  taken.clear();
  b.TakeLeaves(Node(), 6, &taken);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(tree_.cells()[taken[0]].type, socket_);
  EXPECT_EQ(tree_.cells()[taken[1]].type, switch_);
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, BindKeepsMergesInsideThePool) {
  BuddyAllocator b(&tree_, 2);
  const int s = b.TakeType(0, socket_);
  ASSERT_GE(s, 0);
  const int other = s == Socket(0) ? Socket(1) : Socket(0);
  b.Bind(s, 1);
  EXPECT_EQ(b.pool(s), 1);
  EXPECT_EQ(b.pool(tree_.cells()[s].children[0]), 1);
  EXPECT_EQ(b.pool(other), 0);
  EXPECT_EQ(Lists(b, 1), (ListMap{{"dgx-a100/socket", {s}}}));
  EXPECT_EQ(Lists(b, 0), (ListMap{{"dgx-a100/socket", {other}}}));
  EXPECT_EQ(b.free_leaves(s), 4);
  EXPECT_EQ(b.free_leaves(Node()), 4);  // the physical pool's view
  ASSERT_EQ(b.CheckConsistency(), "");

  // Inside the pool: only the bound socket is there.
  EXPECT_EQ(b.TakeType(1, node_), -1);
  const int mine = b.TakeType(1, gpu_);
  ASSERT_GE(mine, 0);
  EXPECT_TRUE(tree_.IsWithin(mine, s));
  EXPECT_EQ(b.TakeType(1, socket_), -1);
  EXPECT_EQ(b.FindPartial(1, socket_, 3), s);
  EXPECT_EQ(b.FindPartial(0, socket_, 1), -1);
  // The physical pool never hands out the bound socket's GPUs.
  std::vector<int> physical;
  for (int g = b.TakeType(0, gpu_); g >= 0; g = b.TakeType(0, gpu_)) {
    EXPECT_TRUE(tree_.IsWithin(g, other));
    physical.push_back(g);
    ASSERT_EQ(b.CheckConsistency(), "");
  }
  EXPECT_EQ(physical.size(), 4u);
  EXPECT_EQ(b.free_leaves(s), 3);
  for (int g : physical) b.Give(g);
  // Merges stop at the pool boundary: the node is never listed while half of it is bound.
  EXPECT_EQ(Lists(b, 0), (ListMap{{"dgx-a100/socket", {other}}}));
  b.Give(mine);
  EXPECT_EQ(Lists(b, 1), (ListMap{{"dgx-a100/socket", {s}}}));
  EXPECT_EQ(Lists(b, 0), (ListMap{{"dgx-a100/socket", {other}}}));
  ASSERT_EQ(b.CheckConsistency(), "");

  b.Unbind(s);
  EXPECT_EQ(b.pool(s), 0);
  EXPECT_TRUE(b.taken(s));
  EXPECT_TRUE(Lists(b, 1).empty());
  ASSERT_EQ(b.CheckConsistency(), "");
  b.Give(s);
  EXPECT_EQ(Lists(b, 0), (ListMap{{"cluster", {root_}}}));
  EXPECT_EQ(b.CheckConsistency(), "");
}

TEST_F(BuddyAllocatorTest, BindASplitCellAgain) {
  // A cell bound, unbound and bound to another pool behaves as fresh each time.
  BuddyAllocator b(&tree_, 3);
  for (int pool : {1, 2, 1}) {
    const int n = b.TakeType(0, node_);
    ASSERT_EQ(n, Node());
    b.Bind(n, pool);
    std::vector<int> taken;
    for (int i = 0; i < 8; ++i) taken.push_back(b.TakeType(pool, gpu_));
    for (int c : taken) ASSERT_GE(c, 0);
    EXPECT_EQ(b.TakeType(pool, gpu_), -1);
    EXPECT_EQ(b.TakeType(0, gpu_), -1);
    ASSERT_EQ(b.CheckConsistency(), "");
    for (int c : taken) b.Give(c);
    EXPECT_EQ(Lists(b, pool), (ListMap{{"dgx-a100/node", {n}}}));
    b.Unbind(n);
    b.Give(n);
    ASSERT_EQ(b.CheckConsistency(), "");
    EXPECT_EQ(Lists(b, 0), (ListMap{{"cluster", {root_}}}));
  }
}

TEST(BuddyAllocatorFindWithinTest, PacksAndSkipsRefusedNodes) {
  const Cluster cluster = SyntheticDgxCluster(2, 2, 0);
  CellTree tree;
  ASSERT_EQ(CellTree::Build(cluster, &tree), "");
  BuddyAllocator b(&tree, 1);
  const int gpu = tree.FindType("A100-80GB");
  const int sw = tree.FindType("dgx-a100/switch");
  const int node1 = tree.node_cell(1);
  b.TakeCell(tree.gpu_cell(1, 6));
  // Fuller branches first: a GPU of node 1, in the broken switch.
  const int g = b.FindWithin(tree.root(), gpu, 1, nullptr);
  EXPECT_EQ(g, tree.gpu_cell(1, 7));
  // A whole switch: in node 1's broken socket.
  const int s = b.FindWithin(tree.root(), sw, 2, nullptr);
  ASSERT_GE(s, 0);
  EXPECT_TRUE(tree.IsWithin(s, tree.cells()[tree.cells()[tree.gpu_cell(1, 6)].parent].parent));
  // Refusing node 1 moves the choice to node 0.
  const auto not_node1 = [](int node) { return node != 1; };
  const int g0 = b.FindWithin(tree.root(), gpu, 1, not_node1);
  ASSERT_GE(g0, 0);
  EXPECT_EQ(tree.cells()[g0].node, 0);
  EXPECT_EQ(b.FindWithin(node1, gpu, 1, not_node1), -1);
  EXPECT_EQ(b.FindWithin(tree.root(), gpu, 1, [](int) { return false; }), -1);
  // Too many GPUs for any cell of the type.
  EXPECT_EQ(b.FindWithin(tree.root(), sw, 3, nullptr), -1);
  EXPECT_EQ(b.FindWithin(node1, tree.FindType("dgx-a100/node"), 8, nullptr), -1);
  EXPECT_EQ(b.FindWithin(tree.root(), tree.FindType("dgx-a100/node"), 8, nullptr),
            tree.node_cell(0));
}

// A switch of 128 GPUs is planned in one pass over its GPUs (it was one pass per GPU taken: most
// of a gang's placement time on such nodes); the GPUs are the same: the first free ones in order.
TEST(BuddyAllocatorWideSwitchTest, TakesTheFirstFreeGpusOfAWideSwitch) {
  const Cluster cluster = ParseClusterYaml(
      "name: wide\ngpuModels: [{name: H100, memoryMiB: 81920}]\n"
      "nodeShapes: {fat: {gpuModel: H100, sockets: [{cpus: \"0-7\", memoryMiB: 65536, "
      "switches: [128]}]}}\nnodes: [{name: n, shape: fat}]\n",
      "wide.yaml");
  CellTree tree;
  ASSERT_EQ(CellTree::Build(cluster, &tree), "");
  BuddyAllocator b(&tree, 1);
  for (int g : {0, 2, 3, 5}) b.TakeCell(tree.gpu_cell(0, g));
  const int sw = tree.cells()[tree.gpu_cell(0, 0)].parent;
  std::vector<int> plan;
  b.PlanLeaves(sw, 4, &plan);
  std::vector<int> expected;
  for (int g : {1, 4, 6, 7}) expected.push_back(tree.gpu_cell(0, g));
  EXPECT_EQ(plan, expected);
  std::vector<int> taken;
  b.TakeLeaves(sw, 124, &taken);
  EXPECT_EQ(taken.size(), 124u);
  EXPECT_EQ(b.free_leaves(sw), 0);
}

TEST(BuddyAllocatorMultiRackTest, PoolsOnABiggerTree) {
  const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/multi-rack.yaml");
  CellTree tree;
  ASSERT_EQ(CellTree::Build(cluster, &tree), "");
  BuddyAllocator b(&tree, 3);
  const int dgx = tree.FindType("dgx-a100/node");
  const int l40s = tree.FindType("L40S");
  const int a = b.TakeType(0, dgx);
  const int c = b.TakeType(0, tree.FindType("pcie8/socket"));
  ASSERT_GE(a, 0);
  ASSERT_GE(c, 0);
  b.Bind(a, 1);
  b.Bind(c, 2);
  ASSERT_EQ(b.CheckConsistency(), "");
  EXPECT_EQ(b.TakeType(1, l40s), -1);
  EXPECT_EQ(b.TakeType(2, dgx), -1);
  std::vector<int> in_c;
  for (int i = 0; i < 4; ++i) {
    in_c.push_back(b.TakeType(2, l40s));
    EXPECT_TRUE(tree.IsWithin(in_c.back(), c));
  }
  EXPECT_EQ(b.TakeType(2, l40s), -1);
  // The physical pool still has all the other L40S GPUs.
  EXPECT_EQ(b.free_leaves(tree.root()), 128 - 8 - 4);
  ASSERT_EQ(b.CheckConsistency(), "");
  for (int x : in_c) b.Give(x);
  b.Unbind(c);
  b.Give(c);
  b.Unbind(a);
  b.Give(a);
  EXPECT_EQ(b.free_list(0, tree.cells()[tree.root()].type), (std::vector<int>{tree.root()}));
  for (size_t t = 0; t < tree.types().size(); ++t) {
    if (static_cast<int>(t) == tree.cells()[tree.root()].type) continue;
    EXPECT_TRUE(b.free_list(0, static_cast<int>(t)).empty()) << tree.types()[t].name;
  }
  EXPECT_EQ(b.CheckConsistency(), "");
}

}  // namespace
}  // namespace berth
