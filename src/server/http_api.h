// The REST API of docs/api.md over cpp-httplib: routes, request checks and JSON rendering,
// onto a ControlPlane. Every refusal is a 4xx whose JSON body {"error": "..."} names the field
// or parameter and the fix; nothing is written for a refused request.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>

#include "server/access.h"
#include "server/control_plane.h"

namespace berth {

// Bounds on what one request may make the server read or return.
constexpr size_t kMaxRequestBytes = 1 << 20;  // a job spec
constexpr size_t kMaxListLimit = 10000;       // jobs or events per page
constexpr int kMaxWatches = 32;               // event watches at once, each holding a worker
constexpr int kWatchHeartbeatS = 5;           // an empty line after this long without events

// What the routes share across requests; the server keeps it for as long as it serves.
struct ApiContext {
  ControlPlane& plane;
  const AccessControl& access;  // names the caller of each route but healthz and readyz
  std::atomic<int> watches{0};  // event watches in progress
};

void AddApiRoutes(httplib::Server& server, ApiContext& api);

}  // namespace berth
