#include "core/fragmentation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "core/job.h"

namespace berth {
namespace {

std::string JoinModels(const std::vector<std::string>& models) {
  std::string out;
  for (const std::string& m : models) {
    if (m.empty()) continue;
    if (!out.empty()) out += '|';
    out += m;
  }
  return out;
}

// The most thresholds (distinct per-GPU milli of typical pods) counted on the stack.
constexpr int kStackThresholds = 64;

}  // namespace

PodShape PodShapeOf(const Cluster& cluster, const Demand& d) {
  if (d.gpus > 0) return {d.cpu_milli, d.gpus, 1000, d.models};
  const int milli = static_cast<int>(std::lround(1000 * GpuEquivalents(cluster, d)));
  if (milli > 0) return {d.cpu_milli, 1, std::min(milli, 1000), d.models};
  return {d.cpu_milli, 0, 0, d.models};
}

TypicalPodsOptions PaperTypicalPodsOptions() {
  return TypicalPodsOptions{.include_cpu_pods = true, .coverage_percent = 95, .step = 1};
}

std::vector<TypicalPod> TypicalPods(const std::vector<PodShape>& pods,
                                    const TypicalPodsOptions& options) {
  // Shapes keyed as the reference's PodResource: CPU milli, GPU milli, GPU count, model list.
  using Key = std::tuple<int64_t, int, int, std::string>;
  struct Shape {
    std::vector<std::string> models;
    double count = 0;
  };
  std::map<Key, Shape> shapes;
  double total = 0;
  for (const PodShape& pod : pods) {
    const bool cpu_only = pod.gpus <= 0;
    if (cpu_only && !options.include_cpu_pods) continue;
    const Key key{pod.cpu_milli, cpu_only ? 0 : pod.gpu_milli, cpu_only ? 0 : pod.gpus,
                  cpu_only ? std::string() : JoinModels(pod.models)};
    Shape& shape = shapes[key];
    if (shape.count == 0 && !cpu_only)
      for (const std::string& m : pod.models)
        if (!m.empty()) shape.models.push_back(m);
    shape.count += 1;
    total += 1;
  }
  if (total == 0) return {};

  std::vector<std::pair<const Key*, const Shape*>> order;
  for (const auto& [key, shape] : shapes) order.push_back({&key, &shape});
  // Most popular first; ties: the larger shape (CPU, GPU milli, GPU count, models) first.
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second->count != b.second->count) return a.second->count > b.second->count;
    return *b.first < *a.first;
  });

  const double coverage = options.coverage_percent > 0 ? options.coverage_percent : 60;
  const int step = options.step > 0 ? options.step : 10;
  const double expected = coverage * total / 100.0;
  const size_t n = order.size();
  size_t taken = 0;
  double covered = 0;
  while (covered < expected && taken < n) {
    const size_t end = std::min(n, taken + static_cast<size_t>(step));
    for (; taken < end; ++taken) covered += order[taken].second->count;
  }
  const double denominator = taken >= n ? total : covered;

  std::vector<TypicalPod> out;
  out.reserve(taken);
  for (size_t i = 0; i < n; ++i) {
    const auto& [key, shape] = order[i];
    const bool rare = i >= taken;
    const bool few_hosts =
        (options.rare_min_gpus > 0 && std::get<2>(*key) >= options.rare_min_gpus) ||
        (options.rare_bound && !shape->models.empty());
    if (rare && !few_hosts) continue;
    TypicalPod pod;
    pod.cpu_milli = std::get<0>(*key);
    pod.gpu_milli = std::get<1>(*key);
    pod.gpus = std::get<2>(*key);
    pod.models = shape->models;
    pod.frequency = shape->count / denominator;
    pod.rare = rare;
    out.push_back(std::move(pod));
  }
  return out;
}

NodeView::NodeView(int model_index, int64_t free_cpu, std::initializer_list<int> free_milli)
    : model(model_index), free_cpu_milli(free_cpu) {
  Resize(static_cast<int>(free_milli.size()));
  int g = 0;
  for (int milli : free_milli) set_free_milli(g++, milli);
}

