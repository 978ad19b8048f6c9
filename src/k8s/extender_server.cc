#include "k8s/extender_server.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "k8s/informer.h"
#include "k8s/json_fields.h"
#include "k8s/kube_client.h"
#include "server/listen.h"

namespace berth {
namespace {

using nlohmann::json;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

double WallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The extender's state now, as a registry made for one scrape (the request metrics follow it).
std::string ExtenderStateExposition(const Extender::Status& status) {
  MetricsRegistry out;
  out.DeclareGauge("berth_k8s_nodes", "Nodes berth places pods on.");
  out.Set("berth_k8s_nodes", {}, status.nodes);
  out.DeclareGauge("berth_k8s_gpus", "GPUs on those nodes.");
  out.Set("berth_k8s_gpus", {}, status.gpus);
  out.DeclareGauge("berth_k8s_pods", "GPU pods berth knows, by state (placed, pending).",
                   {"state"});
  out.Set("berth_k8s_pods", {"placed"}, status.placed);
  out.Set("berth_k8s_pods", {"pending"}, status.pending);
  out.DeclareGauge("berth_k8s_unreadable_objects",
                   "Nodes and pods in the API server that berth cannot read, by kind.", {"kind"});
  out.Set("berth_k8s_unreadable_objects", {"node"}, status.unreadable_nodes);
  out.Set("berth_k8s_unreadable_objects", {"pod"}, status.unreadable_pods);
  out.DeclareCounter("berth_k8s_relists_total",
                     "Watches resumed too late (410 Gone) that listed the objects again.");
  out.Add("berth_k8s_relists_total", {}, static_cast<double>(status.relists));
  return out.Expose();
}

}  // namespace

void ConfigureExtenderServer(httplib::Server& server) {
  server.set_payload_max_length(kMaxExtenderRequestBytes);
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(100000);
  server.set_read_timeout(30);
  server.set_write_timeout(30);
  server.new_task_queue = [] { return new httplib::ThreadPool(16); };
  // Refusals of the library itself (a body past the bound: 413) say why, as JSON.
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string why = res.status == 413 ? "the request body is too large: at most " +
                                                    std::to_string(kMaxExtenderRequestBytes >> 20) +
                                                    " MiB, sent as Content-Type: application/json"
                                              : "HTTP " + std::to_string(res.status);
    res.set_content(json{{"Error", why}}.dump(), "application/json");
  });
}

void AddExtenderRoutes(httplib::Server& server, Extender& extender, MetricsRegistry& metrics,
                       const std::atomic<bool>& ready) {
  metrics.DeclareHistogram("berth_k8s_extender_request_duration_seconds",
                           "Time to answer kube-scheduler's extender calls, by verb.", {"verb"},
                           ExponentialBuckets(0.0001, 2, 16));
  metrics.DeclareCounter("berth_k8s_extender_errors_total",
                         "Extender calls answered with an error, by verb.", {"verb"});
  for (const char* verb : {"filter", "prioritize", "preempt", "bind"}) {
    const std::string name = verb;
    server.Post("/k8s/" + name, [&extender, &metrics, name](const httplib::Request& req,
                                                            httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      const json args =
          json::parse(req.body.data(), req.body.data() + req.body.size(), nullptr, false);
      json answer;
      std::string text;  // filter and prioritize answer text
      int status = 200;
      if (args.is_discarded() || !JsonDepthAtMost(args, kMaxKubeObjectDepth)) {
        answer = {{"Error", args.is_discarded()
                                ? "the request body is not JSON; kube-scheduler sends the "
                                  "extender args as JSON"
                                : "the request nests deeper than " +
                                      std::to_string(kMaxKubeObjectDepth) +
                                      " levels, which no Kubernetes object does"}};
        status = name == "filter" || name == "bind" ? 200 : 400;
      } else {
        try {
          if (name == "filter") text = extender.Filter(args);
          if (name == "prioritize") text = extender.Prioritize(args);
          if (name == "preempt") answer = extender.Preempt(args);
          if (name == "bind") answer = extender.Bind(args);
        } catch (const std::exception& e) {
          answer = {{"Error", e.what()}};
          status = 400;
        }
      }
      const std::string no_error = "\"Error\":\"\"}";
      const bool failed =
          status != 200 ||
          (text.empty() ? answer.is_object() && answer.contains("Error") && answer["Error"] != ""
                        : name == "filter" && !text.ends_with(no_error));
      if (failed) metrics.Add("berth_k8s_extender_errors_total", {name});
      res.status = status;
      // Replace: names from pods may hold bytes that are not UTF-8.
      res.set_content(
          text.empty() ? answer.dump(-1, ' ', false, json::error_handler_t::replace) : text,
          "application/json");
      metrics.Observe(
          "berth_k8s_extender_request_duration_seconds", {name},
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    });
  }
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [&ready](const httplib::Request&, httplib::Response& res) {
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "listing nodes and pods\n", "text/plain");
  });
  server.Get("/metrics", [&extender, &metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(ExtenderStateExposition(extender.status()) + metrics.Expose(),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
}

int RunK8sExtender(K8sServerOptions options) {
  std::string host;
  int port = 0;
  SplitListen(options.listen, &host, &port);
  // kube-scheduler cannot send a token to an extender: off loopback, only TLS protects it.
  if (!Loopback(host) && options.tls_cert.empty())
    std::cerr << "berth server: warning: serving the extender on " << host
              << " without TLS; restrict who reaches it (a NetworkPolicy) or give --tls-cert\n";
  const std::unique_ptr<httplib::Server> served = MakeHttpServer(options.tls_cert, options.tls_key);
  httplib::Server& server = *served;
  KubeClient client(options.kube);
  options.extender.clock = WallClock;
  Extender extender(std::move(options.extender), &client);
  MetricsRegistry metrics;
  std::atomic<bool> ready{false};
  ConfigureExtenderServer(server);
  AddExtenderRoutes(server, extender, metrics, ready);
  port = BindServer(server, host, port);
  if (port < 0) {
    std::cerr << "berth server: cannot listen on " << options.listen
              << ": the address is in use or not available; pick another with --listen\n";
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  Informers informers(&client, &extender);
  std::thread sync([&] {
    // Until the API server answers, filters answer "no nodes yet" and /readyz says why.
    double backoff = 1;
    while (!g_stop) {
      const std::string why = informers.Sync();
      if (why.empty()) break;
      std::cerr << "berth server: " << why << "; retrying in " << backoff << " s\n";
      for (int i = 0; i < backoff * 20 && !g_stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      backoff = std::min(backoff * 2, 30.0);
    }
    if (g_stop) {
      server.stop();
      return;
    }
    informers.Start();
    ready = true;
    const Extender::Status status = extender.status();
    std::cout << "berth server: synced with " << options.kube.server << ": " << status.nodes
              << " nodes, " << status.gpus << " GPUs, " << status.pods << " GPU pods ("
              << status.bound << " bound)" << std::endl;
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.stop();
  });
  std::cout << "berth server: Kubernetes extender listening on "
            << (options.tls_cert.empty() ? "http" : "https") << "://" << host << ":" << port
            << "/k8s (API server " << options.kube.server << ")" << std::endl;
  server.listen_after_bind();
  g_stop = true;
  sync.join();
  informers.Stop();
  std::cout << "berth server: stopped" << std::endl;
  return 0;
}

}  // namespace berth
