#include "core/preemption.h"

#include <gtest/gtest.h>

#include <optional>

#include "allocator_test_util.h"

namespace berth {
namespace {

int Take(Allocator& a, const AllocationRequest& request) {
  std::string why;
  const std::optional<int> id = a.Allocate(request, &why);
  EXPECT_TRUE(id.has_value()) << why;
  return id.value_or(-1);
}

// research is guaranteed two whole DGX nodes. Borrowers (work outside any VC) fill every node
// the VC has not bound, so a reclaim would have victims everywhere; whether it could help
// depends only on the VC's own free GPUs and the cells its guarantee has left to bind.
TEST(ReplicaBoundTest, AReclaimCanHelpOnlyAsFarAsTheGuaranteeHasCellsLeftToBind) {
  const Cluster cluster = ExampleCluster("multi-rack.yaml");
  Allocator a(&cluster, ExampleVcs());
  ASSERT_EQ(a.error(), "");
  const int research = VcIndex(a, "research");
  Take(a, ForVc(WholeGpus(5), research));  // binds one node cell: 3 GPUs left in it
  while (a.Allocate(WholeGpus(8))) {
  }
  // One cell still to bind: an 8-GPU job may fit once borrowers leave, two may not.
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, 8, 1, research));
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, 8, 2, research));
  // The bound cell's 3 free GPUs count as they are.
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, 3, 1, research));

  Take(a, ForVc(WholeGpus(5), research));  // binds the second cell: 3 + 3 free, none to bind
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, 4, 1, research));
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, 3, 2, research));
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, 3, 3, research));
  // The same through a job spec; a job asking for a GPU share is not bounded.
  JobSpec four;
  four.groups.push_back(TaskGroup{});
  four.groups[0].demand.gpus = 4;
  EXPECT_FALSE(ReplicaBound::MayFitReclaiming(a, four, research));
  JobSpec share = four;
  share.groups[0].demand.gpus = 0;
  share.groups[0].demand.gpu_milli = 500;
  EXPECT_TRUE(ReplicaBound::MayFitReclaiming(a, share, research));
}

}  // namespace
}  // namespace berth