void NodeView::set_free_milli(int gpu, int milli) {
  if (count_ <= kInlineGpus)
    inline_[gpu] = milli;
  else
    more_[gpu] = milli;
}

void NodeView::Resize(int gpus) {
  if (gpus <= kInlineGpus) {
    if (count_ > kInlineGpus) std::copy(more_.begin(), more_.begin() + gpus, inline_.begin());
    for (int g = std::min(count_, gpus); g < kInlineGpus; ++g) inline_[g] = 0;
    more_.clear();
  } else {
    if (count_ <= kInlineGpus) more_.assign(inline_.begin(), inline_.begin() + count_);
    more_.resize(gpus, 0);
  }
  count_ = gpus;
}

int64_t NodeView::total_free_milli() const {
  int64_t total = 0;
  for (int g = 0; g < count_; ++g) total += free_milli(g);
  return total;
}

bool NodeView::operator==(const NodeView& other) const {
  if (model != other.model || free_cpu_milli != other.free_cpu_milli || count_ != other.count_)
    return false;
  for (int g = 0; g < count_; ++g)
    if (free_milli(g) != other.free_milli(g)) return false;
  return true;
}

FragmentationModel::FragmentationModel(const Cluster* cluster, std::vector<TypicalPod> typical_pods)
    : cluster_(cluster), typical_pods_(std::move(typical_pods)) {
  const int models = static_cast<int>(cluster_->models.size());
  auto model_index = [&](const std::string& name) {
    for (int m = 0; m < models; ++m)
      if (cluster_->models[m].name == name) return m;
    return -1;
  };
  node_model_.reserve(cluster_->nodes.size());
  for (const Node& node : cluster_->nodes)
    node_model_.push_back(node.gpus.empty() ? -1 : model_index(node.gpus[0].model));

  const int pods = static_cast<int>(typical_pods_.size());
  // Column `models` stands for a GPU node of unknown model: only unconstrained pods accept it.
  accepts_.assign(static_cast<size_t>(pods) * (models + 1), 0);
  for (int t = 0; t < pods; ++t) {
    const TypicalPod& pod = typical_pods_[t];
    bool any = true;
    for (const std::string& m : pod.models) any = any && m.empty();
    for (int m = 0; m <= models; ++m) {
      bool ok = any;
      for (const std::string& name : pod.models)
        ok = ok || (m < models && !name.empty() && name == cluster_->models[m].name);
      accepts_[static_cast<size_t>(t) * (models + 1) + m] = ok;
    }
    if (pod.gpu_milli > 0 && !pod.rare) thresholds_.push_back(pod.gpu_milli);
  }
  std::sort(thresholds_.begin(), thresholds_.end());
  thresholds_.erase(std::unique(thresholds_.begin(), thresholds_.end()), thresholds_.end());

  accepted_.assign(models + 1, {});
  rejected_frequency_.assign(models + 1, 0);
  for (int m = 0; m <= models; ++m) {
    for (int t = 0; t < pods; ++t) {
      const TypicalPod& pod = typical_pods_[t];
      if (pod.rare) continue;
      if (pod.gpu_milli <= 0 || !accepts_[static_cast<size_t>(t) * (models + 1) + m]) {
        rejected_frequency_[m] += pod.frequency;  // all free GPU milli is fragment
        continue;
      }
      const int threshold =
          static_cast<int>(std::lower_bound(thresholds_.begin(), thresholds_.end(), pod.gpu_milli) -
                           thresholds_.begin());
      accepted_[m].push_back({pod.cpu_milli, std::max(pod.gpus, 1), threshold, pod.frequency});
    }
  }
}

bool FragmentationModel::Accepts(int t, int model) const {
  const int models = static_cast<int>(cluster_->models.size());
  const int m = model < 0 || model >= models ? models : model;
  return accepts_[static_cast<size_t>(t) * (models + 1) + m];
}

NodeView FragmentationModel::View(const Allocator& alloc, int node) const {
  NodeView view;
  view.model = node_model_[node];
  view.free_cpu_milli = alloc.node_resources().free_cpu_milli(node);
  const std::vector<Gpu>& gpus = cluster_->nodes[node].gpus;
  const int count = static_cast<int>(gpus.size());
  view.Resize(count);
  for (int g = 0; g < count; ++g) {
    if (gpus[g].mig_enabled || !alloc.gpu_usable(node, g)) continue;
    view.set_free_milli(g, 1000 - alloc.gpu_used_milli(node, g));
  }
  return view;
}

