// Randomized property test of the allocator: long random sequences of allocations (whole GPUs,
// gangs, shares, MIG slices, CPU-only; inside VCs, outside them and opportunistic; with random
// affinity, and some through a random PlacementChooser) and releases, checking the invariants
// after every step and that releasing everything restores the initial free lists exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "allocator_test_util.h"
#include "config/cluster_file.h"
#include "config/openb_node_list.h"
#include "core/allocator.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace {

// Operations per cluster. The sanitizer build (Debug, ASan + UBSan) runs the allocator and the
// checks about 50 times slower; there the counts are cut twentyfold so that the suite stays
// within its time budget. The Release build runs the full counts.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kScale = 20;
#else
constexpr int kScale = 1;
#endif

// Picks a random candidate, after checking that every candidate offered is placeable.
class RandomChooser : public PlacementChooser {
 public:
  RandomChooser(const Allocator* allocator, std::mt19937* rng) : a_(allocator), rng_(rng) {}

  int Choose(const AllocationRequest& request, const CandidateList& candidates,
             const std::vector<ReplicaPlacement>& placed, size_t /*first*/) override {
    (void)placed;
    const Demand& d = request.demand;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const Candidate& c = candidates[i];
      EXPECT_GE(c.node, 0);
      if (request.only_node >= 0) {
        EXPECT_EQ(c.node, request.only_node);
      }
      if (d.gpus > 0) {
        EXPECT_EQ(static_cast<int>(c.gpus.size()), d.gpus);
        for (int g : c.gpus)
          EXPECT_TRUE(a_->gpu_free(c.node, g)) << "node " << c.node << " GPU " << g;
      } else if (d.gpu_milli > 0 || !d.mig_profile.empty()) {
        EXPECT_EQ(c.gpus.size(), 1u);
      } else {
        EXPECT_TRUE(c.gpus.empty());
      }
    }
    if (candidates.empty()) return -1;
    return std::uniform_int_distribution<int>(0, static_cast<int>(candidates.size()) - 1)(*rng_);
  }

 private:
  const Allocator* a_;
  std::mt19937* rng_;
};

struct ClusterCase {
  std::string name;
  std::function<Cluster()> load;
  std::function<std::vector<VirtualClusterSpec>()> vcs;  // null: no VCs
  int ops = 0;
  bool health = false;  // also random bad GPUs and cordoned nodes
};

constexpr char kExplicitYaml[] = R"(name: k80-pool
skuTypes: {K80: {gpu: 1, cpu: 4, memory: 32Gi}}
cellTypes:
  K80-PAIR: {childCellType: K80, childCellNumber: 2}
  K80-NODE: {childCellType: K80-PAIR, childCellNumber: 2, isNodeLevel: true}
  K80-NODE-POOL: {childCellType: K80-NODE, childCellNumber: 3}
physicalCells:
  - {cellType: K80-NODE-POOL, cellAddress: pool-a}
  - {cellType: K80-NODE-POOL, cellAddress: pool-b}
  - {cellType: K80-NODE, cellAddress: lone-node}
)";

void PrintTo(const ClusterCase& c, std::ostream* os) { *os << c.name; }

class AllocatorPropertyTest : public ::testing::TestWithParam<ClusterCase> {
 protected:
  void SetUp() override {
    cluster_ = GetParam().load();
    vcs_ = GetParam().vcs ? GetParam().vcs() : std::vector<VirtualClusterSpec>{};
    a_ = std::make_unique<Allocator>(&cluster_, vcs_);
    ASSERT_EQ(a_->error(), "");
    offset_.push_back(0);
    for (const Node& n : cluster_.nodes)
      offset_.push_back(offset_.back() + static_cast<int>(n.gpus.size()));
    for (const GpuModel& m : cluster_.models) {
      models_.push_back(m.name);
      for (const MigProfile& p : m.mig_profiles)
        if (std::find(profiles_.begin(), profiles_.end(), p.name) == profiles_.end())
          profiles_.push_back(p.name);
    }
    for (const Node& n : cluster_.nodes)
      for (const Gpu& g : n.gpus) has_mig_ = has_mig_ || g.mig_enabled;
  }

