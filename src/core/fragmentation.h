// FGD's measure of GPU fragmentation (Weng et al., "Beware of Fragmentation", USENIX ATC '23),
// as the paper's simulator computes it (hkust-adsl/kubernetes-scheduler-simulator,
// pkg/utils/frag.go: GetTypicalPods, NodeGpuShareFragAmount).
//
// The workload is summarized by its typical pods: the most popular pod shapes with their
// frequencies. A node's fragmentation is the GPU milli it holds free that a typical pod,
// drawn at random, could not use. For each typical pod:
//  - the node cannot host it (too few GPUs with the pod's per-GPU milli free, too little CPU,
//    a GPU model the pod does not accept, or a CPU-only pod): all its free GPU milli is
//    fragment;
//  - the node can host it: the free milli of the GPUs with less free than the pod's per-GPU
//    milli is fragment;
// weighted by the pod's frequency. Memory plays no part, as in the reference.
//
// FragmentationModel compiles the typical pods against a cluster once; evaluating a node is
// then allocation-free: a NodeView (a node's free GPU milli and CPU, possibly hypothetical)
// keeps up to 8 GPUs inline.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cluster.h"
#include "core/plugins/plugin.h"

namespace berth {

// One pod of a workload, as typical pods are counted.
struct PodShape {
  int64_t cpu_milli = 0;
  int gpus = 0;                     // GPUs per pod; 0: CPU-only
  int gpu_milli = 0;                // per GPU, 1..1000 (0 for CPU-only pods)
  std::vector<std::string> models;  // allowed GPU models; empty: any
};

// The shape one replica of a demand counts as: whole GPUs, else a share (a MIG slice as its
// share of the GPU's compute), else CPU only.
PodShape PodShapeOf(const Cluster& cluster, const Demand& demand);

// GetTypicalPods' configuration (v1alpha1.TypicalPodsConfig).
struct TypicalPodsOptions {
  bool include_cpu_pods = false;  // IsInvolvedCpuPods
  double coverage_percent = 60;   // PodPopularityThreshold: stop once this share is covered
  int step = 10;                  // PodIncreaseStep: shapes taken per round
  // Also, past the coverage, the shapes whose hosts are few, marked rare: those of at least
  // rare_min_gpus GPUs (0: none), and with rare_bound those bound to GPU models. Each is too
  // rare to weigh in FGD's expected fragment, yet its pods start only on a node with that
  // many GPUs free (the nodes that small pods break first) or of its model; the scarcity
  // score keeps their hosts (packing mode).
  int rare_min_gpus = 0;
  bool rare_bound = false;
};

// The options the paper's published runs used (scripts/generate_config_and_run.py writes them
// into every experiment's cluster config): CPU-only pods included, 95% coverage, one shape per
// round. The defaults above are the Go code's fallbacks for an unset config.
TypicalPodsOptions PaperTypicalPodsOptions();

// GetTypicalPods: counts `pods` by shape (CPU milli, GPUs, GPU milli, model list; CPU-only pods
// skipped unless options.include_cpu_pods), sorts the shapes by count, most popular first (ties:
// larger CPU, then GPU milli, then GPU count, then "|"-joined model list first), and takes
// options.step shapes at a time until they cover at least options.coverage_percent of the
// counted pods. Frequencies are the shapes' counts over the counted pods, renormalized to sum
// to 1 over the shapes taken (as the reference does after chopping the list); rare shapes
// (options.rare_min_gpus, rare_bound) follow, on the same scale.
std::vector<TypicalPod> TypicalPods(const std::vector<PodShape>& pods,
                                    const TypicalPodsOptions& options = {});

// A node's free resources as fragmentation sees them, real or hypothetical: the index of its
// GPU model in Cluster::models (-1: no GPUs), free CPU milli, and free milli per GPU (0 for a
// GPU that is bad, cordoned, MIG-enabled or held whole). Copying one does not allocate for
// nodes of up to kInlineGpus GPUs.
class NodeView {
 public:
  static constexpr int kInlineGpus = 8;

