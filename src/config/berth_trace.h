// Loads a berth trace (YAML; the format is docs/simulator.md, "The berth trace"): the queues,
// jobs and events of a what-if scenario, checked against the cluster it replays on (node names,
// GPU indices, GPU models, MIG profiles) and against its own queues (a job's queue, a cancelled
// job's name and submit time).
//
// Every size is bounded (the file, queues, jobs, events, task groups, lists, names, numbers), so
// a typo cannot exhaust memory. Any mistake throws ConfigError "FILE:LINE: FIELD.PATH: what is
// wrong; how to fix it"; unknown fields are refused.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/scheduler.h"
#include "sim/replay.h"

namespace berth {

struct BerthTrace {
  std::vector<QueueSpec> queues;  // never empty: the trace's, else those given, else "default"
  std::vector<ReplayJob> jobs;    // in file order; names are unique
  std::vector<ReplayEvent> events;
};

// `given` are queues from elsewhere (a VC file): used when the trace has none; a trace with its
// own `queues` may not be given others as well.
BerthTrace LoadBerthTrace(const std::string& path, const Cluster& cluster,
                          const std::vector<QueueSpec>& given);

// As LoadBerthTrace, for text already in memory; `source_name` stands for the file in messages.
BerthTrace ParseBerthTraceYaml(const std::string& text, const std::string& source_name,
                               const Cluster& cluster, const std::vector<QueueSpec>& given);

// A job spec as the server takes it (POST /v1/jobs, `berth run -f`): one job of a trace's
// `jobs` list, JSON or YAML, without the replay's submit, duration and workload, and with each
// group's `command` (a list of arguments) and `env` (a map) for its containers. The queue must
// be one of `queues`. Throws ConfigError "SOURCE:LINE:COLUMN: FIELD: ...". `strict_booleans`
// (a new submission) takes only true or false, unquoted, for a boolean (YamlReader::StrictBool);
// without it (a spec stored by a berth that took YAML 1.1's yes and "true") they are read as
// they were accepted.
JobSpec ParseJobSubmission(const std::string& text, const std::string& source_name,
                           const Cluster& cluster, const std::vector<QueueSpec>& queues,
                           bool strict_booleans);

}  // namespace berth