double FragmentationModel::Fragmentation(const NodeView& view) const {
  const int gpus = view.gpu_count();
  const int models = static_cast<int>(cluster_->models.size());
  const int m = view.model < 0 || view.model >= models ? models : view.model;
  const std::vector<Entry>& entries = accepted_[m];
  const int thresholds = static_cast<int>(thresholds_.size());

  if (gpus <= NodeView::kInlineGpus && thresholds <= kStackThresholds) {
    // The GPUs with free milli, in ascending order; then, per threshold (ascending too), how
    // many GPUs have at least that much free and the free milli of the others, in one sweep.
    std::array<int, NodeView::kInlineGpus> free;
    int n = 0;
    int64_t total = 0;
    for (int g = 0; g < gpus; ++g) {
      const int f = view.free_milli(g);
      if (f <= 0) continue;
      total += f;
      int i = n++;
      for (; i > 0 && free[i - 1] > f; --i) free[i] = free[i - 1];
      free[i] = f;
    }
    if (total <= 0) return 0;
    std::array<int, kStackThresholds> fit;
    std::array<int64_t, kStackThresholds> below;
    int i = 0;
    int64_t small = 0;
    for (int d = 0; d < thresholds; ++d) {
      for (; i < n && free[i] < thresholds_[d]; ++i) small += free[i];
      fit[d] = n - i;
      below[d] = small;
    }
    const double all = static_cast<double>(total);
    double frag = rejected_frequency_[m] * all;
    for (const Entry& e : entries) {
      const bool hosts = fit[e.threshold] >= e.gpus && view.free_cpu_milli >= e.cpu_milli;
      frag += e.frequency * (hosts ? static_cast<double>(below[e.threshold]) : all);
    }
    return frag;
  }

  const int64_t total = view.total_free_milli();
  if (total <= 0) return 0;
  const double all = static_cast<double>(total);
  double frag = rejected_frequency_[m] * all;
  for (const Entry& e : entries) {
    const int need = thresholds_[e.threshold];
    int count = 0;
    int64_t small = 0;
    for (int g = 0; g < gpus; ++g) {
      const int free = view.free_milli(g);
      if (free >= need)
        ++count;
      else
        small += free;
    }
    const bool hosts = count >= e.gpus && view.free_cpu_milli >= e.cpu_milli;
    frag += e.frequency * (hosts ? static_cast<double>(small) : all);
  }
  return frag;
}

double FragmentationModel::ClusterFragmentation(const Allocator& alloc) const {
  double sum = 0;
  const int nodes = static_cast<int>(cluster_->nodes.size());
  for (int n = 0; n < nodes; ++n) sum += NodeFragmentation(alloc, n);
  return sum;
}

FragmentationTracker::FragmentationTracker(const FragmentationModel* model, const Allocator& alloc)
    : model_(model) {
  RefreshAll(alloc);
}

void FragmentationTracker::Refresh(const Allocator& alloc, int node) {
  views_[node] = model_->View(alloc, node);
  per_node_[node] = model_->Fragmentation(views_[node]);
}

void FragmentationTracker::RefreshAll(const Allocator& alloc) {
  views_.assign(alloc.cluster().nodes.size(), NodeView());
  per_node_.assign(alloc.cluster().nodes.size(), 0);
  for (size_t n = 0; n < per_node_.size(); ++n) Refresh(alloc, static_cast<int>(n));
}

double FragmentationTracker::total() const {
  double sum = 0;
  for (double f : per_node_) sum += f;
  return sum;
}

double NodeFragmentation(const Allocator& alloc, int node, const std::vector<TypicalPod>& pods) {
  return FragmentationModel(&alloc.cluster(), pods).NodeFragmentation(alloc, node);
}

double ClusterFragmentation(const Allocator& alloc, const std::vector<TypicalPod>& pods) {
  return FragmentationModel(&alloc.cluster(), pods).ClusterFragmentation(alloc);
}

}  // namespace berth
