// The REST API of docs/api.md over cpp-httplib: routes, request checks and JSON rendering,
// onto a ControlPlane. Every refusal is a 4xx whose JSON body {"error": "..."} names the field
// or parameter and the fix; nothing is written for a refused request.
#pragma once

#include <httplib.h>

#include <cstddef>

#include "server/access.h"
#include "server/control_plane.h"

namespace berth {

// Bounds on what one request may make the server read or return.
constexpr size_t kMaxRequestBytes = 1 << 20;  // a job spec
constexpr size_t kMaxListLimit = 10000;       // jobs per page of GET /v1/jobs

// `access` names the caller of each route (healthz and readyz need no token: probes call them).
void AddApiRoutes(httplib::Server& server, ControlPlane& plane, const AccessControl& access);

}  // namespace berth
