#include "config/limits.h"

#include <charconv>

#include "config/config_error.h"

namespace berth::limits {
namespace {

Limits current;

struct Bound {
  const char* name;  // the --limit NAME; stable, documented in docs/cluster-file.md (Bounds)
  int64_t Limits::*field;
  int64_t ceiling;  // the most the code handles safely
};

// In the order of docs/cluster-file.md's table.
constexpr Bound kBounds[] = {
    {"file-bytes", &Limits::file_bytes, int64_t{1} << 40},
    {"yaml-depth", &Limits::yaml_depth, 256},  // below yaml-cpp's own guard (2000)
    {"yaml-nodes", &Limits::yaml_nodes, 1'000'000'000'000},
    {"name-length", &Limits::name_length, 1 << 20},
    {"nodes", &Limits::nodes, 1 << 24},
    // GPU ids, cells and milli-GPU sums are ints: 1000 x 2^21 stays below 2^31.
    {"gpus", &Limits::gpus, 1 << 21},
    {"gpus-per-node", &Limits::gpus_per_node, 1024},
    {"sockets-per-node", &Limits::sockets_per_node, 1024},
    {"cpu-id", &Limits::cpu_id, (1 << 20) - 1},
    {"listed-cpus", &Limits::listed_cpus, 1'000'000'000},
    {"labels", &Limits::labels, 100'000'000},
    {"labels-per-node", &Limits::labels_per_node, 4096},
    {"cell-levels", &Limits::cell_levels, 64},
    // Sums over a cluster stay within int64: lowered, never raised.
    {"node-cpu-milli", &Limits::node_cpu_milli, int64_t{1} << 40},
    {"node-memory-mib", &Limits::node_memory_mib, int64_t{1} << 40},
    {"vc-cell-types", &Limits::vc_cell_types, 1'000'000},
    {"queues", &Limits::queues, 1'000'000},
    {"jobs", &Limits::jobs, 100'000'000},
    {"events", &Limits::events, 100'000'000},
    {"seconds", &Limits::seconds, 1'000'000'000},  // times stay exact in a double
    {"seeds", &Limits::seeds, 1'000'000},
    {"packing-pods", &Limits::packing_pods, 1'000'000'000},
    {"csv-columns", &Limits::csv_columns, 4096},
};

static_assert(sizeof(kBounds) / sizeof(kBounds[0]) == sizeof(Limits) / sizeof(int64_t),
              "every bound of Limits has a row in kBounds");

const Bound& Find(int64_t Limits::*field) {
  for (const Bound& b : kBounds)
    if (b.field == field) return b;
  return kBounds[0];  // unreachable: every field has a row
}

}  // namespace

const Limits& Get() { return current; }

void Set(const Limits& limits) { current = limits; }

std::string Names() {
  std::string names;
  for (const Bound& b : kBounds) names += (names.empty() ? "" : ", ") + std::string(b.name);
  return names;
}

namespace {

// Applies one "NAME=VALUE" to `*limits`.
void Apply(const std::string& name_value, Limits* limits) {
  const size_t eq = name_value.find('=');
  if (eq == std::string::npos)
    throw ConfigError("--limit: expected NAME=VALUE, e.g. --limit nodes=200000, got \"" +
                      name_value + "\"; names: " + Names());
  const std::string name = name_value.substr(0, eq);
  const std::string value = name_value.substr(eq + 1);
  const Bound* bound = nullptr;
  for (const Bound& b : kBounds)
    if (name == b.name) bound = &b;
  if (!bound)
    throw ConfigError("--limit: unknown bound \"" + name + "\"; names: " + Names() +
                      " (docs/cluster-file.md, Bounds)");
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty() || n < 1 ||
      n > bound->ceiling)
    throw ConfigError("--limit " + name + ": expected an integer from 1 to " +
                      std::to_string(bound->ceiling) + ", got \"" + value + "\"" +
                      (Limits{}.*bound->field == bound->ceiling
                           ? " (" + std::to_string(bound->ceiling) +
                                 ", the default, is the most berth handles safely)"
                           : ""));
  limits->*bound->field = n;
}

}  // namespace

void SetFromFlags(const std::vector<std::string>& names_values) {
  Limits next = current;
  for (const std::string& name_value : names_values) Apply(name_value, &next);
  constexpr int64_t kMost = (int64_t{1} << 31) - 1;
  if (next.queues > kMost / next.gpus)
    throw ConfigError(
        "--limit: queues x gpus would be " + std::to_string(next.queues) + " x " +
        std::to_string(next.gpus) + ", more than " + std::to_string(kMost) +
        " (the engine sums the VCs' guarantees in ints); with gpus=" + std::to_string(next.gpus) +
        " queues can be at most " + std::to_string(kMost / next.gpus) + ", with queues=" +
        std::to_string(next.queues) + " gpus at most " + std::to_string(kMost / next.queues));
  current = next;
}

std::string RaiseHint(int64_t Limits::*bound) {
  const Bound& b = Find(bound);
  const int64_t value = current.*bound;
  return value < b.ceiling ? std::string(" (raise it with --limit ") + b.name +
                                 "=N; docs/cluster-file.md, Bounds)"
                           : std::string(" (--limit ") + b.name +
                                 " goes no higher; docs/cluster-file.md, Bounds)";
}

std::string OverLimit(int64_t Limits::*bound, int64_t limit, const std::string& things) {
  return "more than the limit of " + std::to_string(limit) + " " + things + RaiseHint(bound);
}

std::string OverLimit(int64_t Limits::*bound, const std::string& things) {
  return OverLimit(bound, current.*bound, things);
}

}  // namespace berth::limits
