// The REST API of docs/api.md over cpp-httplib: routes, request checks and JSON rendering,
// onto a ControlPlane. Every refusal is a 4xx whose JSON body {"error": "..."} names the field
// or parameter and the fix; nothing is written for a refused request.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "server/access.h"
#include "server/control_plane.h"
#include "server/metrics.h"
#include "server/request_deadline.h"

namespace berth {

// Bounds on what one request may make the server read or return.
constexpr size_t kMaxRequestBytes = 1 << 20;  // a job spec
constexpr size_t kMaxListLimit = 10000;       // jobs or events per page
constexpr int kMaxWatches = 32;               // event watches at once, each holding a worker
constexpr int kMaxWatchesPerUser = 8;         // of them, held by one token's user
constexpr int kWatchHeartbeatS = 5;           // an empty line after this long without events
constexpr int kPlainFollowQuietS = 60;        // a plain-text log follow ends after this quiet
constexpr int kMaxAssignmentWaitS = 30;       // an agent's watch of its assignments
constexpr int kReadTimeoutS = 10;             // a stalled request's wait for more data

// The bounded watches (event watches and log follows), each holding a worker while it lasts:
// kMaxWatches in all, and kMaxWatchesPerUser for one user of a token, so that one user's
// terminals cannot take every watch from the others. Callers without a user (a server without
// tokens, where every caller is a trusted admin) share the whole.
class WatchSlots {
 public:
  // One for `user`; ApiError 429 when the user holds their share, 503 when all are taken.
  void Take(const std::string& user);
  void Give(const std::string& user);

 private:
  std::mutex mu_;
  int taken_ = 0;
  std::map<std::string, int> by_user_;
};

// What the routes share across requests; the server keeps it for as long as it serves.
struct ApiContext {
  ApiContext(ControlPlane& plane, const AccessControl& access);
  ControlPlane& plane;
  const AccessControl& access;          // names the caller of each route but healthz and readyz
  RequestDeadline* deadline = nullptr;  // told when each request is handled and answered
  WatchSlots watches;
  std::atomic<int> assignment_watches{0};
  int max_assignment_watches = 0;  // one a node; the server has a worker for each
  MetricsRegistry requests;        // the API's request durations, for GET /metrics
};

// Every route of docs/api.md, GET /metrics (Prometheus' text format: the control plane's state
// and the request durations) included. Sets the server's pre-routing handler and logger, which
// time each request and restart its connection's deadline: nothing else may set them.
void AddApiRoutes(httplib::Server& server, ApiContext& api);
void NoteRequestStart();
void RecordRequest(MetricsRegistry& requests, const httplib::Request& req,
                   const httplib::Response& res);
// The route pattern of a request's path as the metrics label it ("/v1/jobs/{id}"), "other"
// for a path no route serves: never the path itself, so that clients cannot grow the metrics
// by asking for new URLs.
std::string RouteLabel(const std::string& path);
// The families the API declares for its requests (berth_api_request_duration_seconds).
void DeclareRequestMetrics(MetricsRegistry& requests);
// The whole exposition: the control plane's state now, then `requests`.
std::string MetricsExposition(const ControlPlane& plane, const MetricsRegistry& requests);

}  // namespace berth
