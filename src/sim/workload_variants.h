// Held-out workloads: variants of an openb pod list, derived the way the openb family was
// (alibaba/clusterdata, cluster-trace-gpu-v2023: the other pod lists are "sampled from the
// default one, emphasizing certain types of workloads", and the gpuspec ones add GPU-model
// constraints). Each variant pushes one share to a target and leaves the rest of the mix as it
// was; each (family, level) has several seeded random draws. docs/simulator.md says which draws
// are for tuning and which are held out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"
#include "sim/trace.h"

namespace berth {

enum class VariantFamily {
  kMultiGpu,  // % of the GPU milli asked by multi-GPU pods; pods of the base are all kept
  kGpuShare,  // % of the GPU milli asked by shared-GPU pods (a share of one GPU); same pod count
  kGpuSpec,   // % of the GPU pods that may run on one GPU model only; same pods otherwise
  kCpuOnly,   // CPU milli of the CPU-only pods, in % of the GPU pods' CPU milli
};

struct WorkloadVariant {
  VariantFamily family = VariantFamily::kMultiGpu;
  int percent = 0;  // the family's target share, 1..100 (kCpuOnly: 1..1000)
  int draw = 1;     // which seeded draw, 1..99

  // "multigpu30-d2", "gpushare80-d1", "gpuspec20-d3", "cpuonly100-d1".
  std::string Name() const;
  // Draw 1 of each level is for tuning; the others are held out.
  bool held_out() const { return draw > 1; }
};

// Parses Name()'s form; on a bad name returns false and says why in `error`.
bool ParseWorkloadVariant(std::string_view name, WorkloadVariant* out, std::string* error);

// The standard set: multigpu 20..50, gpushare 40..100, gpuspec 10..33, cpuonly 50..150, three
// draws each.
std::vector<WorkloadVariant> StandardVariants();

// The variant of `base` (an openb pod list). `cluster` gives the GPU models a constrained pod
// may be bound to. Deterministic: the same inputs give the same pods. New pods are copies of
// base pods of the wanted kind, named "<base name>~<n>".
std::vector<TracePod> MakeWorkloadVariant(const std::vector<TracePod>& base, const Cluster& cluster,
                                          const WorkloadVariant& variant);

// The measured shares a variant is built to move, in %: for reports and tests.
struct WorkloadMix {
  int pods = 0;
  double gpus = 0;          // GPUs asked in all
  double multi_gpu = 0;     // share of the GPU milli from pods of 2+ GPUs
  double gpu_share = 0;     // share of the GPU milli from pods asking a share of one GPU
  double gpu_spec = 0;      // share of GPU pods bound to some GPU models
  double cpu_only_cpu = 0;  // CPU milli of CPU-only pods over that of GPU pods
};
WorkloadMix MeasureWorkloadMix(const std::vector<TracePod>& pods);

}  // namespace berth
