// `berth bench k8s`: how fast the extender answers kube-scheduler with thousands of nodes in
// each request, as kube-scheduler sends them with percentageOfNodesToScore: 100. Filter and
// prioritize are timed over HTTP on loopback (what kube-scheduler waits for) and, side by side,
// as calls in the process (the engine and JSON alone), on a cluster filled to --fill first.
#include <httplib.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "core/policy.h"
#include "k8s/extender_server.h"

namespace berth {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchK8sArgs {
  int nodes = 5000;
  int calls = 1000;
  double fill = 0.5;
  int pending = 0;
  bool node_objects = false;
  bool json = false;
};

// The bench has no API server: bindings and deletions are counted, not sent.
class CountingActions : public KubeActions {
 public:
  std::string Bind(const std::string&, const std::string&, const std::string&,
                   const std::map<std::string, std::string>&) override {
    ++bindings;
    return "";
  }
  std::string DeletePod(const std::string&, const std::string&, double) override {
    ++deletions;
    return "";
  }
  std::atomic<int> bindings{0}, deletions{0};
};

json Node(int i) {
  const std::string name = "gpu-" + std::to_string(i);
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"berth.io/rack", "rack-" + std::to_string(i / 32)},
              {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
              {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/gpu.memory", "81920"}}}}},
          {"status",
           {{"allocatable", {{"cpu", "128"}, {"memory", "1024Gi"}, {"nvidia.com/gpu", "8"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json Pod(int i, int gpus) {
  const std::string name = "bench-" + std::to_string(i);
  return {{"metadata", {{"name", name}, {"namespace", "bench"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"containers",
             {{{"name", "main"},
               {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

struct Timing {
  std::vector<double> ms;
  json Summary() const {
    return {{"calls", ms.size()},
            {"p50_ms", Percentile(ms, 0.5)},
            {"p99_ms", Percentile(ms, 0.99)},
            {"max_ms", Percentile(ms, 1.0)}};
  }
};

void RunBenchK8s(const BenchK8sArgs& a) {
  CountingActions actions;
  ExtenderOptions options;
  BuiltinPolicy("berth", &options.policy);
  options.clock = [] {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  Extender extender(std::move(options), &actions);
  std::vector<json> nodes;
  json names = json::array();
  for (int i = 0; i < a.nodes; ++i) {
    nodes.push_back(Node(i));
    names.push_back(nodes.back()["metadata"]["name"]);
  }
  extender.SetNodes(nodes);
  const auto args = [&](const json& pod) {
    if (!a.node_objects) return json{{"Pod", pod}, {"NodeNames", names}, {"Nodes", nullptr}};
    return json{{"Pod", pod}, {"Nodes", {{"items", nodes}}}, {"NodeNames", nullptr}};
  };

  // Fill: 8-GPU and smaller pods until the share of GPUs is held, bound as kube-scheduler would.
  const int fill_gpus = static_cast<int>(a.fill * 8 * a.nodes);
  int held = 0, next = 0;
  if (!a.json)
    std::cerr << "bench k8s: filling " << fill_gpus << " of " << 8 * a.nodes << " GPUs\n";
  while (held < fill_gpus) {
    const int gpus = 1 << (next % 4);
    const json pod = Pod(next++, gpus);
    extender.PodChanged(pod);
    const json filtered = json::parse(extender.Filter({{"Pod", pod}, {"NodeNames", names}}));
    if (filtered["NodeNames"].empty()) break;
    held += gpus;
  }
  // A backlog: 8-GPU pods past what is left, each filtered once as kube-scheduler first tries
  // it; those that find no room wait in berth's queue while the timed pods are filtered.
  for (int i = 0; i < a.pending; ++i) {
    const json pod = Pod(next++, 8);
    extender.PodChanged(pod);
    extender.Filter({{"Pod", pod}, {"NodeNames", names}});
  }

  MetricsRegistry metrics;
  std::atomic<bool> ready{true};
  httplib::Server server;
  ConfigureExtenderServer(server);
  AddExtenderRoutes(server, extender, metrics, ready);
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_read_timeout(60);

  Timing http_filter, http_prioritize, local_filter, local_prioritize;
  int failed = 0;
  const auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  for (int call = 0; call < a.calls; ++call) {
    // Alternate: one pod over HTTP, the next in the process, so that both see the same cluster.
    const json pod = Pod(next++, 1 << (call % 3));
    extender.PodChanged(pod);
    const std::string body = args(pod).dump();
    if (call % 2 == 0) {
      auto t0 = Clock::now();
      const auto res = client.Post("/k8s/filter", body, "application/json");
      http_filter.ms.push_back(ms_since(t0));
      if (!res || res->status != 200) ++failed;
      t0 = Clock::now();
      const auto scores = client.Post("/k8s/prioritize", body, "application/json");
      http_prioritize.ms.push_back(ms_since(t0));
      if (!scores || scores->status != 200) ++failed;
    } else {
      // The same work without the socket: parse, answer, serialize.
      auto t0 = Clock::now();
      std::string answer = extender.Filter(json::parse(body));
      local_filter.ms.push_back(ms_since(t0));
      t0 = Clock::now();
      answer = extender.Prioritize(json::parse(body));
      local_prioritize.ms.push_back(ms_since(t0));
    }
    if (!a.json && (call + 1) % 200 == 0)
      std::cerr << "bench k8s: " << call + 1 << " / " << a.calls << " calls\n";
  }
  server.stop();
  serving.join();
  const Extender::Status status = extender.status();
  const json report = {{"nodes", a.nodes},
                       {"gpus", status.gpus},
                       {"request", a.node_objects ? "Nodes" : "NodeNames"},
                       {"request_bytes", args(Pod(0, 1)).dump().size()},
                       {"gpus_held_before", held},
                       {"pods_pending", status.pending},
                       {"pods_placed", status.placed},
                       {"failed_calls", failed},
                       {"http_filter", http_filter.Summary()},
                       {"http_prioritize", http_prioritize.Summary()},
                       {"in_process_filter", local_filter.Summary()},
                       {"in_process_prioritize", local_prioritize.Summary()}};
  if (a.json) {
    std::cout << JsonText(report) << "\n";
    return;
  }
  std::cout << "extender with " << a.nodes << " nodes (" << status.gpus << " GPUs, " << held
            << " held before, " << status.pending << " pods pending), "
            << report["request"].get<std::string>() << " requests of "
            << report["request_bytes"].get<size_t>() / 1024 << " KiB, " << failed
            << " failed calls\n"
            << "verb                    p50 ms    p99 ms    max ms\n"
            << std::fixed << std::setprecision(2);
  for (const char* key :
       {"http_filter", "http_prioritize", "in_process_filter", "in_process_prioritize"}) {
    const json& t = report[key];
    std::cout << std::left << std::setw(22) << key << std::right << std::setw(8)
              << t["p50_ms"].get<double>() << std::setw(10) << t["p99_ms"].get<double>()
              << std::setw(10) << t["max_ms"].get<double>() << "\n";
  }
}

}  // namespace

void AddBenchK8sCommand(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "k8s", "The Kubernetes extender's filter and prioritize latency at thousands of nodes");
  auto a = std::make_shared<BenchK8sArgs>();
  cmd->add_option("--nodes", a->nodes, "8-GPU nodes in the cluster and in each request, 1 to 20000")
      ->check(IntegerIn(1, 20000))
      ->capture_default_str();
  cmd->add_option("--calls", a->calls, "Pods filtered and prioritized, 1 to 100000")
      ->check(IntegerIn(1, 100000))
      ->capture_default_str();
  cmd->add_option("--fill", a->fill, "Share of the GPUs held before timing, 0 to 0.9")
      ->check(NumberIn(0.0, 0.9))
      ->capture_default_str();
  cmd->add_option("--pending", a->pending,
                  "8-GPU pods added after the fill, 0 to 100000: those past the room left wait "
                  "while the timed pods are filtered")
      ->check(IntegerIn(0, 100000))
      ->capture_default_str();
  cmd->add_flag("--node-objects", a->node_objects,
                "Send full Node objects (nodeCacheCapable: false) instead of NodeNames");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { RunBenchK8s(*a); });
}

}  // namespace berth
