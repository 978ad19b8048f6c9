// `berth server`: the control plane as a long-running process. Opens the state, rebuilds the
// engine from it, then serves the API (http_api.h) and runs scheduling cycles until SIGINT or
// SIGTERM: one as soon as there is new work (a job to place, GPUs freed), else every
// cycle_interval_s (time-driven work: aging, back-off, agents' silence).
//
// Without tokens every caller is an admin, so the server then listens on loopback only; any
// other address needs both tokens and TLS (access.h).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "config/tokens_file.h"
#include "server/control_plane.h"

namespace berth {

struct ServerOptions {
  std::string listen = "127.0.0.1:7480";  // HOST:PORT; port 0 picks a free port
  std::string state_dir;
  ControlPlaneConfig config;
  std::vector<TokenEntry> tokens;  // none: no tokens asked, every caller an admin
  std::string tls_cert, tls_key;   // PEM files; none: plain HTTP
  double cycle_interval_s = 0.1;
  // From the end of one answer (or the connection) to the whole next request, headers and
  // body; a slower client is disconnected (request_deadline.h).
  double request_timeout_s = 30;
  // Run beside the server once it listens (berth up: the local node's agent), given the API's
  // URL; it returns once `stop` is set, and the server waits for it before returning. One that
  // returns non-zero before (it had to end: an agent replaced by another process) stops the
  // server, which then returns 1.
  std::function<int(const std::string& url, const std::atomic<bool>& stop)> companion;
};

// Serves until a signal stops it; returns the process exit code. Prints where it listens on
// stdout once it accepts connections. Throws StoreError or ApiError when it cannot start.
int RunServer(ServerOptions options);

}  // namespace berth
