// `berth agent` (a node's agent, src/agent), `berth up` (the server and a local agent in one
// process: the embedded default for one machine) and `berth device-plugin` (kubelet's device
// plugin on a Kubernetes node, src/k8s/deviceplugin): the commands that run on a GPU node.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/local_node.h"
#include "agent/nvml.h"
#include "cli/commands.h"
#include "cli/policy_argument.h"
#include "config/cluster_file.h"
#include "config/config_error.h"
#include "config/kubeconfig.h"
#include "k8s/deviceplugin/device_plugin.h"
#include "k8s/gpu_ids_signature.h"
#include "k8s/kube_client.h"
#include "protocol/agent_protocol.h"
#include "server/server.h"

namespace berth {
namespace {

std::atomic<bool> g_agent_stop{false};
void OnAgentSignal(int) { g_agent_stop = true; }

// The MIG instances of discovered GPUs as the agent registers them: those berth laid out.
std::vector<RegisteredMig> MigsOf(const DiscoveredNode& found) {
  std::vector<RegisteredMig> out;
  for (const MigDevice& d : found.mig_devices)
    if (d.start >= 0) out.push_back({d.gpu, d.profile, d.start, d.uuid});
  return out;
}

// The node as a cluster file declares it (hosts without GPUs), with the file's GPU models of
// its GPUs.
Node DeclaredNode(const std::string& file, const std::string& node,
                  std::vector<GpuModel>* models = nullptr) {
  const Cluster cluster = LoadClusterFile(file);
  const int n = cluster.FindNode(node);
  if (n < 0)
    throw ConfigError(file + ": declares no node \"" + node +
                      "\"; give --node a name the file declares");
  if (models)
    for (const GpuModel& m : cluster.models)
      for (const Gpu& g : cluster.nodes[n].gpus)
        if (g.model == m.name) {
          models->push_back(m);
          break;
        }
  return cluster.nodes[n];
}

std::vector<std::string> DeclaredUuids(const std::string& file, const std::string& node) {
  return SimulatedUuids(node, DeclaredNode(file, node).gpus.size());
}

// The UUIDs of this node's GPUs as they are now: nvidia-smi's, or those of the declare file.
std::vector<std::string> CurrentUuids(const std::string& node, const std::string& declare) {
  if (!declare.empty()) return DeclaredUuids(declare, node);
  std::string why;
  const std::optional<DiscoveredNode> found = DiscoverGpus(node, &why);
  if (!found)
    throw ConfigError("no GPUs found on this host (" + why +
                      "); on a host without GPUs, declare simulated ones with --declare "
                      "CLUSTER_FILE (a cluster file naming this node)");
  return found->gpu_uuids;
}

struct DevicePluginArgs {
  std::string node, kubeconfig, declare;
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string resource = "nvidia.com/gpu";
  std::string share_resource = kGpuShareResource;
  int share_seats = 16;
  std::string signing_key_file;
};

// Serves until SIGINT/SIGTERM. kubelet deletes the plugins' sockets when it restarts, and a
// plugin comes back by serving and registering again; a first start that fails is an error.
void RunDevicePlugin(const DevicePluginArgs& a) {
  DevicePluginOptions options;
  options.node = a.node;
  options.plugin_dir = a.plugin_dir;
  options.resource = a.resource;
  options.share_resource = a.share_resource;
  options.share_seats = a.share_seats;
  if (!a.signing_key_file.empty()) options.signing_key = ReadSigningKey(a.signing_key_file);
  options.gpu_uuids = CurrentUuids(a.node, a.declare);
  options.list_gpus = [a] { return CurrentUuids(a.node, a.declare); };
  KubeClient kube(a.kubeconfig.empty() ? InClusterKubeConfig() : LoadKubeConfig(a.kubeconfig));
  std::signal(SIGINT, OnAgentSignal);
  std::signal(SIGTERM, OnAgentSignal);
  for (bool first = true; !g_agent_stop; first = false) {
    DevicePlugin plugin(options, kube);
    if (const std::string failed = plugin.Start(); !failed.empty()) {
      if (first) throw ConfigError(failed);
      std::cerr << "berth device-plugin " << a.node << ": " << failed << "; retrying in 5 s\n";
      std::this_thread::sleep_for(std::chrono::seconds(5));
      continue;
    }
    std::cerr << "berth device-plugin " << a.node << ": " << options.gpu_uuids.size() << " GPUs as "
              << a.resource;
    if (!a.share_resource.empty())
      std::cerr << ", " << a.share_seats << " seats each as " << a.share_resource;
    std::cerr << ", serving in " << a.plugin_dir << std::endl;
    while (!g_agent_stop && plugin.Serving()) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (!g_agent_stop)
      std::cerr << "berth device-plugin " << a.node << ": a socket in " << a.plugin_dir
                << " is gone (kubelet restarted); registering again\n";
  }
}

struct AgentArgs {
  std::string server, node, token, ca_cert, declare, dcgm_url;
  std::vector<std::string> labels;  // KEY=VALUE
  std::string docker_socket = "/var/run/docker.sock";
  double heartbeat_s = 1;
  int keep_failed = 0;
};

struct UpArgs {
  std::string listen = "127.0.0.1:7480";
  std::string state;
  std::string docker_socket = "/var/run/docker.sock";
  std::string dcgm_url;
  std::vector<std::string> allow_mounts;
  int gpus = 4;
  int keep_failed = 0;
};

// `berth agent` and `berth up` keep failed containers alike.
void AddKeepFailedOption(CLI::App* command, int* keep_failed) {
  command
      ->add_option("--keep-failed", *keep_failed,
                   "Keep the containers of the newest N replicas that failed (exited non-zero, not "
                   "by SIGTERM or SIGKILL, or out of memory; not stopped by berth) after their "
                   "jobs end, for docker logs and docker inspect; the others are removed")
      ->check(CLI::Range(0, kMaxKeepFailed))
      ->capture_default_str();
}

}  // namespace

void AddAgentCommands(CLI::App& app) {
  auto* agent = app.add_subcommand("agent", "Run a node's agent: its jobs as Docker containers");
  auto a = std::make_shared<AgentArgs>();
  agent->add_option("--server", a->server, "The server's URL (http://HOST:PORT or https://...)")
      ->required();
  agent->add_option("--node", a->node, "This node's name in the server's cluster")->required();
  agent->add_option("--token", a->token, "The agent's token (default: $BERTH_TOKEN)");
  agent->add_option("--cacert", a->ca_cert, "PEM CA to trust for https (default: $BERTH_CACERT)");
  agent
      ->add_option("--declare", a->declare,
                   "Cluster file declaring this node's GPUs, simulated (hosts without GPUs)")
      ->check(NonEmptyPath());
  agent->add_option("--label", a->labels,
                    "KEY=VALUE: a label of this node, for jobs' node selectors (repeatable); "
                    "taken by a server whose nodes join as they register (--cluster none)");
  agent->add_option("--docker-socket", a->docker_socket, "The Docker engine's socket")
      ->capture_default_str();
  agent->add_option("--dcgm-url", a->dcgm_url,
                    "A DCGM exporter's metrics URL (http://HOST:9400/metrics), scraped each "
                    "heartbeat");
  agent->add_option("--heartbeat", a->heartbeat_s, "Seconds between reports")
      ->check(NumberIn(0.1, 60.0))
      ->capture_default_str();
  AddKeepFailedOption(agent, &a->keep_failed);
  agent->callback([a] {
    AgentOptions options;
    if (a->declare.empty()) {
      std::string why;
      const std::optional<DiscoveredNode> found = DiscoverGpus(a->node, &why);
      if (!found)
        throw ConfigError("no GPUs found on this host (" + why +
                          "); on a host without GPUs, declare simulated ones with --declare "
                          "CLUSTER_FILE (a cluster file naming this node)");
      std::cerr << "berth agent " << a->node << ": GPUs " << why << "\n";
      for (const std::string& condition : found->conditions)
        std::cerr << "berth agent " << a->node << ": " << condition << "\n";
      for (size_t g = 0; g < found->node.gpus.size(); ++g) {
        std::string layout;
        for (const std::string& item : found->node.gpus[g].mig_layout)
          layout += (layout.empty() ? "" : ", ") + item;
        if (!layout.empty())
          std::cerr << "berth agent " << a->node << ": GPU " << found->host_index[g]
                    << " has the MIG instances " << layout
                    << " (in a cluster file: mig: {enabled: true, layout: [" << layout << "]})\n";
      }
      options.gpu_uuids = found->gpu_uuids;
      options.migs = MigsOf(*found);
      options.nvml_library = kNvmlLibrary;
      options.found = found->node;
      options.models = found->models;
    } else {
      options.declared = DeclaredNode(a->declare, a->node, &options.models);
      options.gpu_uuids = SimulatedUuids(a->node, options.declared->gpus.size());
      options.simulated = true;
    }
    Node& node = options.found ? *options.found : *options.declared;
    // Checked here as the server would, so that a bad label stops the agent at once, named.
    std::set<std::string> given;
    for (const std::string& label : a->labels) {
      const size_t eq = label.find('=');
      if (eq == 0 || eq == std::string::npos)
        throw ConfigError("--label " + Quoted(label) + ": expected KEY=VALUE");
      const std::string key = label.substr(0, eq);
      if (!given.insert(key).second)
        throw ConfigError("--label " + Quoted(key) + " is given twice; give each key once");
      if (const std::string why = WhyBadNodeLabel(key, label.substr(eq + 1)); !why.empty())
        throw ConfigError("--label " + Quoted(label) + ": " + why);
      node.labels[key] = label.substr(eq + 1);
    }
    for (const auto& [key, value] : node.labels)
      if (!given.count(key))
        if (const std::string why = WhyBadNodeLabel(key, value); !why.empty())
          throw ConfigError("--declare " + a->declare + ": node " + a->node + ": " + why);
    if (node.labels.size() > kMaxNodeLabels)
      throw ConfigError("the node has " + std::to_string(node.labels.size()) +
                        " labels (--label and --declare together); at most " +
                        std::to_string(kMaxNodeLabels) + " register");
    options.server = a->server;
    options.node = a->node;
    options.token = a->token;
    if (const char* t = std::getenv("BERTH_TOKEN"); options.token.empty() && t != nullptr)
      options.token = t;
    options.ca_cert = a->ca_cert;
    if (const char* ca = std::getenv("BERTH_CACERT"); options.ca_cert.empty() && ca != nullptr)
      options.ca_cert = ca;
    options.docker_socket = a->docker_socket;
    options.heartbeat_s = a->heartbeat_s;
    options.keep_failed = a->keep_failed;
    options.dcgm_url = a->dcgm_url;
    std::signal(SIGINT, OnAgentSignal);
    std::signal(SIGTERM, OnAgentSignal);
    const int code = RunAgent(options, g_agent_stop);
    if (code != 0) std::exit(code);
  });

  auto* plugin = app.add_subcommand(
      "device-plugin", "Run kubelet's device plugin on a Kubernetes node: pods get berth's GPUs");
  auto d = std::make_shared<DevicePluginArgs>();
  plugin->add_option("--node", d->node, "This Kubernetes node's name (e.g. from spec.nodeName)")
      ->required();
  plugin
      ->add_option("--kubeconfig", d->kubeconfig,
                   "The API server's kubeconfig (default: in-cluster service account)")
      ->check(NonEmptyPath());
  plugin->add_option("--plugin-dir", d->plugin_dir, "kubelet's device plugin directory")
      ->check(NonEmptyPath())
      ->capture_default_str();
  plugin->add_option("--resource", d->resource, "The extended resource the GPUs are advertised as")
      ->capture_default_str();
  plugin
      ->add_option("--share-resource", d->share_resource,
                   "The extended resource of seats on shared GPUs, which GPU-share pods ask for "
                   "(\"\": none)")
      ->capture_default_str();
  plugin
      ->add_option("--share-seats", d->share_seats,
                   "Share pods per GPU that kubelet admits; berth decides which fit")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  plugin
      ->add_option("--signing-key-file", d->signing_key_file,
                   "The key `berth server --k8s --signing-key-file` signs with: only pods whose "
                   "berth.io/gpu-ids it signed get berth's GPUs")
      ->check(NonEmptyPath());
  plugin
      ->add_option("--declare", d->declare,
                   "Cluster file declaring this node's GPUs, simulated (hosts without GPUs)")
      ->check(NonEmptyPath());
  plugin->callback([d] { RunDevicePlugin(*d); });

  auto* up = app.add_subcommand(
      "up", "Run berth on this machine: the server and this node's agent in one process");
  auto u = std::make_shared<UpArgs>();
  up->add_option("--listen", u->listen, "HOST:PORT to serve on (loopback)")->capture_default_str();
  up->add_option("--state", u->state, "State directory (default ~/.local/share/berth)")
      ->check(NonEmptyPath());
  up->add_option("--docker-socket", u->docker_socket, "The Docker engine's socket")
      ->capture_default_str();
  up->add_option("--gpus", u->gpus, "Simulated GPUs on a machine without GPUs")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  up->add_option("--dcgm-url", u->dcgm_url,
                 "A DCGM exporter's metrics URL (http://HOST:9400/metrics), scraped each "
                 "heartbeat instead of sampling NVML");
  AddAllowMountOption(up, &u->allow_mounts);
  AddKeepFailedOption(up, &u->keep_failed);
  up->callback([u] {
    const std::string node = HostNodeName();
    ServerOptions options;
    options.listen = u->listen;
    options.state_dir = u->state.empty() ? DefaultStateDir() : u->state;
    options.config.policy = LoadPolicyArgument("berth");
    options.config.allowed_mounts = AllowedMounts(u->allow_mounts);
    std::string why;
    const std::optional<DiscoveredNode> found = DiscoverGpus(node, &why);
    std::vector<std::string> uuids;
    std::vector<RegisteredMig> migs;
    std::string gpus_are;
    if (found) {
      options.config.cluster = DiscoveredCluster(*found);
      uuids = found->gpu_uuids;
      migs = MigsOf(*found);
      gpus_are =
          std::to_string(uuids.size()) + " GPUs (" + found->node.gpus[0].model + "; " + why + ")";
      for (const std::string& condition : found->conditions) gpus_are += "; " + condition;
    } else {
      options.config.cluster = SimulatedCluster(node, u->gpus, ReadHostTopology());
      uuids = SimulatedUuids(node, u->gpus);
      gpus_are = std::to_string(u->gpus) + " simulated GPUs (" + why + ")";
    }
    const bool simulated = !found;
    const std::string gpu_flags =
        FirstRunGpuFlags(options.config.cluster.nodes[0], options.config.cluster.models);
    const std::string socket = u->docker_socket, dcgm_url = u->dcgm_url;
    const int keep_failed = u->keep_failed;
    options.companion = [node, uuids, migs, simulated, gpus_are, gpu_flags, socket, dcgm_url,
                         keep_failed](const std::string& url, const std::atomic<bool>& stop) {
      std::cout << "berth up: node " << node << " with " << gpus_are << "\n"
                << "berth up: API at " << url << "; next, in another terminal:\n"
                << "  berth run " << gpu_flags
                << " IMAGE CMD...   (an image docker has, e.g. busybox)\n"
                << "  berth ps -a; berth logs JOB; berth nodes" << std::endl;
      AgentOptions agent;
      agent.server = url;
      agent.node = node;
      agent.docker_socket = socket;
      agent.dcgm_url = dcgm_url;
      agent.keep_failed = keep_failed;
      agent.gpu_uuids = uuids;
      agent.migs = migs;
      agent.simulated = simulated;
      if (!simulated) agent.nvml_library = kNvmlLibrary;
      const int code = RunAgent(agent, stop);
      if (code != 0 && !stop)
        std::cerr << "berth up: this machine's agent has ended (said why above), so berth up "
                     "stops; start it again to run jobs here"
                  << std::endl;
      return code;
    };
    try {
      const int code = RunServer(std::move(options));
      if (code != 0) std::exit(code);
    } catch (const StoreError& e) {
      throw ConfigError(e.what());
    } catch (const ApiError& e) {
      throw ConfigError(e.what());
    }
  });
}

}  // namespace berth
