// `berth server`: parses its flags into ServerOptions and runs the control plane.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/policy_argument.h"
#include "config/config_error.h"
#include "config/file_text.h"
#include "config/kubeconfig.h"
#include "config/mount_path.h"
#include "config/tokens_file.h"
#include "k8s/extender_server.h"
#include "k8s/gpu_ids_signature.h"
#include "server/server.h"

namespace berth {
namespace {

struct ServerArgs {
  std::string listen = "127.0.0.1:7480";
  std::string state;
  std::string cluster;
  std::string policy = "berth";
  std::string vcs;
  std::string tokens, tls_cert, tls_key;
  double request_timeout_s = 30;
  double unhealthy_after_s = 15, lost_after_s = 120;
  std::vector<std::string> allow_mounts;
  bool k8s = false, expect_agents = false;
  std::string kubeconfig, signing_key_file;
  std::vector<std::string> given;  // the flags given, to refuse those --k8s does not use
};

// --k8s: kube-scheduler's extender on a Kubernetes fleet; the API server holds the state, so
// --state and the agent-side flags do not apply. --cluster, when given, declares topology the
// nodes' labels do not carry.
int RunExtenderCommand(const ServerArgs& a) {
  for (const char* flag : {"--state", "--tokens", "--allow-mount", "--request-timeout",
                           "--node-unhealthy-after", "--node-lost-after", "--expect-agents"})
    if (std::find(a.given.begin(), a.given.end(), flag) != a.given.end())
      throw ConfigError(std::string(flag) +
                        ": not used with --k8s (the API server holds the state and names the "
                        "callers); leave it out");
  K8sServerOptions options;
  const bool listen_given = std::find(a.given.begin(), a.given.end(), "--listen") != a.given.end();
  options.listen = listen_given ? a.listen : "127.0.0.1:8888";
  options.kube = a.kubeconfig.empty() ? InClusterKubeConfig() : LoadKubeConfig(a.kubeconfig);
  options.extender.policy = LoadPolicyArgument(a.policy);
  options.extender.queues = LoadVcQueues(a.vcs);
  if (!a.signing_key_file.empty())
    options.extender.signing_key = ReadSigningKey(a.signing_key_file);
  Cluster declared;
  if (!a.cluster.empty()) {
    declared = LoadClusterArgument(a.cluster);
    options.extender.declared = &declared;
  }
  options.tls_cert = a.tls_cert;
  options.tls_key = a.tls_key;
  try {
    return RunK8sExtender(std::move(options));
  } catch (const ApiError& e) {
    throw ConfigError(e.what());
  }
}

int RunServerCommand(const ServerArgs& a) {
  if (a.k8s) return RunExtenderCommand(a);
  if (!a.kubeconfig.empty()) throw ConfigError("--kubeconfig: only with --k8s");
  if (!a.signing_key_file.empty()) throw ConfigError("--signing-key-file: only with --k8s");
  ServerOptions options;
  options.listen = a.listen;
  options.state_dir = a.state.empty() ? DefaultStateDir() : a.state;
  if (a.cluster == "none" && a.expect_agents)
    throw ConfigError(
        "--expect-agents: nodes that join (--cluster none) are always watched so; "
        "leave it out");
  if (a.cluster == "none") {  // empty: nodes join as their agents register
    options.config.cluster.name = "joined";
    options.config.nodes_join = true;
  } else {
    options.config.cluster = LoadClusterArgument(a.cluster);
  }
  options.config.policy = LoadPolicyArgument(a.policy);
  Policy builtin;
  if (!BuiltinPolicy(a.policy, &builtin)) options.config.policy_yaml = ReadFileText(a.policy);
  options.config.queues = LoadVcQueues(a.vcs);
  if (!a.vcs.empty()) options.config.queues_yaml = ReadFileText(a.vcs);
  options.config.allowed_mounts = AllowedMounts(a.allow_mounts);
  if (!a.tokens.empty()) options.tokens = LoadTokensFile(a.tokens);
  options.tls_cert = a.tls_cert;
  options.tls_key = a.tls_key;
  // CLI11's range check lets NaN through, and a NaN deadline would never expire.
  if (!std::isfinite(a.request_timeout_s))
    throw ConfigError("--request-timeout: expected seconds from 1 to 3600, got nan");
  options.request_timeout_s = a.request_timeout_s;
  if (!(a.lost_after_s >= a.unhealthy_after_s))
    throw ConfigError("--node-lost-after: must be at least --node-unhealthy-after (" +
                      std::to_string(a.unhealthy_after_s) + " s)");
  options.config.unhealthy_after_s = a.unhealthy_after_s;
  options.config.lost_after_s = a.lost_after_s;
  options.config.expect_agents = a.expect_agents;
  try {
    return RunServer(std::move(options));
  } catch (const StoreError& e) {
    throw ConfigError(e.what());
  } catch (const ApiError& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace

std::string DefaultStateDir() {
  if (const char* data = std::getenv("XDG_DATA_HOME"); data != nullptr && *data != '\0')
    return std::string(data) + "/berth";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0')
    throw ConfigError("--state: no HOME to keep the state under; give --state DIR");
  return std::string(home) + "/.local/share/berth";
}

std::vector<std::string> AllowedMounts(const std::vector<std::string>& flags) {
  std::vector<std::string> allowed;
  for (const std::string& prefix : flags) {
    std::string problem;
    const std::string normal = NormalMountPath(prefix, &problem);
    if (!problem.empty())
      throw ConfigError("--allow-mount " + Quoted(prefix) + ": the path " + problem);
    // The root would hand every job the host: the Docker socket, /etc, the state directory.
    if (normal == "/")
      throw ConfigError(
          "--allow-mount /: would let jobs mount every host path (the Docker "
          "socket included); name the directories they need, e.g. /data");
    allowed.push_back(normal);
  }
  return allowed;
}

void AddAllowMountOption(CLI::App* cmd, std::vector<std::string>* allow_mounts) {
  cmd->add_option("--allow-mount", *allow_mounts,
                  "Host directory job volumes may mount from, with what lies under it "
                  "(repeatable; default: none, no volumes)");
}

void AddServerCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("server", "Run the control plane: the REST API and the engine");
  auto a = std::make_shared<ServerArgs>();
  cmd->add_option("--listen", a->listen,
                  "HOST:PORT to serve on (port 0: any free; not loopback: needs tokens and TLS; "
                  "with --k8s the default is 127.0.0.1:8888)")
      ->capture_default_str();
  cmd->add_option("--state", a->state, "State directory (default ~/.local/share/berth)")
      ->check(NonEmptyPath());
  cmd->add_option("--cluster", a->cluster,
                  "Cluster file (YAML) or openb node list (.csv), or none: nodes join as their "
                  "agents register; default: embedded example")
      ->check(NonEmptyPath());
  cmd->add_option("--policy", a->policy, "Built-in policy name or policy file")
      ->capture_default_str();
  cmd->add_option("--vcs", a->vcs, "Virtual-cluster file: one queue per VC")->check(NonEmptyPath());
  AddAllowMountOption(cmd, &a->allow_mounts);
  cmd->add_option("--tokens", a->tokens, "Tokens file: who may call the API (docs/api.md)")
      ->check(NonEmptyPath());
  cmd->add_option("--tls-cert", a->tls_cert, "Serve HTTPS with this PEM certificate")
      ->check(NonEmptyPath());
  cmd->add_option("--tls-key", a->tls_key, "The certificate's PEM private key")
      ->check(NonEmptyPath());
  cmd->add_option("--request-timeout", a->request_timeout_s,
                  "Seconds a client may take to send a whole request; slower ones are dropped")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--node-unhealthy-after", a->unhealthy_after_s,
                  "Seconds without a report from a node's agent before no new jobs go there")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--node-lost-after", a->lost_after_s,
                  "Seconds without a report before the node is lost and its jobs placed "
                  "elsewhere")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_flag("--expect-agents", a->expect_agents,
                "Every node of the cluster file has an agent: one whose agent does not come "
                "turns unhealthy, then lost, as a silent one does (default: a node is watched "
                "once its agent registered)");
  cmd->add_flag("--k8s", a->k8s,
                "Serve kube-scheduler's extender (/k8s/filter, prioritize, preempt, bind) for a "
                "Kubernetes fleet instead of berth's own API (docs/kubernetes.md)");
  cmd->add_option("--kubeconfig", a->kubeconfig,
                  "With --k8s: the API server's kubeconfig (default: in-cluster service account)")
      ->check(NonEmptyPath());
  cmd->add_option("--signing-key-file", a->signing_key_file,
                  "With --k8s: a key (a Secret's file) to sign berth.io/gpu-ids with, which "
                  "berth's device plugins check")
      ->check(NonEmptyPath());
  cmd->callback([a, cmd] {
    for (const CLI::Option* option : cmd->get_options())
      if (option->count() > 0) a->given.push_back(option->get_name());
    const int code = RunServerCommand(*a);
    if (code != 0) std::exit(code);
  });
}

}  // namespace berth
