#include "core/fragmentation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plugins/openb_test_cluster.h"

namespace berth {
namespace {

TypicalPod Typical(int gpus, int milli, double frequency, int64_t cpu_milli = 1000,
                   std::vector<std::string> models = {}) {
  TypicalPod t;
  t.cpu_milli = cpu_milli;
  t.gpus = gpus;
  t.gpu_milli = milli;
  t.models = std::move(models);
  t.frequency = frequency;
  return t;
}

PodShape Shape(int64_t cpu_milli, int gpus, int milli, std::vector<std::string> models = {}) {
  return PodShape{cpu_milli, gpus, milli, std::move(models)};
}

std::vector<PodShape> Repeat(const PodShape& shape, int times) {
  return std::vector<PodShape>(times, shape);
}

// The example of the brief: free {1000, 300}; typical pods 1 x 500 (.5) and 1 x 1000 (.5).
// Either can be hosted (on the free GPU), and the 300 left on the other GPU is below both.
TEST(FragmentationTest, HandComputedNode) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 32000, .gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  Place(&alloc, 0, ShareDemand(700));
  const std::vector<TypicalPod> pods = {Typical(1, 500, .5), Typical(1, 1000, .5)};
  EXPECT_DOUBLE_EQ(NodeFragmentation(alloc, 0, pods), .5 * 300 + .5 * 300);

  // The same through a hypothetical view.
  const FragmentationModel model(&cluster, pods);
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 32000, {1000, 300})), 300);
  // Once the free GPU is half used, the 1000 pod no longer fits: all 800 is fragment for it,
  // the 500 pod still fits (300 below it).
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 32000, {500, 300})), .5 * 300 + .5 * 800);
  // An untouched node has no fragment; a full one neither.
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 32000, {1000, 1000})), 0);
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 32000, {0, 0})), 0);
}

TEST(FragmentationTest, CpuStarvedNodeIsAllFragment) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 8000, .gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  Place(&alloc, 0, CpuDemand(7000));
  const std::vector<TypicalPod> pods = {Typical(1, 500, .5, 2000), Typical(1, 1000, .5, 500)};
  // 1000 CPU milli left: the first pod lacks CPU (all 2000 free milli is fragment), the second
  // fits (no GPU below 1000 free).
  EXPECT_DOUBLE_EQ(NodeFragmentation(alloc, 0, pods), .5 * 2000);
  Place(&alloc, 0, CpuDemand(1000));
  EXPECT_DOUBLE_EQ(NodeFragmentation(alloc, 0, pods), 2000);
}

TEST(FragmentationTest, ModelMismatchIsAllFragment) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2, .model = "A"}, {.gpus = 2, .model = "B"}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const std::vector<TypicalPod> pods = {Typical(1, 1000, .25, 1000, {"B"}),
                                        Typical(1, 500, .75, 1000, {"A", "B"})};
  EXPECT_DOUBLE_EQ(NodeFragmentation(alloc, 0, pods), .25 * 2000);
  EXPECT_DOUBLE_EQ(NodeFragmentation(alloc, 1, pods), 0);
  EXPECT_DOUBLE_EQ(ClusterFragmentation(alloc, pods), .25 * 2000);
  const FragmentationModel model(&cluster, pods);
  EXPECT_FALSE(model.Accepts(0, 0));
  EXPECT_TRUE(model.Accepts(0, 1));
  EXPECT_TRUE(model.Accepts(1, 0));
}

TEST(FragmentationTest, TrackerFollowsRefreshedNodes) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}, {.gpus = 2}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const FragmentationModel model(&cluster, {Typical(1, 1000, 1)});
  FragmentationTracker tracker(&model, alloc);
  EXPECT_DOUBLE_EQ(tracker.total(), 0);
  Place(&alloc, 1, ShareDemand(400));
  tracker.Refresh(alloc, 1);
  EXPECT_DOUBLE_EQ(tracker.node(1), 600);
  EXPECT_DOUBLE_EQ(tracker.total(), 600);
  EXPECT_DOUBLE_EQ(tracker.total(), model.ClusterFragmentation(alloc));
}

TEST(FragmentationTest, MultiGpuPodNeedsEnoughGpus) {
  const Cluster cluster = OpenbTestCluster({{.gpus = 4}});
  const FragmentationModel model(&cluster, {Typical(2, 1000, 1)});
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 64000, {1000, 1000, 0, 400})), 400);
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 64000, {1000, 900, 0, 400})), 2300);
}

