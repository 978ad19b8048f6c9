#include "sim/workload_variants.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>

namespace berth {
namespace {

struct FamilyInfo {
  VariantFamily family;
  const char* prefix;
  int max_percent;
  std::vector<int> levels;  // of the standard set
};

const std::vector<FamilyInfo>& Families() {
  static const std::vector<FamilyInfo> kFamilies = {
      {VariantFamily::kMultiGpu, "multigpu", 100, {20, 30, 40, 50}},
      {VariantFamily::kGpuShare, "gpushare", 100, {40, 60, 80, 100}},
      {VariantFamily::kGpuSpec, "gpuspec", 100, {10, 20, 33}},
      {VariantFamily::kCpuOnly, "cpuonly", 1000, {50, 100, 150}},
  };
  return kFamilies;
}

const FamilyInfo& Info(VariantFamily f) {
  for (const FamilyInfo& i : Families())
    if (i.family == f) return i;
  return Families()[0];
}

constexpr int kDraws = 3;

bool IsGpuPod(const TracePod& p) { return GpuAskOf(p) != GpuAsk::kNone; }
bool IsSharedGpu(const TracePod& p) { return GpuAskOf(p) == GpuAsk::kShare; }
bool IsMultiGpu(const TracePod& p) { return GpuAskOf(p) == GpuAsk::kMulti; }
int64_t GpuMilli(const TracePod& p) { return IsGpuPod(p) ? int64_t{p.gpus} * p.gpu_milli : 0; }

// Whether an empty node of `model` could hold the pod: a constraint to a model it never fits
// would only turn the pod into one that no policy can place.
bool ModelCanHold(const Cluster& cluster, const std::string& model, const TracePod& p) {
  for (const Node& n : cluster.nodes)
    if (!n.gpus.empty() && n.gpus[0].model == model && static_cast<int>(n.gpus.size()) >= p.gpus &&
        n.cpu_milli >= p.cpu_milli && n.memory_mib >= p.memory_mib)
      return true;
  return false;
}

}  // namespace

std::string WorkloadVariant::Name() const {
  return std::string(Info(family).prefix) + std::to_string(percent) + "-d" + std::to_string(draw);
}

bool ParseWorkloadVariant(std::string_view name, WorkloadVariant* out, std::string* error) {
  auto fail = [&](const std::string& why) {
    *error = "\"" + std::string(name) + "\": " + why +
             "; expected FAMILYPERCENT-dDRAW, like multigpu30-d2 (families: multigpu, "
             "gpushare, gpuspec, cpuonly)";
    return false;
  };
  for (const FamilyInfo& f : Families()) {
    const std::string_view prefix = f.prefix;
    if (name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = name.substr(prefix.size());
    const size_t dash = rest.find("-d");
    if (dash == std::string_view::npos) return fail("no draw (-d1, -d2, ...)");
    int percent = 0, draw = 0;
    const std::string_view p = rest.substr(0, dash), d = rest.substr(dash + 2);
    const auto pr = std::from_chars(p.data(), p.data() + p.size(), percent);
    const auto dr = std::from_chars(d.data(), d.data() + d.size(), draw);
    if (p.empty() || pr.ec != std::errc() || pr.ptr != p.data() + p.size() || percent < 1 ||
        percent > f.max_percent)
      return fail("the percent must be a whole number from 1 to " + std::to_string(f.max_percent));
    if (d.empty() || dr.ec != std::errc() || dr.ptr != d.data() + d.size() || draw < 1 || draw > 99)
      return fail("the draw must be a whole number from 1 to 99");
    *out = {f.family, percent, draw};
    return true;
  }
  return fail("unknown family");
}

std::vector<WorkloadVariant> StandardVariants() {
  std::vector<WorkloadVariant> out;
  for (const FamilyInfo& f : Families())
    for (int level : f.levels)
      for (int draw = 1; draw <= kDraws; ++draw) out.push_back({f.family, level, draw});
  return out;
}

std::vector<TracePod> MakeWorkloadVariant(const std::vector<TracePod>& base, const Cluster& cluster,
                                          const WorkloadVariant& v) {
  std::vector<TracePod> pods = base;
  // One stream per variant, fixed by its name's parts alone.
  std::seed_seq seq{static_cast<int>(v.family), v.percent, v.draw};
  std::mt19937_64 rng(seq);
  int copies = 0;
  auto copy_of = [&](const std::vector<const TracePod*>& pool) {
    TracePod p = *pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    p.name += "~" + std::to_string(++copies);
    return p;
  };
  auto pool_of = [&](bool (*kind)(const TracePod&)) {
    std::vector<const TracePod*> pool;
    for (const TracePod& p : base)
      if (kind(p)) pool.push_back(&p);
    return pool;
  };
  auto indices_of = [&](auto kind) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < pods.size(); ++i)
      if (kind(pods[i])) idx.push_back(i);
    std::shuffle(idx.begin(), idx.end(), rng);
    return idx;
  };
  const double target = v.percent / 100.0;
  switch (v.family) {
    case VariantFamily::kMultiGpu: {
      // Copies of multi-GPU pods join the whole base until they ask `target` of the GPU milli.
      const auto pool = pool_of(IsMultiGpu);
      double multi = 0, all = 0;
      for (const TracePod& p : pods) all += GpuMilli(p), multi += IsMultiGpu(p) ? GpuMilli(p) : 0;
      while (!pool.empty() && multi < target * all) {
        pods.push_back(copy_of(pool));
        multi += GpuMilli(pods.back()), all += GpuMilli(pods.back());
      }
      break;
    }
    case VariantFamily::kGpuShare: {
      // Whole-GPU pods, drawn at random, give way to copies of shared-GPU pods.
      const auto pool = pool_of(IsSharedGpu);
      double shared = 0, all = 0;
      for (const TracePod& p : pods) all += GpuMilli(p), shared += IsSharedGpu(p) ? GpuMilli(p) : 0;
      for (size_t i :
           indices_of([](const TracePod& p) { return IsGpuPod(p) && !IsSharedGpu(p); })) {
        if (pool.empty() || shared >= target * all) break;
        all -= GpuMilli(pods[i]);
        pods[i] = copy_of(pool);
        all += GpuMilli(pods[i]), shared += GpuMilli(pods[i]);
      }
      break;
    }
    case VariantFamily::kGpuSpec: {
      // GPU pods drawn at random are bound to one GPU model, drawn in proportion to the
      // cluster's GPUs of the models that could hold the pod.
      std::vector<std::string> models;
      std::vector<double> weight;
      for (const Node& n : cluster.nodes) {
        if (n.gpus.empty()) continue;
        const size_t m = std::find(models.begin(), models.end(), n.gpus[0].model) - models.begin();
        if (m == models.size()) models.push_back(n.gpus[0].model), weight.push_back(0);
        weight[m] += static_cast<double>(n.gpus.size());
      }
      size_t gpu_pods = 0, bound = 0;
      for (const TracePod& p : pods)
        gpu_pods += IsGpuPod(p), bound += IsGpuPod(p) && !p.models.empty();
      const auto want = static_cast<size_t>(std::lround(target * gpu_pods));
      for (size_t i :
           indices_of([](const TracePod& p) { return IsGpuPod(p) && p.models.empty(); })) {
        if (bound >= want) break;
        std::vector<double> w = weight;
        bool any = false;
        for (size_t m = 0; m < models.size(); ++m)
          if (!ModelCanHold(cluster, models[m], pods[i]))
            w[m] = 0;
          else
            any = true;
        if (!any) continue;
        pods[i].models = {models[std::discrete_distribution<size_t>(w.begin(), w.end())(rng)]};
        ++bound;
      }
      break;
    }
    case VariantFamily::kCpuOnly: {
      // CPU-only pods join (copies) or leave (drawn at random) until their CPU milli is
      // `target` x the GPU pods'.
      // (Pods that ask no CPU would never reach the target.)
      const auto pool = pool_of([](const TracePod& p) { return !IsGpuPod(p) && p.cpu_milli > 0; });
      double cpu_only = 0, gpu_pods = 0;
      for (const TracePod& p : pods) (IsGpuPod(p) ? gpu_pods : cpu_only) += p.cpu_milli;
      while (!pool.empty() && cpu_only < target * gpu_pods) {
        pods.push_back(copy_of(pool));
        cpu_only += pods.back().cpu_milli;
      }
      std::vector<bool> drop(pods.size(), false);
      for (size_t i : indices_of([](const TracePod& p) { return !IsGpuPod(p); })) {
        if (cpu_only - pods[i].cpu_milli < target * gpu_pods) break;
        drop[i] = true;
        cpu_only -= pods[i].cpu_milli;
      }
      size_t kept = 0;
      for (size_t i = 0; i < pods.size(); ++i)
        if (!drop[i]) pods[kept++] = std::move(pods[i]);
      pods.resize(kept);
      break;
    }
  }
  return pods;
}

WorkloadMix MeasureWorkloadMix(const std::vector<TracePod>& pods) {
  WorkloadMix m;
  m.pods = static_cast<int>(pods.size());
  double milli = 0, multi = 0, shared = 0, gpu_pods = 0, bound = 0, cpu_gpu = 0, cpu_only = 0;
  for (const TracePod& p : pods) {
    const double g = static_cast<double>(GpuMilli(p));
    milli += g;
    multi += IsMultiGpu(p) ? g : 0;
    shared += IsSharedGpu(p) ? g : 0;
    gpu_pods += IsGpuPod(p);
    bound += IsGpuPod(p) && !p.models.empty();
    (IsGpuPod(p) ? cpu_gpu : cpu_only) += static_cast<double>(p.cpu_milli);
  }
  auto pct = [](double a, double b) { return b > 0 ? 100 * a / b : 0; };
  m.gpus = milli / 1000;
  m.multi_gpu = pct(multi, milli);
  m.gpu_share = pct(shared, milli);
  m.gpu_spec = pct(bound, gpu_pods);
  m.cpu_only_cpu = pct(cpu_only, cpu_gpu);
  return m;
}

}  // namespace berth
