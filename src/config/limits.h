// The bounds on every size an input controls: files, YAML documents, clusters, traces and the
// numbers given on the command line. Each is checked before the work it would cause is done, so
// a typo or a hostile input is a clear error naming the bound and the flag that raises it, never
// a hang, a crash or an exhausted memory. The defaults are generous for real use: the largest
// known real inputs (the openb traces, HiveD configurations, clusters of tens of thousands of
// GPUs) sit far below them. docs/cluster-file.md ("Bounds") lists them for operators.
//
// The contract:
//
// - Get() returns the bounds in force. They are the defaults below until Set() or
//   SetFromFlags() changes them; `berth --limit NAME=VALUE` does so once, before any input is
//   read.
// - Changing the bounds is not thread-safe: do it before any work starts (and before starting
//   threads), never while a load or a simulation runs. Reading them is safe from any thread.
// - Each bound has a stable name (its --limit NAME) and a ceiling: the most the code handles
//   safely (sums within int64, counts within int). A bound can be set from 1 to its ceiling.
//   The node's CPU and memory bounds keep cluster-wide sums within int64 and so have their
//   default as ceiling: they can be lowered, never raised. Together, queues x gpus stays
//   within an int (the engine's sums of guarantees over all VCs).
// - Every message about a bound names the flag that raises it (OverLimit, RaiseHint, and the
//   Int readers of yaml_reader.h and csv_reader.h that take a bound).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace berth::limits {

struct Limits {
  // An input file: the openb pod lists are about 1 MB.
  int64_t file_bytes = 64 << 20;
  // A YAML document: nesting deeper than any berth format needs, and the nodes visited when
  // aliases are expanded (a few aliases of aliases would otherwise stand for billions of nodes).
  int64_t yaml_depth = 32;
  int64_t yaml_nodes = 1'000'000;
  // Names of nodes, racks, models, labels and the like: a Kubernetes object name.
  int64_t name_length = 253;
  // A cluster, whatever the format: nodes, GPUs in all and in one node, the CPU ids listed in
  // all sockets of all nodes, node labels in all and on one node, and the levels of one cell
  // chain.
  int64_t nodes = 100'000;
  int64_t gpus = 1 << 18;
  int64_t gpus_per_node = 128;
  int64_t sockets_per_node = 64;
  int64_t listed_cpus = 32'000'000;
  int64_t cpu_id = 65535;  // the highest CPU id
  int64_t labels = 1'000'000;
  int64_t labels_per_node = 64;
  int64_t cell_levels = 16;
  // CPU (milli-CPUs) and memory (MiB) of one node: far above any machine, and small enough that
  // sums over a whole cluster stay within int64 (never raised).
  int64_t node_cpu_milli = int64_t{1} << 40;
  int64_t node_memory_mib = int64_t{1} << 40;
  // The cell types one VC (or queue) lists guarantees for.
  int64_t vc_cell_types = 1000;
  // Traces and the simulator's flags: jobs of a trace or a synthetic stream, events of a berth
  // trace, queues (and VCs), seeds, and times in seconds (about 31 years; never raised).
  int64_t jobs = 1'000'000;
  int64_t events = 100'000;
  int64_t queues = 1000;
  int64_t seeds = 10'000;
  int64_t seconds = 1'000'000'000;
  // The pods `sim packing` places in one run, the trace inflated to --tune times the capacity.
  int64_t packing_pods = 1'000'000;
  // Columns of a CSV row (the widest format berth reads has 11).
  int64_t csv_columns = 64;
};

// The bounds in force.
const Limits& Get();

// The seconds bound as a double, for times.
inline double Seconds() { return static_cast<double>(Get().seconds); }

// Replaces the bounds in force, unchecked (tests, to set and restore them).
void Set(const Limits& limits);

// Applies each "NAME=VALUE" (the arguments of --limit, in order: the last of a name wins) to
// the bounds in force. Throws ConfigError "--limit ..." naming the valid names or the allowed
// range when a NAME is unknown, a VALUE is not an integer from 1 to the bound's ceiling, or
// queues x gpus would pass 2^31 - 1 (the engine sums the VCs' guarantees in ints); the bounds
// are then left as they were.
void SetFromFlags(const std::vector<std::string>& names_values);

// The bounds' --limit names, comma-separated, for help and messages.
std::string Names();

// "more than the limit of N THINGS (raise it with --limit NAME=N; docs/cluster-file.md,
// Bounds)", N the bound in force; at a bound's ceiling it says that --limit goes no higher.
std::string OverLimit(int64_t Limits::*bound, const std::string& things);

// The same for `limit`, a number derived from `bound` (a node's CPUs from its milli-CPUs).
std::string OverLimit(int64_t Limits::*bound, int64_t limit, const std::string& things);

// " (raise it with --limit NAME=N; docs/cluster-file.md, Bounds)", the tail of OverLimit, for
// messages worded their own way.
std::string RaiseHint(int64_t Limits::*bound);

}  // namespace berth::limits