  int Rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Rand(0, static_cast<int>(v.size()) - 1)];
  }

  std::optional<Level> RandomLevel(const std::vector<Level>& levels) {
    if (Chance(0.4)) return std::nullopt;
    return Pick(levels);
  }

  AllocationRequest RandomRequest() {
    AllocationRequest r;
    Demand& d = r.demand;
    const int kind = Rand(0, 99);
    if (kind < 40) {
      d.gpus = Pick(std::vector<int>{1, 1, 2, 3, 4, 8});
      d.affinity = RandomLevel({Level::kGpu, Level::kSwitch, Level::kSocket, Level::kNode,
                                Level::kRack, Level::kCluster});
    } else if (kind < 55) {
      r.replicas = Rand(2, 4);
      d.gpus = Pick(std::vector<int>{1, 2, 4, 8});
      d.affinity = RandomLevel({Level::kSwitch, Level::kSocket, Level::kNode});
      r.gang_affinity = RandomLevel({Level::kNode, Level::kRack, Level::kCluster});
    } else if (kind < 75) {
      d.gpu_milli =
          Chance(0.5) ? Pick(std::vector<int>{100, 250, 333, 500, 750, 999}) : Rand(1, 999);
      if (Chance(0.5)) d.gpu_memory_mib = Rand(0, 48000);
      if (Chance(0.2)) r.replicas = Rand(2, 3);
    } else if (kind < 92) {
      if (has_mig_ || Chance(0.1)) {
        d.mig_profile = profiles_.empty() || Chance(0.02) ? "9g.99gb" : Pick(profiles_);
        if (Chance(0.1)) r.replicas = 2;
      } else {
        d.gpus = 1;
      }
    }  // else: CPU-only
    if (Chance(0.3)) d.cpu_milli = Pick(std::vector<int>{500, 1000, 4000, 16000, 64000});
    if (Chance(0.3)) d.memory_mib = Pick(std::vector<int>{1024, 16384, 131072, 524288});
    if (Chance(0.1)) d.models = {Pick(models_)};
    if (!a_->vcs().empty() && Chance(0.5)) r.vc = Rand(0, static_cast<int>(a_->vcs().size()) - 1);
    r.opportunistic = Chance(0.3);
    if (Chance(0.03)) r.only_node = Rand(0, static_cast<int>(cluster_.nodes.size()) - 1);
    return r;
  }

  int GpuIndex(int node, int gpu) const { return offset_[node] + gpu; }

  // The lowest common ancestor of two cells.
  int Lca(int a, int b) const {
    const CellTree& t = a_->tree();
    while (!t.IsWithin(b, a)) a = t.cells()[a].parent;
    return a;
  }

  // Whether borrowers may take the free GPUs of `pool`: the physical pool, or a VC without a
  // lending limit.
  bool Lends(int pool) const {
    if (pool == BuddyAllocator::kPhysicalPool) return true;
    for (int unlent : a_->vcs()[pool - 1].unlent_counts)
      if (unlent > 0) return false;
    return true;
  }

  // Checks what an allocation promises when it is made (it never changes afterwards).
  ::testing::AssertionResult CheckNew(const AllocationRequest& req, const Allocation& alloc) const {
    const Demand& d = req.demand;
    const CellTree& tree = a_->tree();
    if (static_cast<int>(alloc.replicas.size()) != req.replicas)
      return ::testing::AssertionFailure() << "replica count";
    if (alloc.preemptible != req.opportunistic || alloc.vc != req.vc)
      return ::testing::AssertionFailure() << "vc or preemptible flag";
    const int pool = req.vc >= 0 && !req.opportunistic ? req.vc + 1 : 0;
    int gang_lca = -1;
    for (const ReplicaPlacement& r : alloc.replicas) {
      const Node& node = cluster_.nodes[r.node];
      if (req.only_node >= 0 && r.node != req.only_node)
        return ::testing::AssertionFailure() << "only_node ignored";
      // CPUs pinned to the sockets of the GPUs (all sockets for a CPU-only replica).
      std::vector<int> sockets;
      for (int g : r.gpus) sockets.push_back(node.switches[node.gpus[g].pcie_switch].socket);
      if (r.gpus.empty())
        for (size_t s = 0; s < node.sockets.size(); ++s) sockets.push_back(static_cast<int>(s));
      std::sort(sockets.begin(), sockets.end());
      sockets.erase(std::unique(sockets.begin(), sockets.end()), sockets.end());
      if (sockets != r.sockets) return ::testing::AssertionFailure() << "sockets";
      std::vector<int> cpus;
      for (int s : sockets)
        cpus.insert(cpus.end(), node.sockets[s].cpus.begin(), node.sockets[s].cpus.end());
      if (cpus != r.cpus) return ::testing::AssertionFailure() << "pinned CPUs";
      if (r.cpu_milli != d.cpu_milli || r.memory_mib != d.memory_mib)
        return ::testing::AssertionFailure() << "CPU or memory amounts";
      if (r.gpus.empty()) {
        if (d.gpus > 0 || d.gpu_milli > 0 || !d.mig_profile.empty())
          return ::testing::AssertionFailure() << "a GPU replica without GPUs";
        continue;
      }
      int lca = tree.gpu_cell(r.node, r.gpus[0]);
      // A borrower's whole GPUs may lie in the cells of another VC that lends.
      const int first_pool = a_->buddy().pool(lca);
      const int expected =
          req.opportunistic && d.gpus > 0 && Lends(first_pool) && first_pool != req.vc + 1
              ? first_pool
              : pool;
      for (int g : r.gpus) {
        const int leaf = tree.gpu_cell(r.node, g);
        if (leaf < 0) return ::testing::AssertionFailure() << "a GPU outside the cell tree";
        if (!a_->gpu_usable(r.node, g)) return ::testing::AssertionFailure() << "an unusable GPU";
        if (a_->buddy().pool(leaf) != expected)
          return ::testing::AssertionFailure()
                 << "GPU in pool " << a_->buddy().pool(leaf) << ", expected " << expected;
        if (!d.models.empty() &&
            std::find(d.models.begin(), d.models.end(), node.gpus[g].model) == d.models.end())
          return ::testing::AssertionFailure() << "model filter ignored";
        if (node.gpus[g].mig_enabled != !d.mig_profile.empty())
          return ::testing::AssertionFailure() << "MIG GPU for a non-MIG request or vice versa";
        lca = Lca(lca, leaf);
      }
      if (d.gpus > 0) {
        if (static_cast<int>(r.gpus.size()) != d.gpus)
          return ::testing::AssertionFailure() << "GPU count";
        const Level loosest = d.affinity.value_or(Level::kNode);
        if (tree.type_of(lca).tight_level > std::min(loosest, Level::kNode))
          return ::testing::AssertionFailure() << "affinity " << LevelName(loosest)
                                               << " broken: GPUs span a " << tree.type_of(lca).name;
      } else if (r.gpus.size() != 1) {
        return ::testing::AssertionFailure() << "a share or MIG slice on several GPUs";
      }
      const int node_cell = tree.node_cell(r.node);
      gang_lca = gang_lca < 0 ? node_cell : Lca(gang_lca, node_cell);
    }
    if (req.gang_affinity && req.replicas > 1 && gang_lca >= 0 &&
        tree.type_of(gang_lca).level > *req.gang_affinity)
      return ::testing::AssertionFailure() << "gang affinity broken";
    return ::testing::AssertionSuccess();
  }

  // Checks the state of every GPU from the allocations alone.
  ::testing::AssertionResult CheckAll() const {
    struct Use {
      int whole = -1;
      int milli = 0;
      int64_t memory = 0;
      int mig_slots = 0;
      int mig_compute = 0;
    };
    std::vector<Use> use(offset_.back());
    std::vector<int64_t> cpu(cluster_.nodes.size(), 0), mem(cluster_.nodes.size(), 0);
    for (const auto& [id, alloc] : a_->allocations()) {
      for (const ReplicaPlacement& r : alloc->replicas) {
        cpu[r.node] += r.cpu_milli;
        mem[r.node] += r.memory_mib;
        for (int g : r.gpus) {
          Use& u = use[GpuIndex(r.node, g)];
          const auto where = [&] {
            return "node " + cluster_.nodes[r.node].name + " GPU " + std::to_string(g) + ": ";
          };
          const bool whole = r.gpu_milli == 0 && r.mig_profile < 0;
          if (u.whole >= 0) return ::testing::AssertionFailure() << where() << "handed out twice";
          if (whole && (u.milli > 0 || u.mig_slots != 0))
            return ::testing::AssertionFailure() << where() << "whole and shared";
          if (whole) u.whole = id;
          if (r.gpu_milli > 0) {
            if (u.mig_slots) return ::testing::AssertionFailure() << where() << "shared and MIG";
            u.milli += r.gpu_milli;
            u.memory += r.gpu_memory_mib;
            const int64_t cap =
                cluster_.FindModel(cluster_.nodes[r.node].gpus[g].model)->memory_mib;
            if (u.milli > 1000)
              return ::testing::AssertionFailure() << where() << u.milli << " milli";
            if (cap > 0 && u.memory > cap)
              return ::testing::AssertionFailure() << where() << u.memory << " MiB of GPU memory";
          }
          if (r.mig_profile >= 0) {
            if (u.milli) return ::testing::AssertionFailure() << where() << "MIG and shared";
            const MigProfile& p = cluster_.FindModel(cluster_.nodes[r.node].gpus[g].model)
                                      ->mig_profiles[r.mig_profile];
            const int mask = ((1 << p.memory_slots) - 1) << r.mig_start;
            if (std::find(p.starts.begin(), p.starts.end(), r.mig_start) == p.starts.end())
              return ::testing::AssertionFailure() << where() << "MIG start not allowed";
            if (u.mig_slots & mask)
              return ::testing::AssertionFailure() << where() << "MIG overlap";
            u.mig_slots |= mask;
            u.mig_compute += p.compute_slices;
            if (u.mig_compute > kMigComputeSlices)
              return ::testing::AssertionFailure() << where() << "MIG compute over 7";
          }
        }
      }
    }
    for (size_t n = 0; n < cluster_.nodes.size(); ++n) {
      if (cpu[n] > a_->node_resources().cpu_milli(static_cast<int>(n)) ||
          mem[n] > a_->node_resources().memory_mib(static_cast<int>(n)))
        return ::testing::AssertionFailure()
               << "node " << cluster_.nodes[n].name << " overcommitted";
      for (size_t g = 0; g < cluster_.nodes[n].gpus.size(); ++g) {
        const Use& u = use[GpuIndex(static_cast<int>(n), static_cast<int>(g))];
        const bool used = u.whole >= 0 || u.milli > 0 || u.mig_slots != 0;
        const bool free = a_->gpu_free(static_cast<int>(n), static_cast<int>(g));
        const bool usable = a_->gpu_usable(static_cast<int>(n), static_cast<int>(g));
        if ((used && free) || (!used && usable && !free))
          return ::testing::AssertionFailure()
                 << "node " << cluster_.nodes[n].name << " GPU " << g << ": gpu_free disagrees";
      }
    }
    return ::testing::AssertionSuccess();
  }

  Cluster cluster_;
  std::vector<VirtualClusterSpec> vcs_;
  std::unique_ptr<Allocator> a_;
  std::vector<int> offset_;  // first GPU index of each node
  std::vector<std::string> models_, profiles_;
  bool has_mig_ = false;
  std::mt19937 rng_{20240611};
};

