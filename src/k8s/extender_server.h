// `berth server --k8s`: the extender's verbs over HTTP for kube-scheduler, fed by informers on
// the API server. Routes (POST, JSON, always 200 with the Error field when the verb has one):
//   /k8s/filter /k8s/prioritize /k8s/preempt /k8s/bind
// and GET /healthz, /readyz (ready once the first lists are in), /metrics.
// A malformed prioritize or preempt request answers 400 with {"Error": "..."}: their result
// types have no error field.
#pragma once

#include <httplib.h>

#include <string>

#include "config/kubeconfig.h"
#include "k8s/extender.h"
#include "server/metrics.h"

namespace berth {

constexpr size_t kMaxExtenderRequestBytes = 64 << 20;  // 5,000 full Node objects

struct K8sServerOptions {
  std::string listen = "127.0.0.1:8888";
  KubeConfig kube;
  ExtenderOptions extender;
  std::string tls_cert, tls_key;
};

// The server settings the extender needs: request size bound, TCP_NODELAY (else delayed ACKs
// add 40 ms to each answer) and long keep-alive (kube-scheduler reuses its connection).
void ConfigureExtenderServer(httplib::Server& server);

// Declares the extender's metric families in `metrics`, and adds the routes.
void AddExtenderRoutes(httplib::Server& server, Extender& extender, MetricsRegistry& metrics,
                       const std::atomic<bool>& ready);

// Serves until SIGINT or SIGTERM; prints where it listens. Returns the exit code.
int RunK8sExtender(K8sServerOptions options);

}  // namespace berth