TEST(FragmentationTest, CpuOnlyTypicalPodsCountAllFreeGpu) {
  // As the reference: a CPU-only typical pod never "uses" GPUs, so all free GPU milli counts
  // as fragment for it, whether or not its CPU fits.
  const Cluster cluster = OpenbTestCluster({{.gpus = 2}});
  const FragmentationModel model(&cluster, {Typical(0, 0, .4, 1000), Typical(1, 1000, .6)});
  EXPECT_DOUBLE_EQ(model.Fragmentation(NodeView(0, 64000, {1000, 500})), .4 * 1500 + .6 * 500);
}

TEST(FragmentationTest, ViewSeesBadGpusAndWholeGpusAsUsed) {
  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 16000, .gpus = 3}});
  Allocator alloc(&cluster, {});
  ASSERT_EQ(alloc.error(), "");
  const int whole = Place(&alloc, 0, WholeDemand(1, 2000));
  alloc.SetGpuBad(0, (GpuOf(alloc, whole) + 1) % 3, true);
  const FragmentationModel model(&cluster, {Typical(1, 1000, 1)});
  const NodeView view = model.View(alloc, 0);
  EXPECT_EQ(view.model, 0);
  EXPECT_EQ(view.free_cpu_milli, 14000);
  EXPECT_EQ(view.gpu_count(), 3);
  EXPECT_EQ(view.total_free_milli(), 1000);
  alloc.SetNodeCordoned(0, true);
  EXPECT_EQ(model.View(alloc, 0).total_free_milli(), 0);
}

TEST(FragmentationTest, NodeViewBeyondEightGpus) {
  NodeView view(0, 1000, {1000, 1000});
  view.Resize(12);
  EXPECT_EQ(view.gpu_count(), 12);
  EXPECT_EQ(view.free_milli(1), 1000);
  EXPECT_EQ(view.free_milli(11), 0);
  view.set_free_milli(11, 700);
  EXPECT_EQ(view.total_free_milli(), 2700);
  NodeView copy = view;
  EXPECT_EQ(copy, view);
  copy.Resize(2);
  EXPECT_EQ(copy.total_free_milli(), 2000);
  const Cluster cluster = OpenbTestCluster({{.gpus = 12}});
  const FragmentationModel model(&cluster, {Typical(1, 800, 1)});
  EXPECT_DOUBLE_EQ(model.Fragmentation(view), 700);  // GPU 11's 700 is below 800
  view.set_free_milli(0, 500);
  EXPECT_DOUBLE_EQ(model.Fragmentation(view), 1200);
}

TEST(TypicalPodsTest, CoverageTakesStepsOfShapes) {
  std::vector<PodShape> pods;
  for (const auto& batch : {Repeat(Shape(4000, 1, 500), 5), Repeat(Shape(8000, 1, 1000), 3),
                            Repeat(Shape(1000, 0, 0), 2), Repeat(Shape(2000, 2, 1000), 1),
                            Repeat(Shape(2000, 1, 250, {"A", "B"}), 1)})
    pods.insert(pods.end(), batch.begin(), batch.end());

  // Defaults: CPU-only pods left out, ten shapes a round: all 4 GPU shapes are taken at once,
  // each with its share of the 10 GPU pods.
  std::vector<TypicalPod> typical = TypicalPods(pods);
  ASSERT_EQ(typical.size(), 4u);
  EXPECT_EQ(typical[0].gpu_milli, 500);
  EXPECT_DOUBLE_EQ(typical[0].frequency, .5);
  EXPECT_EQ(typical[1].gpu_milli, 1000);
  EXPECT_DOUBLE_EQ(typical[1].frequency, .3);
  // Equal counts: the larger shape first (same CPU; 1000 milli before 250).
  EXPECT_EQ(typical[2].gpus, 2);
  EXPECT_DOUBLE_EQ(typical[2].frequency, .1);
  EXPECT_EQ(typical[3].models, (std::vector<std::string>{"A", "B"}));
  EXPECT_DOUBLE_EQ(typical[3].frequency, .1);

  // One shape a round up to 60%: 5/10, then 8/10 >= 60%; renormalized over the 8 covered.
  typical = TypicalPods(pods, {.include_cpu_pods = false, .coverage_percent = 60, .step = 1});
  ASSERT_EQ(typical.size(), 2u);
  EXPECT_DOUBLE_EQ(typical[0].frequency, 5.0 / 8);
  EXPECT_DOUBLE_EQ(typical[1].frequency, 3.0 / 8);

  // The paper's runs: CPU-only pods counted, one shape a round to 95%: 5, 8, 10, 11 of 12 are
  // below 95%, so all five shapes are taken, over all 12 pods.
  typical = TypicalPods(pods, PaperTypicalPodsOptions());
  ASSERT_EQ(typical.size(), 5u);
  EXPECT_EQ(typical[2].gpus, 0);
  EXPECT_EQ(typical[2].cpu_milli, 1000);
  EXPECT_DOUBLE_EQ(typical[2].frequency, 2.0 / 12);
  double sum = 0;
  for (const TypicalPod& t : typical) sum += t.frequency;
  EXPECT_DOUBLE_EQ(sum, 1);

  EXPECT_TRUE(TypicalPods({}).empty());
  EXPECT_TRUE(TypicalPods(Repeat(Shape(1000, 0, 0), 3)).empty());
}