TEST_P(AllocatorPropertyTest, RandomOperationsKeepTheInvariants) {
  const ClusterCase& c = GetParam();
  const FreeLists initial = Snapshot(*a_);
  RandomChooser chooser(a_.get(), &rng_);
  std::vector<int> live;
  int allocated = 0, refused = 0;
  double release_bias = 0.5;
  std::vector<std::pair<int, int>> bad;  // GPUs set bad
  std::vector<int> cordoned;
  const int ops = std::max(1, c.ops / kScale);
  for (int step = 0; step < ops; ++step) {
    // Phases that fill the cluster up and drain it again.
    if (step % 500 == 0) release_bias = Pick(std::vector<double>{0.2, 0.4, 0.5, 0.6, 0.8});
    if (c.health && Chance(0.01)) {
      if (Chance(0.7)) {
        const int n = Rand(0, static_cast<int>(cluster_.nodes.size()) - 1);
        if (!cluster_.nodes[n].gpus.empty()) {
          const int g = Rand(0, static_cast<int>(cluster_.nodes[n].gpus.size()) - 1);
          const bool now_bad = a_->gpu_usable(n, g) || Chance(0.5);
          a_->SetGpuBad(n, g, now_bad);
          if (now_bad) bad.push_back({n, g});
        }
      } else {
        const int n = Rand(0, static_cast<int>(cluster_.nodes.size()) - 1);
        const bool cordon = Chance(0.6);
        a_->SetNodeCordoned(n, cordon);
        if (cordon) cordoned.push_back(n);
      }
    } else if (!live.empty() && Chance(release_bias)) {
      const int i = Rand(0, static_cast<int>(live.size()) - 1);
      a_->Release(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      const AllocationRequest req = RandomRequest();
      std::string why;
      const bool use_chooser = Chance(0.15);
      const int limit = Chance(0.5) ? 0 : Rand(1, 4);
      const std::optional<int> id =
          use_chooser ? a_->Allocate(req, &why, &chooser, limit) : a_->Allocate(req, &why);
      if (id) {
        ++allocated;
        live.push_back(*id);
        ASSERT_TRUE(CheckNew(req, *a_->Find(*id))) << "step " << step;
      } else {
        ++refused;
        ASSERT_FALSE(why.empty()) << "step " << step;
      }
    }
    ASSERT_EQ(a_->CheckConsistency(), "") << "step " << step;
    ASSERT_TRUE(CheckAll()) << "step " << step;
    // The per-node free counts that bound preemption trials agree with the GPUs themselves, and
    // the nodes listed as having free GPUs are all those that have some.
    std::vector<std::vector<int>> with_free(a_->vcs().size() + 1);
    for (int vc = -1; vc < static_cast<int>(a_->vcs().size()); ++vc)
      a_->NodesWithFree(vc, 1, &with_free[vc + 1]);
    for (size_t n = 0; n < cluster_.nodes.size(); ++n)
      for (int vc = -1; vc < static_cast<int>(a_->vcs().size()); ++vc) {
        const std::vector<int>& listed = with_free[vc + 1];
        if (a_->FreeGpusOn(static_cast<int>(n), vc) > 0) {
          ASSERT_NE(std::find(listed.begin(), listed.end(), static_cast<int>(n)), listed.end())
              << "step " << step << " node " << n << " vc " << vc << " has free GPUs, unlisted";
        }
        // vc -1: what a borrower may take, the physical pool's and the lending VCs' cells'.
        int free = 0, reclaimable = 0;
        for (size_t g = 0; g < cluster_.nodes[n].gpus.size(); ++g) {
          const int leaf = a_->tree().gpu_cell(static_cast<int>(n), static_cast<int>(g));
          if (leaf < 0) continue;
          const int pool = a_->buddy().pool(leaf);
          const bool gpu_free = a_->gpu_free(static_cast<int>(n), static_cast<int>(g));
          free += gpu_free && (vc >= 0 ? pool == vc + 1 : Lends(pool));
          const int holder = a_->gpu_holder(static_cast<int>(n), static_cast<int>(g));
          reclaimable += pool == vc + 1 && vc >= 0 &&
                         (gpu_free || (holder >= 0 && a_->Find(holder)->preemptible));
        }
        ASSERT_EQ(a_->FreeGpusOn(static_cast<int>(n), vc), free)
            << "step " << step << " node " << n << " vc " << vc;
        if (vc >= 0) {
          ASSERT_EQ(a_->FreeGpusOn(static_cast<int>(n), vc, true), reclaimable)
              << "step " << step << " node " << n << " vc " << vc;
        }
      }
    if (!c.health) {
      ASSERT_EQ(a_->GuaranteeShortfallGpus(), 0) << "step " << step;
    }
  }
  // Both outcomes must have been exercised.
  EXPECT_GT(allocated, ops / 10);
  EXPECT_GT(refused, ops / 50);
  if (c.health) {
    for (const auto& [n, g] : bad) a_->SetGpuBad(n, g, false);
    for (int n : cordoned) a_->SetNodeCordoned(n, false);
    ASSERT_EQ(a_->CheckConsistency(), "");
    // Guaranteed work outside the VCs that went into a broken node (tightest first) holds it
    // once it heals; without that work every guarantee is backed again.
    for (size_t i = 0; i < live.size();) {
      const Allocation& held = *a_->Find(live[i]);
      if (held.vc < 0 && !held.preemptible) {
        a_->Release(live[i]);
        live[i] = live.back();
        live.pop_back();
      } else {
        ++i;
      }
    }
    EXPECT_EQ(a_->GuaranteeShortfallGpus(), 0);
  }
  std::shuffle(live.begin(), live.end(), rng_);
  for (int id : live) {
    a_->Release(id);
    ASSERT_EQ(a_->CheckConsistency(), "");
  }
  EXPECT_TRUE(a_->allocations().empty());
  EXPECT_TRUE(Snapshot(*a_) == initial) << "free lists differ from the initial ones";
  for (const VirtualCluster& vc : a_->vcs()) {
    EXPECT_TRUE(vc.bound_cells.empty()) << vc.name;
    for (int b : vc.bound_counts) EXPECT_EQ(b, 0) << vc.name;
  }
  for (size_t n = 0; n < cluster_.nodes.size(); ++n) {
    EXPECT_EQ(a_->node_resources().free_cpu_milli(static_cast<int>(n)),
              a_->node_resources().cpu_milli(static_cast<int>(n)));
    EXPECT_EQ(a_->node_resources().free_memory_mib(static_cast<int>(n)),
              a_->node_resources().memory_mib(static_cast<int>(n)));
    for (size_t g = 0; g < cluster_.nodes[n].gpus.size(); ++g) {
      EXPECT_TRUE(a_->gpu_free(static_cast<int>(n), static_cast<int>(g)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Examples, AllocatorPropertyTest,
    ::testing::Values(
        ClusterCase{"DgxA100", [] { return ExampleCluster("dgx-a100.yaml"); }, nullptr, 100000},
        ClusterCase{"Pcie8", [] { return ExampleCluster("pcie8.yaml"); }, nullptr, 100000},
        ClusterCase{"MultiRackWithVcs", [] { return ExampleCluster("multi-rack.yaml"); },
                    ExampleVcs, 100000},
        ClusterCase{"H100Mig", [] { return ExampleCluster("h100-mig.yaml"); }, nullptr, 100000},
        // 1213 nodes and 6212 GPUs: the full consistency checks after every step cost about
        // 150 times those of multi-rack.yaml, so this cluster gets far fewer steps.
        ClusterCase{"OpenbNodeList",
                    [] {
                      return LoadOpenbNodeList(std::string(BERTH_SOURCE_DIR) +
                                               "/data/openb/openb_node_list_gpu_node.csv");
                    },
                    nullptr, 400},
        // Beyond the examples: bad GPUs and cordoned nodes coming and going; a HiveD explicit
        // hierarchy with VCs named the qualified way; racks mixing MIG and whole-GPU nodes.
        ClusterCase{"MultiRackWithVcsAndFailures", [] { return ExampleCluster("multi-rack.yaml"); },
                    ExampleVcs, 10000, true},
        ClusterCase{"ExplicitCellsWithVcs",
                    [] { return ParseClusterYaml(kExplicitYaml, "k80.yaml"); },
                    [] {
                      return std::vector<VirtualClusterSpec>{
                          {"a", {{"K80-NODE-POOL.K80-NODE", 2}}},
                          {"b", {{"K80-NODE-POOL.K80-NODE.K80-PAIR", 2}, {"K80", 1}}}};
                    },
                    20000},
        ClusterCase{"SyntheticDgxWithMigAndVcs", [] { return SyntheticDgxCluster(8, 4, 3); },
                    [] {
                      return std::vector<VirtualClusterSpec>{
                          {"a", {{"dgx-a100/node", 2}}},
                          {"b", {{"rack", 1}}},
                          {"c", {{"dgx-a100-mig/socket", 1}, {"A100-80GB/mig", 2}}}};
                    },
                    20000}),
    [](const ::testing::TestParamInfo<ClusterCase>& info) { return info.param.name; });

}  // namespace
}  // namespace berth
