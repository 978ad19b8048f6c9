// What the server and its node agents say to each other (docs/api.md, "Agent protocol"): plain
// structs and their JSON. The server holds the desired state; each agent converges its node's
// containers to it and reports what is really there, and the server derives the jobs' states
// from those reports.
//
//  - Register: the agent names its node and GPUs (by UUID, index order) once per connection.
//  - Assignments: the replicas the node should run, whole (level-triggered: an agent that
//    missed changes needs only the latest set). Each set has a version; a watch with the
//    version last seen returns as soon as the set differs from it, or after a wait. Versions
//    start at the server's start time in microseconds and only grow, so a restarted server never
//    gives a version an agent saw from its predecessor.
//  - Report (the heartbeat): every berth container on the node with its state, the newest
//    assignment version the agent has fully acted on, new log lines, images. A replica the
//    node should run that no report of an acted-on version lists is gone (lost).
//
// Each replica run is named by (job, replica, placement): `placement` is fixed when the job is
// placed, so a container left from an earlier placement of the same job is never mistaken for
// the current one. Every list and text here is bounded when parsed (kMax*), so that an agent,
// or anyone holding an agent token, cannot exhaust the server.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/telemetry.h"
#include "protocol/log_frames.h"

namespace berth {

constexpr size_t kMaxReportContainers = 1024;
constexpr size_t kMaxReportLogBytes = 512 << 10;  // log text per report
constexpr size_t kMaxRegisteredGpus = 64;
constexpr size_t kMaxRegisteredSockets = 64;
constexpr size_t kMaxSocketCpus = 4096;
constexpr size_t kMaxReportImages = 1024;  // a node's images
constexpr size_t kMaxImageNames = 64;      // tags of one image
constexpr size_t kMaxPrefetchImages = 64;  // images a node is asked to pull ahead
constexpr size_t kMaxImageLayers = 256;    // the engine's own limit is 127
constexpr int64_t kMaxLayerBytes = int64_t{1} << 40;
constexpr size_t kMaxOffGpusText = 1024;   // ContainerReport::off_gpus
constexpr size_t kMaxRuntimeError = 1024;  // AgentReport::runtime_error
constexpr size_t kMaxNodeLabels = 64;      // a registered node's labels
constexpr size_t kMaxLabelLength = 253;    // a label's key or value, as a cluster file allows
// What an agent lets a report's images take (their JSON), so that a node with many images still
// reports within the server's request size with its logs: the rest are left out.
constexpr size_t kMaxReportImageBytes = 256 << 10;
// The largest measures a report may carry (ParseReport refuses the whole report past them, so
// the agent keeps its values within).
constexpr double kMaxReportMiB = 1e9;          // a GPU's memory used or free
constexpr double kMaxReportXid = 1e9;          // an XID error code
constexpr double kMaxReportCounter = 1e19;     // a byte, period or traffic count or rate
constexpr double kMaxReportPercent = 1e6;      // a container's CPU or memory use
constexpr double kMaxReportIoLatencyMs = 1e9;  // a container's mean IO service time

// Why a node label cannot be registered ("" when it can): a key of 1 to kMaxLabelLength
// letters, digits, '-', '.', '_' or '/', a value of at most kMaxLabelLength printable ASCII
// characters. The agent checks its labels with it before it registers; the server again.
std::string WhyBadNodeLabel(const std::string& key, const std::string& value);

// A protocol message that does not parse: the field and what is wrong.
struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One MIG instance of a node's GPU: where a MIG slice berth places there (its profile and
// start slot) runs, by the instance's UUID.
struct RegisteredMig {
  int gpu = 0;          // index on the node
  std::string profile;  // "3g.40gb"
  int start = 0;        // first memory slot
  std::string uuid;     // "MIG-..."
};

struct NodeRegistration {
  std::vector<std::string> gpu_uuids;  // index order
  std::vector<RegisteredMig> migs;     // at most kMaxRegisteredGpus x kMigComputeSlices
  bool simulated = false;              // GPUs declared (--declare), not found on the host
  std::string agent_version;
  // The agent process (random, drawn at its start; "" from older agents) and how often it
  // reports (0: not said). A second process registering under a node name whose agent still
  // reports is refused: the node's jobs would run on both.
  std::string instance;
  int64_t report_every_ms = 0;
  // The Docker engine the agent runs containers on (DockerClient::EngineIdentity; "" when it
  // could not be reached). An agent replaced by another process learns whether that one shares its
  // engine: on a shared engine the new agent adopts the containers; on another, the old agent's
  // containers would run the node's jobs a second time, so it stops them.
  std::string engine;
  // The node as the agent found it on the host (GPU discovery): its labels (berth agent
  // --label), sockets (NUMA nodes) with their CPUs, PCIe switches, and GPUs with model, switch,
  // NVLink domain, MIG mode and layout. None for declared GPUs. The server compares it with the
  // cluster file's node: where they differ, jobs would be pinned to CPUs away from their GPUs (the
  // node's topology condition).
  std::optional<Node> found;
  // The node as its --declare file gives it (simulated GPUs), in the same terms; none for
  // found GPUs. Nothing to compare: the server takes it only when the node joins.
  std::optional<Node> declared;
  // The GPU models of the node (found or declared); MIG profiles are berth's built-in ones, so
  // only whether the model has them is sent. A server that lets nodes join (berth server
  // --cluster none) adds a node it does not have as the agent gives it.
  std::vector<GpuModel> models;
};

struct Mounted {
  std::string host, container;
  bool read_only = false;
};

// One replica the node should run.
struct Assignment {
  int64_t job = 0;
  int replica = 0;        // index over the job's replicas, in group order
  std::string placement;  // fixed per placement of the job
  std::string name;       // the job's name
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<Mounted> mounts;
  int64_t shm_bytes = 0, memory_bytes = 0, nano_cpus = 0;
  std::vector<int> gpus;  // indices on the node
  // The same GPUs by UUID (from registration); for a MIG slice, its instance's (a MIG- UUID)
  // where the node registered one at the slice's place, else the GPU's.
  std::vector<std::string> gpu_uuids;
  std::string mig_profile;  // set for a MIG slice of gpus[0]: its profile and start slot
  int mig_start = -1;
  std::string cpuset_cpus, cpuset_mems;  // the GPUs' NUMA-local CPUs and memory
  int grace_s = 30;
  std::string log_since;  // the last log timestamp the server holds of this replica
  // The server has had a report of this run's container: an agent that finds none (removed
  // while the agent was down) does not make another but reports it gone, so that the job is
  // placed again as `lost` rather than run a second time under the same placement unseen.
  bool ran = false;
};

struct AssignmentSet {
  uint64_t version = 0;
  std::vector<Assignment> assignments;
  // Images to pull ahead: those of jobs that will land on this node and wait to (their
  // reservation, or a preemptor's plan while its victims stop), so that the pull overlaps the
  // wait. At most kMaxPrefetchImages.
  std::vector<std::string> prefetch;
};

struct ContainerReport {
  int64_t job = 0;
  int replica = 0;
  std::string placement;
  // "starting" (pulling or creating), "running", "exited", "failed" (could not be started:
  // `error` says why), or "interrupted": it exited after its engine signalled it unasked by
  // the agent (the engine's own shutdown stops its containers unless it runs with
  // live-restore; or a `docker stop` by hand), so its exit says nothing of the job, which is
  // placed again.
  std::string state;
  int exit_code = 0;
  std::string error;
  std::string container_id;
  // Seconds each start phase took: "pull", "create", "start" (cold-start attribution).
  std::map<std::string, double> phases;
  // Contention of a running container, from its cgroup between two heartbeats (-1 and
  // "unknown" when not measured): CPU use in % of its quota, memory in % of its limit, the mean
  // IO service time; each graded "low", "medium" or "high".
  double cpu_percent = -1, memory_percent = -1, io_latency_ms = -1;
  std::string cpu_grade = "unknown", memory_grade = "unknown", io_grade = "unknown";
  // Bytes received and sent since the container started, on its network namespace's
  // interfaces but lo (-1: not measured).
  double net_rx_bytes = -1, net_tx_bytes = -1;
  // Its cgroup as last read (-1: not there): CPU periods throttled and seconds throttled, bytes
  // read and written, since it started; memory in use and its limit; and on cgroup v2 the
  // pressure stall share ("some avg10", % of the last 10 s) of CPU, memory and IO.
  double cpu_throttled_periods = -1, cpu_throttled_seconds = -1;
  double io_read_bytes = -1, io_write_bytes = -1;
  double memory_bytes = -1, memory_limit_bytes = -1;
  double cpu_pressure = -1, memory_pressure = -1, io_pressure = -1;
  // Set when the container runs on CPUs away from its GPUs' NUMA node (the engine refused to
  // move it there): how, at most kMaxOffGpusText bytes. The node's condition on the server.
  std::string off_gpus;
};

// One GPU as a DCGM exporter saw it (-1: not reported).
struct GpuReport {
  int gpu = 0;  // index on the node
  double fb_used_mib = -1, fb_free_mib = -1, util_percent = -1, sm_active = -1;
  double xid = -1;  // the last XID error, 0 for none
  // Traffic as DCGM reads it: its counter of NVLink bandwidth over all lanes, and the PCIe
  // bytes per second sent and received.
  double nvlink_total = -1, pcie_tx_bytes = -1, pcie_rx_bytes = -1;
};

// One of the node's images: its names (tags; none for an untagged one) and layers.
struct ReportedImage {
  std::vector<std::string> names;
  std::vector<ImageLayer> layers;
};

struct LogChunk {
  int64_t job = 0;
  int replica = 0;
  std::string placement;
  // The timestamp the agent read on from: where it last knew the server's copy to end ("" for
  // the run's start). The server takes the chunk only when its copy ends there, so that a chunk
  // overlapping what it holds (a report it took whose answer the agent never got) repeats no
  // line; otherwise it answers where its copy ends (ReportReply), and the agent reads from there.
  // None from an agent older than that: its chunk is taken when it ends after the server's copy.
  std::optional<std::string> from;
  std::string until;         // the timestamp of the chunk's last line
  std::string text;          // the bytes the job wrote (JSON: `text`, or `textBase64`)
  StderrSpans stderr_spans;  // what of `text` the job wrote to stderr
};

struct AgentReport {
  std::string instance;          // the reporting agent process (NodeRegistration::instance)
  uint64_t applied_version = 0;  // every assignment of this version has been acted on
  std::vector<ContainerReport> containers;
  std::vector<LogChunk> logs;
  std::vector<GpuReport> gpus;  // empty without a DCGM exporter
  // Every image on the node; none when they are as last reported to this server (an agent sends
  // them when they change, and again after registering).
  std::optional<std::vector<ReportedImage>> images;
  // Set when the agent cannot reach its container engine (why: one line of UTF-8 without
  // control characters, at most kMaxRuntimeError bytes). It then knows nothing of its containers:
  // `containers` and `logs` are empty and say nothing about them (the server must not read them as
  // gone); only `gpus` count.
  std::string runtime_error;
};

// Where the server's copy of a replica run's log ends (its last line's timestamp; "" for none).
struct LogCursor {
  int64_t job = 0;
  int replica = 0;
  std::string placement;
  std::string cursor;
};

// The server's answer to a report it took.
struct ReportReply {
  // The runs whose chunk it did not take because the chunk did not start where its copy ends.
  // A run named here has not sent all its output, even when its container has exited.
  std::vector<LogCursor> log_cursors;
  // The runs of the report's chunks whose job's log is full (LogStore::kMaxJobLogBytes): the
  // server keeps no more of it, and the agent need read and send no more.
  std::vector<LogCursor> logs_full;
};

// An RFC 3339 UTC timestamp with its fraction padded to nine digits
// ("2026-12-02T03:40:46.898183200Z"), so that timestamps compare as strings (the engine trims
// trailing zeros). "" when `ts` is not one.
std::string NormalizedTimestamp(const std::string& ts);

// Whether `text` is all UTF-8. A report's JSON carries a log chunk's text as it is when it is,
// else in base64 (`textBase64`), so that output reaches `berth logs` byte for byte.
bool IsUtf8(const std::string& text);
// `text` with each byte that is not UTF-8 replaced by U+FFFD: what an agent sends a server that
// does not take base64 chunks (one older than the registration answer's `binaryLogs`).
std::string ValidUtf8(std::string text);

// `error` as AgentReport::runtime_error takes it: control characters made spaces, invalid UTF-8
// replaced, and cut between characters to kMaxRuntimeError bytes.
std::string RuntimeErrorLine(std::string error);

nlohmann::json ToJson(const NodeRegistration& r);
nlohmann::json ToJson(const AssignmentSet& s);
nlohmann::json ToJson(const AgentReport& r);
nlohmann::json ToJson(const ReportReply& r);
// Throw ProtocolError naming the field.
NodeRegistration ParseRegistration(const nlohmann::json& j);
AssignmentSet ParseAssignments(const nlohmann::json& j);
AgentReport ParseReport(const nlohmann::json& j);
ReportReply ParseReportReply(const nlohmann::json& j);

}  // namespace berth
