// The bounds on every size an input controls: files, YAML documents, clusters, traces and the
// numbers given on the command line. Each is checked before the work it would cause is done, so
// a typo or a hostile input is a clear error naming the bound, never a hang, a crash or an
// exhausted memory. They are generous for real use: the largest known real inputs (the openb
// traces, HiveD configurations, clusters of tens of thousands of GPUs) sit far below them.
// docs/cluster-file.md ("Bounds") lists them for operators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace berth::limits {

// An input file: the openb pod lists are about 1 MB.
constexpr uint64_t kMaxFileBytes = 64 << 20;

// A YAML document: nesting deeper than any berth format needs, and the nodes visited when
// aliases are expanded (a few aliases of aliases would otherwise stand for billions of nodes).
constexpr int kMaxYamlDepth = 32;
constexpr int64_t kMaxYamlNodes = 8'000'000;

// Names of nodes, racks, models, labels and the like: a Kubernetes object name.
constexpr size_t kMaxName = 253;

// A cluster, whatever the format: nodes, GPUs in all and in one node, the CPU ids listed in all
// sockets of all nodes, node labels in all and on one node, and the levels of one cell chain.
constexpr int64_t kMaxNodes = 100'000;
constexpr int64_t kMaxGpus = 1 << 20;
constexpr int64_t kMaxGpusPerNode = 128;
constexpr int64_t kMaxSocketsPerNode = 64;
constexpr int64_t kMaxListedCpus = 32'000'000;
constexpr int kMaxCpuId = 65535;
constexpr int64_t kMaxLabels = 1'000'000;
constexpr int64_t kMaxLabelsPerNode = 64;
constexpr int kMaxCellLevels = 16;
// CPU (milli-CPUs) and memory (MiB) of one node: far above any machine, and small enough that
// sums over a whole cluster stay within int64.
constexpr int64_t kMaxNodeCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxNodeMemoryMiB = int64_t{1} << 40;

// The cell types one VC (or queue) lists guarantees for.
constexpr int64_t kMaxGuaranteesPerVc = 1000;

// Traces and the simulator's flags: jobs of a trace or a synthetic stream, queues, seeds, and
// times (about 31 years, in seconds).
constexpr int64_t kMaxJobs = 1'000'000;
constexpr int64_t kMaxQueues = 1000;
constexpr int64_t kMaxSeeds = 10'000;
constexpr double kMaxSeconds = 1e9;
// The pods `sim packing` places in one run, the trace inflated to --tune times the capacity.
constexpr int64_t kMaxPackingPods = 10'000'000;
// Columns of a CSV row (the widest format berth reads has 11).
constexpr size_t kMaxCsvColumns = 64;

// "more than the limit of N THINGS (see docs/cluster-file.md, Bounds)", for messages.
std::string OverLimit(int64_t limit, const std::string& things);

}  // namespace berth::limits