// With rare_min_gpus the shapes of that many GPUs past the coverage follow, marked rare, on the
// same scale, and with rare_bound those bound to GPU models; other shapes past it stay out.
// FGD's fragment does not count rare ones.
TEST(TypicalPodsTest, RareShapesFollowTheTypicalOnes) {
  std::vector<PodShape> pods = Repeat(Shape(1000, 1, 1000), 7);
  for (const PodShape& p : {Shape(2000, 1, 500), Shape(3000, 8, 1000), Shape(1000, 2, 250),
                            Shape(1000, 1, 1000, {"A"})})
    pods.push_back(p);
  TypicalPodsOptions options{.include_cpu_pods = false, .coverage_percent = 60, .step = 1};
  ASSERT_EQ(TypicalPods(pods, options).size(), 1u);
  options.rare_min_gpus = 4;
  std::vector<TypicalPod> typical = TypicalPods(pods, options);
  ASSERT_EQ(typical.size(), 2u);
  EXPECT_FALSE(typical[0].rare);
  EXPECT_DOUBLE_EQ(typical[0].frequency, 1);
  EXPECT_TRUE(typical[1].rare);
  EXPECT_EQ(typical[1].gpus, 8);
  EXPECT_DOUBLE_EQ(typical[1].frequency, 1.0 / 7);
  options.rare_bound = true;
  typical = TypicalPods(pods, options);
  ASSERT_EQ(typical.size(), 3u);
  EXPECT_TRUE(typical[2].rare);
  EXPECT_EQ(typical[2].models, (std::vector<std::string>{"A"}));

  const Cluster cluster = OpenbTestCluster({{.cpu_milli = 32000, .gpus = 8}});
  const FragmentationModel with_rare(&cluster, typical);
  const FragmentationModel without(&cluster, {typical[0]});
  for (const NodeView& view : {NodeView(0, 32000, {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}),
                               NodeView(0, 32000, {300, 1000, 0, 0, 0, 0, 0, 0})})
    EXPECT_DOUBLE_EQ(with_rare.Fragmentation(view), without.Fragmentation(view));
  EXPECT_TRUE(with_rare.Accepts(1, 0));
  EXPECT_TRUE(with_rare.Accepts(2, 0));   // bound to "A", model 0
  EXPECT_FALSE(with_rare.Accepts(2, 1));  // "B"
}

TEST(TypicalPodsTest, TiesOrderByCpuThenMilliThenGpusThenModels) {
  const std::vector<PodShape> pods = {Shape(1000, 1, 500), Shape(2000, 1, 100),
                                      Shape(1000, 1, 500, {"A"}), Shape(1000, 2, 1000),
                                      Shape(1000, 1, 1000)};
  const std::vector<TypicalPod> typical = TypicalPods(pods);
  ASSERT_EQ(typical.size(), 5u);
  EXPECT_EQ(typical[0].cpu_milli, 2000);
  EXPECT_EQ(typical[1].gpus, 2);  // 1000 milli: 2 GPUs before 1
  EXPECT_EQ(typical[2].gpus, 1);
  EXPECT_EQ(typical[2].gpu_milli, 1000);
  EXPECT_EQ(typical[3].models, (std::vector<std::string>{"A"}));  // "A" > ""
  EXPECT_TRUE(typical[4].models.empty());
}

}  // namespace
}  // namespace berth