  NodeView() = default;
  NodeView(int model, int64_t free_cpu_milli, std::initializer_list<int> free_milli);

  int model = -1;
  int64_t free_cpu_milli = 0;

  int gpu_count() const { return count_; }
  int free_milli(int gpu) const { return count_ <= kInlineGpus ? inline_[gpu] : more_[gpu]; }
  void set_free_milli(int gpu, int milli);
  void Resize(int gpus);  // new GPUs have 0 free
  int64_t total_free_milli() const;

  bool operator==(const NodeView& other) const;

 private:
  int count_ = 0;
  std::array<int, kInlineGpus> inline_{};
  std::vector<int> more_;  // all GPUs, when there are more than kInlineGpus
};

class FragmentationModel {
 public:
  // `cluster` must outlive the model. A typical pod naming a model the cluster lacks simply
  // never matches it; frequencies are used as given.
  FragmentationModel(const Cluster* cluster, std::vector<TypicalPod> typical_pods);

  const std::vector<TypicalPod>& typical_pods() const { return typical_pods_; }
  const Cluster& cluster() const { return *cluster_; }

  // The node as the allocator has it now. A node whose GPUs are of several models is seen
  // with the model of its first GPU (the reference knows one model per node).
  NodeView View(const Allocator& alloc, int node) const;
  // Expected fragment of the node, in GPU milli.
  double Fragmentation(const NodeView& view) const;
  double NodeFragmentation(const Allocator& alloc, int node) const {
    return Fragmentation(View(alloc, node));
  }
  // Sum over all nodes (the simulator's frag_amount).
  double ClusterFragmentation(const Allocator& alloc) const;

  // Whether typical pod `t` accepts GPU model `model` (an index into Cluster::models). Rare
  // typical pods are answered here too; everything else in the model leaves them out.
  bool Accepts(int t, int model) const;

 private:
  struct Entry {  // a GPU typical pod a model accepts
    int64_t cpu_milli;
    int gpus;
    int threshold;  // index into thresholds_
    double frequency;
  };

  const Cluster* cluster_;
  std::vector<TypicalPod> typical_pods_;
  std::vector<int> node_model_;               // per node: model index of its first GPU, -1: none
  std::vector<int> thresholds_;               // distinct per-GPU milli of the GPU typical pods
  std::vector<std::vector<Entry>> accepted_;  // per model
  std::vector<double> rejected_frequency_;    // per model: CPU-only pods + pods refusing it
  std::vector<char> accepts_;                 // [t * models + m]
};

// The cluster's fragmentation kept node by node, for a metric read after every placement and
// for fgd's scores (PlacementContext::fragmentation): Refresh the nodes a placement or release
// touched instead of recomputing every node. Each node's view is kept with its fragmentation,
// so that readers need not rebuild it from the allocator.
class FragmentationTracker {
 public:
  // `model` must outlive the tracker. Computes every node of `alloc`.
  FragmentationTracker(const FragmentationModel* model, const Allocator& alloc);

  void Refresh(const Allocator& alloc, int node);
  void RefreshAll(const Allocator& alloc);
  const FragmentationModel& model() const { return *model_; }
  double node(int n) const { return per_node_[n]; }
  const NodeView& view(int n) const { return views_[n]; }  // as of the node's last Refresh
  double total() const;  // summed afresh (no drift from repeated updates)

 private:
  const FragmentationModel* model_;
  std::vector<NodeView> views_;
  std::vector<double> per_node_;
};

// Convenience forms that compile the typical pods on each call (tests, one-off reports).
double NodeFragmentation(const Allocator& alloc, int node, const std::vector<TypicalPod>& pods);
double ClusterFragmentation(const Allocator& alloc, const std::vector<TypicalPod>& pods);

}  // namespace berth
