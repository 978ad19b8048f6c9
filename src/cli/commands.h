// berth's subcommands. Each Add*Command registers one subcommand and its options on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/limits.h"
#include "core/cluster.h"
#include "core/scheduler.h"

namespace httplib {
class Client;
}

namespace berth {

void AddCellsCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);
void AddSimCommand(CLI::App& app);
void AddServerCommand(CLI::App& app);
// `token new` and `token hash`, for the server's tokens file.
void AddTokenCommand(CLI::App& app);
// `bench api`, under the `bench` subcommand.
void AddBenchApiCommand(CLI::App& bench);
// `berth bench k8s`: the extender's filter and prioritize at thousands of nodes (bench_k8s.cc).
void AddBenchK8sCommand(CLI::App& bench);
// `berth bench run`: containers through berth against the Docker engine alone (bench_run.cc).
void AddBenchRunCommand(CLI::App& bench);
// The value below which a share p (0..1) of `values` lies.
double Percentile(std::vector<double> values, double p);
// run, ps, inspect, stop, rm, queues [apply], policy apply, nodes, node, events: the verbs that
// talk to a server.
void AddClientCommands(CLI::App& app);
// `top`: a live terminal view of the server's nodes and queues.
void AddTopCommand(CLI::App& app);
// `agent` (a node's agent), `up` (the server and a local agent in one process) and
// `device-plugin` (kubelet's device plugin on a Kubernetes node).
void AddAgentCommands(CLI::App& app);
// The server's state directory when --state is not given: $XDG_DATA_HOME/berth, or
// ~/.local/share/berth. Throws ConfigError without HOME.
std::string DefaultStateDir();
// --allow-mount (berth server, berth up): the directories job volumes may mount from, each
// normalized; a ConfigError names a bad one.
void AddAllowMountOption(CLI::App* cmd, std::vector<std::string>* allow_mounts);
std::vector<std::string> AllowedMounts(const std::vector<std::string>& flags);

// The global option --limit NAME=VALUE (repeatable), which sets the bounds of limits.h before
// any subcommand runs.
void AddLimitOption(CLI::App& app);

// An integer option's check: from `min` to the bound in force when the option is read (after
// --limit), "Value V not in range MIN to MAX (raise it with --limit NAME=N; ...)" otherwise.
CLI::Validator UpToLimit(int64_t min, int64_t limits::Limits::*bound);
// A decimal integer from min to max, nothing else.
CLI::Validator IntegerIn(int64_t min, int64_t max);
// A file path: "" would otherwise read as "not given" and silently pick the default.
CLI::Validator NonEmptyPath();
// A decimal number ("0.5", "1e3"), nothing else: CLI11's own conversion takes "0x10".
CLI::Validator DecimalNumber();
// A decimal number from min to max: CLI::Range lets "nan" through.
CLI::Validator NumberIn(double min, double max);
// `value` in the fewest digits that read back as it ("3.0000001", not "3" or "3.000000"), for
// messages that quote a number given on the command line.
std::string NumberText(double value);

// The cluster named on the command line: a cluster file (YAML), an openb node list (.csv), or
// the embedded default (examples/multi-rack.yaml) when `path` is empty. Throws ConfigError.
Cluster LoadClusterArgument(const std::string& path);
// The queues of a VC file named on the command line: one per VC, weight 1, no cap; none for "".
std::vector<QueueSpec> LoadVcQueues(const std::string& path);

// The server the verbs and `bench api` talk to: $BERTH_ADDR (HOST:PORT, or https://HOST:PORT
// for a server with TLS; an http:// in front is dropped), default 127.0.0.1:7480. Throws
// ConfigError when it is not HOST:PORT.
struct ServerAddress {
  std::string text, host;
  int port = 0;
  bool tls = false;
};
ServerAddress ServerAddressFromEnv();
// A connection to `server` carrying $BERTH_TOKEN (when set) as its bearer token, and checking
// a TLS server's certificate against $BERTH_CACERT (when set) or the system's CAs.
std::unique_ptr<httplib::Client> ConnectToServer(const ServerAddress& server);
// One request (GET, POST, PUT with a YAML body, DELETE) to the server at $BERTH_ADDR; returns
// the JSON body of a 2xx answer. Any other answer ends the process: exit 2 with the server's
// message for a 4xx, exit 1 for no server or a 5xx.
nlohmann::json CallServer(const std::string& method, const std::string& path,
                          const std::string& body = "");

// `--format json|table` on a verb that prints what the server holds: json prints the server's
// answer as it is (for scripts), table (the default) the view for people.
void AddFormatOption(CLI::App& verb, std::string* format);

// `j` as indented text. Input files are checked to be UTF-8, but a file name need not be: its
// stray bytes become U+FFFD instead of an exception.
inline std::string JsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace berth
