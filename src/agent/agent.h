// `berth agent`: one node's agent. It registers the node's GPUs with the server, watches the
// node's assignments (agent_protocol.h), converges the node's containers to them through the
// Docker Engine API, and reports every heartbeat what really runs, with new log lines.
//
// Contract:
//  - Only containers labelled berth.node=<node> are the agent's: several agents (node names)
//    may share one Docker engine, each managing its own.
//  - A replica the server assigns and no container runs is started (pulling its image first,
//    with progress); a container the server no longer assigns is stopped with the job's grace
//    period (SIGTERM, then SIGKILL) and removed once stopped. A replica's container that exited
//    is kept (its exit code reported) until the server stops assigning it.
//  - Up to 4 replicas start at once, on workers apart from the loop that converges the node, so
//    that a replica assigned meanwhile starts at once; one no longer assigned when its turn
//    comes is not started. A report says an assignment version was acted on only once every
//    replica it may have assigned has started (or failed to for a reason of its own): a start
//    that found the engine gone is made again, and holds the version back until then.
//  - A container left created (an agent or engine stopped mid-start) is started if still
//    assigned, else removed; one the engine cannot start is removed and created again.
//  - After a restart the agent adopts the containers it finds by their labels: nothing is
//    started twice, and its log cursors come back from the server.
//  - A replaced agent (another process registered as the node) ends: see RunAgent.
//  - Lost connections are retried with jittered back-off (0.1 s doubling to 10 s), so that
//    agents do not reconnect in step after a server restart; so is a stopped Docker engine.
//  - Telemetry with each heartbeat: each GPU as a DCGM exporter sees it (matched to the node's
//    GPUs by UUID, else by index), and each running container's contention from its cgroup
//    (cgroup_stats.h) between two heartbeats.
//  - Simulated GPUs (hosts without GPUs): containers get NVIDIA_VISIBLE_DEVICES and
//    CUDA_VISIBLE_DEVICES naming their GPUs, and no device request.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "protocol/agent_protocol.h"

namespace berth {

inline constexpr int kMaxKeepFailed = 1000;

struct AgentOptions {
  std::string server;   // http://HOST:PORT or https://...
  std::string token;    // the agent's bearer token; "" for a server without tokens
  std::string ca_cert;  // PEM file to trust for https; "": the system's
  std::string node;
  std::string docker_socket = "/var/run/docker.sock";
  std::vector<std::string> gpu_uuids;  // the node's GPUs in index order
  std::vector<RegisteredMig> migs;     // their MIG instances, from discovery
  bool simulated = false;
  std::optional<Node> found;     // the node as GPU discovery found it; none for declared GPUs
  std::optional<Node> declared;  // the node as the --declare file gives it; none for found GPUs
  std::vector<GpuModel> models;  // the node's GPU models (found or declared)
  double heartbeat_s = 1;
  // A DCGM exporter's metrics URL (http://HOST:PORT/metrics), scraped each heartbeat; "": none.
  std::string dcgm_url;
  // Without one, the GPUs' memory and utilization are sampled through this NVML library (a
  // dlopen name: nvml.h's kNvmlLibrary) each heartbeat; "": none (simulated GPUs).
  std::string nvml_library;
  std::string cgroup_root = "/sys/fs/cgroup";  // where the containers' cgroups are
  std::string proc_root = "/proc";             // where their processes' network counters are
  // How many containers that failed to keep once their jobs end (the newest; 0..kMaxKeepFailed),
  // for `docker logs` and `docker inspect`; the others are removed once their output is sent.
  int keep_failed = 0;
  // Where progress and problems are written (a line each); none: standard error.
  std::function<void(const std::string&)> log;
};

// Runs until `stop` is set. Returns 0, or 1 when the server refuses the node for good (not in
// its cluster, other GPUs) or another agent process has registered as the node since this one
// last reached the server (it was paused, or cut off, for three report periods), having said
// why through `log`. A replaced agent stops converging at once; when the new agent runs on
// another Docker engine, it stops and removes the node's containers on its own engine first,
// so that the node's jobs run once.

int RunAgent(const AgentOptions& options, const std::atomic<bool>& stop);

}  // namespace berth
