#include "agent/agent.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <exception>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "agent/cgroup_stats.h"
#include "agent/dcgm_metrics.h"
#include "agent/exit_cause.h"
#include "agent/host_paths.h"
#include "agent/host_topology.h"
#include "agent/nvml.h"
#include "config/config_error.h"
#include "docker/docker_client.h"
#include "protocol/agent_protocol.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr int kAssignmentWaitS = 25;  // under the server's kMaxAssignmentWaitS
// Starts at once: each waits mostly on the engine, which works on them in parallel.
constexpr int kParallelStarts = 4;

// A replica run: (job, replica, placement), as the server names it and the labels carry it.
using RunKey = std::tuple<int64_t, int, std::string>;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The wall clock, which the engine's log timestamps read (this host's, as the engine's).
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The run a container of ours belongs to, from its labels as the server's protocol bounds
// them; false for one without them. One whose labels do not read so (made by hand or by another
// tool) is not berth's and is left alone: reported, it would be refused, and with it every
// report of the node (review: a container labelled berth.job=-5 made the node lost, and its job
// ran a second time elsewhere).
bool KeyOf(const ContainerInfo& c, RunKey* key) {
  const auto job = c.labels.find("berth.job"), replica = c.labels.find("berth.replica"),
             placement = c.labels.find("berth.placement");
  if (job == c.labels.end() || replica == c.labels.end() || placement == c.labels.end())
    return false;
  auto whole = [](const std::string& text, int64_t least, int64_t most, int64_t* out) {
    if (text.empty() || text.size() > 18 ||
        !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      return false;
    *out = std::stoll(text);
    return *out >= least && *out <= most;
  };
  int64_t job_id = 0, replica_index = 0;
  if (!whole(job->second, 1, INT64_MAX, &job_id) ||
      !whole(replica->second, 0, 1 << 20, &replica_index) || placement->second.size() > 64)
    return false;
  *key = {job_id, static_cast<int>(replica_index), placement->second};
  return true;
}

// What a byte of (valid UTF-8) log text takes of a report's JSON, at most: a control
// character escaped (\u001b), a quote or backslash doubled. Counted, with each line's stderr
// span ("[from,to],"), so that a report of binary output, or of lines that switch stream at
// every line, still fits the server's request limit.
constexpr size_t kStderrSpanCost = 18;
constexpr size_t kMaxDcgmBytes = 16 << 20;  // a DCGM exporter's answer, at most
constexpr size_t kLogLookahead = 64 << 10;
// An exited container's log is read this much at a time, and the reports that send it take
// from that read (ReadExited); at most kMaxReadAheadBytes of such reads are held at once.
constexpr size_t kReadAheadBytes = 8 << 20;
constexpr size_t kMaxReadAheadBytes = 64 << 20;

// What a byte of log text may take in the report's JSON: escaped, or in a chunk sent in base64
// (a byte that is not ASCII may make it so: 4/3 each).
size_t ReportCost(unsigned char c) {
  return c == '\n' || c == '\t' || c == '\r' || c == '"' || c == '\\' || c >= 0x80 ? 2
         : c < 0x20                                                                ? 6
                                                                                   : 1;
}

size_t ReportCost(const LogLine& line) {
  size_t cost = line.stderr_stream ? kStderrSpanCost : 0;
  for (unsigned char c : line.text) cost += ReportCost(c);
  return cost;
}

// How many of `lines` (a read after the cursor) a report with `budget` left takes. Lines are
// left out only where the cursor (the latest line taken) resumes before every line left
// (SafeStop). When no such stop fits, with the whole budget (`may_cut`) a line longer than the
// budget (the engine's 16 KiB pieces of it, one stamp) is cut: what fits goes, ended by a
// newline so that the next line does not run on from it, and the rest is lost (the next read
// goes on after its stamp); with less, it waits for a report with room.
size_t LinesThatFit(std::vector<LogLine>& lines, size_t budget, bool may_cut) {
  budget -= std::min<size_t>(budget, ReportCost('\n'));  // room for the cut's newline
  size_t cost = 0, fit = 0;
  while (fit < lines.size() && (cost += ReportCost(lines[fit])) <= budget) ++fit;
  if (fit == lines.size()) return fit;
  const size_t taken = SafeStop(lines, fit);
  if (taken > 0 || !may_cut || lines.empty()) return taken;
  if (fit == 0) {  // even its first piece is longer than the budget
    std::string& text = lines[0].text;
    size_t kept = 0;
    for (cost = lines[0].stderr_stream ? kStderrSpanCost : 0; kept < text.size(); ++kept) {
      cost += ReportCost(static_cast<unsigned char>(text[kept]));
      if (cost > budget) break;
    }
    while (kept > 0 && kept < text.size() && (text[kept] & 0xC0) == 0x80) --kept;  // whole chars
    text.resize(kept);
    fit = 1;
  }
  if (!lines[fit - 1].text.empty() && lines[fit - 1].text.back() != '\n')
    lines[fit - 1].text += '\n';
  return fit;
}

// A running container's lines that are safe to send: the engine stamps each line as it reads
// it from the container, but its stdout and stderr reach the log apart, so a line may still
// come stamped before the last one read. Those stamped kSettleS ago or more are settled.
size_t SettledLines(const std::vector<LogLine>& lines) {
  constexpr double kSettleS = 0.25;
  const double settled_before = WallSeconds() - kSettleS;
  size_t settled = 0;
  while (settled < lines.size() && EngineSeconds(lines[settled].timestamp) < settled_before)
    ++settled;
  return SafeStop(lines, settled);
}

// The container's name: one a replica's run, so that a create whose answer was lost and is
// tried again meets the first container (409) rather than making a second. Characters the
// engine refuses in names are written as _XX, so that distinct runs never share a name.
std::string ContainerName(const std::string& node, const RunKey& key) {
  std::string name;
  const auto add = [&](const std::string& part) {
    for (unsigned char ch : part) {
      if (std::isalnum(ch) || ch == '.' || ch == '-') {
        name += static_cast<char>(ch);
      } else {
        static const char kHex[] = "0123456789abcdef";
        name += {'_', kHex[ch >> 4], kHex[ch & 15]};
      }
    }
  };
  name = "berth-";
  add(node);
  name += "-j" + std::to_string(std::get<0>(key)) + "-r" + std::to_string(std::get<1>(key)) + "-";
  add(std::get<2>(key));
  return name;
}

// Jittered exponential back-off: 0.1 s doubling to 10 s, each wait a random 50-100% of it.
class Backoff {
 public:
  double Next() {
    const double wait = std::uniform_real_distribution<double>(0.5, 1.0)(rng_) * step_;
    step_ = std::min(10.0, step_ * 2);
    return wait;
  }
  void Reset() { step_ = 0.1; }

 private:
  double step_ = 0.1;
  std::mt19937 rng_{std::random_device{}()};
};

// 16 random hex digits.
std::string NewInstance() {
  std::random_device device;
  const uint64_t value = (static_cast<uint64_t>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

class Agent {
 public:
  Agent(const AgentOptions& options, const std::atomic<bool>& stop)
      : options_(options), stop_requested_(stop), docker_(options.docker_socket) {
    try {
      const HostTopology host = ReadHostTopology();
      host_cpus_ = host.cpus;
      for (const NumaNode& numa : host.numa_nodes) {
        host_mems_.push_back(numa.id);
        capacity_.memory_bytes += numa.memory_mib << 20;
      }
      capacity_.cpus = static_cast<double>(host.cpus.size());
    } catch (const ConfigError& e) {
      Log(std::string("cannot read this host's CPUs and NUMA nodes; CPU sets are not pinned: ") +
          e.what());
    }
    if (host_mems_.empty()) host_mems_ = {0};
  }

  // The watch of the assignments, the heartbeat (reports), the start workers, and this
  // thread, which converges the containers. The heartbeat has its own thread so that a slow
  // engine (a long pull, many starts) never silences the node and gets it declared lost. Starts
  // run on their own workers so that a pass never waits on them: a replica assigned while
  // others are starting starts at once, not after them (a burst of short jobs keeps every GPU
  // busy).
  int Run() {
    if (!Register()) {
      WaitForStops();  // a refusal's (StopWhatIsNotKept)
      if (node_unknown_) LeaveAnUnknownNode();
      return stop_requested_ ? 0 : 1;
    }
    std::thread watch([this] { Watch(); });
    std::thread heartbeat([this] { Heartbeat(); });
    std::thread exits([this] { WatchExits(); });
    std::thread prefetch([this] { Prefetch(); });
    std::thread dcgm;
    if (!options_.dcgm_url.empty()) {
      dcgm = std::thread([this] { SampleDcgm(); });
    } else if (!options_.nvml_library.empty()) {
      gpu_samples_->sampling = true;
      std::thread(SampleNvml, gpu_samples_, options_.nvml_library, options_.gpu_uuids,
                  options_.heartbeat_s)
          .detach();
    }
    std::vector<std::thread> starters;
    for (int w = 0; w < kParallelStarts; ++w) starters.emplace_back([this] { StartWorker(); });
    Backoff docker_backoff;
    while (!Stopping()) {
      try {
        const bool done = Reconcile();
        docker_backoff.Reset();
        if (!done) {  // waiting for an earlier run to stop: look again in a heartbeat
          Sleep(options_.heartbeat_s);
          continue;
        }
      } catch (const DockerError& e) {
        Log(e.what());
        Sleep(docker_backoff.Next());
        continue;
      }
      // Until the assignments change, a start ends, or a heartbeat's time (stopped containers
      // are removed once their last lines are sent); `stop` is set by a signal handler, which
      // cannot notify, so it is looked at every 0.2 s.
      const auto due = Clock::now() + std::chrono::duration<double>(options_.heartbeat_s);
      std::unique_lock<std::mutex> lock(mu_);
      while (!Stopping() && set_.version == reconciled_version_ && !start_ended_ &&
             Clock::now() < due)
        changed_.wait_for(lock, std::chrono::milliseconds(200));
      start_ended_ = false;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (watch_client_ != nullptr) watch_client_->stop();
    }
    {
      // NVML is shut down before the agent ends, unless a GPU holds it in the driver.
      std::unique_lock<std::mutex> lock(gpu_samples_->mu);
      gpu_samples_->stop = true;
      gpu_samples_->wake.notify_all();
      gpu_samples_->wake.wait_for(lock, std::chrono::seconds(5),
                                  [&] { return !gpu_samples_->sampling; });
    }
    if (dcgm.joinable()) dcgm.join();
    watch.join();
    heartbeat.join();
    exits.join();
    prefetch.join();
    for (std::thread& t : starters) t.join();
    WaitForStops();
    if (node_unknown_) {
      LeaveAnUnknownNode();
      return 1;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (replaced_by_.empty()) return 0;
    }
    LeaveTheNode();
    return 1;
  }

 private:
  // Stops under way use this agent: they end within their grace period.
  void WaitForStops() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return stopping_.empty(); });
  }

  // The node's containers as a registration is sent, and the engine's identity, from one
  // client; nothing when the engine does not answer.
  struct Ours {
    std::string engine;
    std::vector<ContainerInfo> containers;
  };
  Ours OursNow() const {
    try {
      DockerClient docker(options_.docker_socket);
      Ours ours;
      ours.engine = docker.EngineIdentity();
      ours.containers = docker.List("berth.node=" + options_.node);
      return ours;
    } catch (const DockerError&) {
      return {};
    }
  }

  // A refusal of the node's hardware (409) says which runs the server still places here
  // (`keep`). The node's other running containers are stopped (not removed: once the agent gets
  // in, it sends their last lines): their jobs were stopped, or were placed elsewhere once the
  // node was lost, and would otherwise run twice. Only those listed before the try (`before`): a
  // paused old agent that woke may have started runs since. A refusal without `keep` (another
  // agent of the node is in touch: the containers may be its own) stops nothing.
  void StopWhatIsNotKept(const httplib::Result& res, const std::vector<ContainerInfo>& before) {
    const Json body = Json::parse(res->body, nullptr, false);
    if (!body.is_object() || !body.contains("keep") || !body["keep"].is_array()) return;
    std::set<RunKey> keep;
    for (const Json& run : body["keep"]) {
      if (!run.is_object() || !run.contains("job") || !run["job"].is_number_integer() ||
          !run.contains("replica") || !run["replica"].is_number_integer() ||
          !run.contains("placement") || !run["placement"].is_string())
        return;  // not as this agent reads it: stop nothing rather than the wrong ones
      const int64_t replica = run["replica"].get<int64_t>();
      if (replica < 0 || replica > std::numeric_limits<int>::max()) return;
      keep.insert({run["job"].get<int64_t>(), static_cast<int>(replica),
                   run["placement"].get<std::string>()});
    }
    for (const ContainerInfo& c : before) {
      RunKey key;
      if (c.running && KeyOf(c, &key) && !keep.count(key)) {
        Log("the server no longer places job " + std::to_string(std::get<0>(key)) +
            " here (it refused this agent)");
        StopInBackground(c);
      }
    }
  }

  // A refusal because another agent process holds the node (`heldBy`): when that one runs on
  // another Docker engine (the node moved to another host while this one was down), the node's
  // containers here are copies of jobs that now run there, or will: they are stopped and removed
  // (a stopped one left would read as its job's exit to an agent that gets in here later). On
  // the same engine, or when either engine is not known, they are left alone. Only once the
  // same holder has refused this agent for twice the time a silent agent keeps its node
  // (`replaceableAfterMs`): a restarted agent is refused at first by its own dead predecessor,
  // whose engine identity may read otherwise though it is this one (a host renamed since).
  // `first_refused`: when each holder first refused this registration.
  void LeaveToAnotherEngine(const httplib::Result& res, const Ours& before,
                            std::map<std::string, Clock::time_point>* first_refused) {
    const Json body = Json::parse(res->body, nullptr, false);
    if (!body.is_object() || !body.contains("heldBy") || !body["heldBy"].is_object()) return;
    const Json& by = body["heldBy"];
    const auto text = [&](const char* key) {
      const auto it = by.find(key);
      return it != by.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const auto after = by.find("replaceableAfterMs");
    if (after == by.end() || !after->is_number() || !(after->get<double>() > 0)) return;
    const std::string holder = text("instance"), theirs = text("engine");
    const auto since = first_refused->try_emplace(holder, Clock::now()).first->second;
    if (SecondsSince(since) < 2 * after->get<double>() / 1000) return;
    if (before.engine.empty() || theirs.empty() || before.engine == theirs) return;
    size_t running = 0;
    for (const ContainerInfo& c : before.containers) {
      running += c.running;
      StopInBackground(c, /*remove=*/true);
    }
    if (!before.containers.empty())
      Log("node " + options_.node + " is held by an agent on another Docker engine (process " +
          holder + "): removing the " + std::to_string(before.containers.size()) +
          " containers of node " + options_.node + " here (" + std::to_string(running) +
          " running), so that its jobs run once");
  }

  // Out of touch for as long as the server waits before letting another process register as
  // the node, another agent may have replaced this one: what it would start or stop may be
  // that one's. It acts again once a report is taken, or ends when the server says it was
  // replaced. Said once each time it begins. Under mu_.
  bool OutOfTouch() {
    const bool out = Clock::now() - reached_server_ >= replaceable_after_;
    if (out && !holding_)
      Log("no report taken for " + std::to_string(std::lround(SecondsSince(reached_server_))) +
          " s: starting and stopping no containers until one is (another agent may have "
          "registered as node " +
          options_.node + " meanwhile)");
    if (!out && holding_) Log("a report was taken: starting and stopping containers again");
    holding_ = out;
    return out;
  }

  bool Stopping() {
    if (stop_requested_) ending_ = true;
    return ending_;
  }

  // True when the server says it has no such node (404 naming it: its cluster file no longer
  // declares it, as of a restart): this agent then ends, and if that server took it before,
  // leaves the node (LeaveAnUnknownNode). Only a 404 that names the node: one from anything
  // else on the way says nothing of it.
  bool NodeUnknownIn(const httplib::Result& res) {
    if (!res || res->status != 404) return false;
    const Json body = Json::parse(res->body, nullptr, false);
    const auto it = body.is_object() ? body.find("unknownNode") : body.end();
    if (it == body.end() || !it->is_string() || *it != options_.node) return false;
    std::lock_guard<std::mutex> lock(mu_);
    // Only from a server that took this process before: one it never reached (a --server given
    // wrong) says nothing of where the node's jobs run, and the containers are left.
    if (!registered_once_ && !node_unknown_)
      Log("the server has no node " + options_.node + " (" + ErrorOf(res) +
          "); this one stops and leaves the node's containers: if its jobs run elsewhere now, "
          "remove them (docker ps -a --filter label=berth.node=" +
          options_.node + ")");
    else if (!node_unknown_)
      Log("the server has no node " + options_.node + " (" + ErrorOf(res) + "); this one stops");
    node_unknown_ = registered_once_;
    ending_ = true;
    changed_.notify_all();
    return true;
  }

  // The server has no such node: whatever ran the node's jobs here, the server placed them
  // elsewhere (a restart loses the jobs of a node its cluster file no longer declares), so the
  // node's containers here are copies, stopped and removed so that the jobs run once.
  void LeaveAnUnknownNode() {
    std::vector<ContainerInfo> containers;
    try {
      containers = DockerClient(options_.docker_socket).List("berth.node=" + options_.node);
    } catch (const DockerError& e) {
      Log(std::string("cannot list the node's containers to remove them (") + e.what() +
          "): remove them (docker ps -a --filter label=berth.node=" + options_.node + ")");
      return;
    }
    if (containers.empty()) return;
    Log("removing the " + std::to_string(containers.size()) + " containers of node " +
        options_.node + " here, so that its jobs run once");
    RemoveContainers(containers);
  }

  // True when the server refused a call because another agent process has registered for the
  // node since this one (ControlPlane::RefuseASupersededAgent): this agent then ends.
  bool ReplacedIn(const httplib::Result& res) {
    if (!res || res->status != 409) return false;
    const Json body = Json::parse(res->body, nullptr, false);
    if (!body.is_object() || !body.contains("replacedBy") || !body["replacedBy"].is_object())
      return false;
    const Json& by = body["replacedBy"];
    std::lock_guard<std::mutex> lock(mu_);
    if (replaced_by_.empty()) {
      replaced_by_ = by.value("instance", std::string("?"));
      if (replaced_by_.empty()) replaced_by_ = "?";
      replacing_engine_ = by.value("engine", std::string());
      Log("another agent (process " + replaced_by_ + ") has registered as node " + options_.node +
          " since this one (" + instance_ + ") last reached the server; this one stops");
    }
    ending_ = true;
    changed_.notify_all();
    return true;
  }

  // A replaced agent's last act. The node's jobs now run where the new agent is: on this
  // Docker engine the new agent has adopted the containers; on another engine these
  // containers would run the node's jobs a second time, so they are stopped and removed (a
  // stopped one left here would read as the job's exit to an agent started here later).
  void LeaveTheNode() {
    // The refusal that ended this agent may have waited in its socket while it was paused: the
    // process it names may itself have been replaced since (review: a job ran on two engines,
    // or the current agent's container was stopped). The server says who holds the node now.
    const std::string holder = CurrentHolder();
    if (holder.empty()) {
      Log("cannot ask the server which agent holds node " + options_.node +
          " now: the node's containers are left here; once another agent runs the node "
          "elsewhere, remove them (docker ps -a --filter label=berth.node=" +
          options_.node + ")");
      return;
    }
    std::string mine;
    try {
      mine = docker_.EngineIdentity();
    } catch (const DockerError& e) {
      Log(std::string("cannot reach the Docker engine to see whether the new agent shares it: ") +
          e.what());
    }
    const std::string list = "docker ps -a --filter label=berth.node=" + options_.node;
    if (!mine.empty() && mine == replacing_engine_) {
      Log("the new agent runs on this Docker engine and keeps the node's containers");
      return;
    }
    if (mine.empty() || replacing_engine_.empty()) {
      Log("cannot tell whether the new agent runs on this Docker engine: the node's containers "
          "are left running here; if the node moved to another host, remove them (" +
          list + ")");
      return;
    }
    std::vector<ContainerInfo> containers;
    try {
      containers = docker_.List("berth.node=" + options_.node);
    } catch (const DockerError& e) {
      Log(std::string("the new agent runs on another Docker engine, and the node's containers "
                      "here cannot be listed to be stopped (") +
          e.what() + "); remove them (" + list + ")");
      return;
    }
    Log("the new agent runs on another Docker engine: stopping the " +
        std::to_string(containers.size()) + " containers of node " + options_.node +
        " here, so that its jobs run once");
    RemoveContainers(containers);
  }

  // Stops (within each one's grace period) and removes `containers`, all at once.
  void RemoveContainers(const std::vector<ContainerInfo>& containers) {
    std::vector<std::thread> removals;
    for (const ContainerInfo& c : containers)
      removals.emplace_back([this, c] {
        try {
          DockerClient docker(options_.docker_socket);  // one client a thread
          docker.Stop(c.id, GraceOf(c));
          docker.Remove(c.id, true);
        } catch (const DockerError& e) {
          Log("cannot remove container " + c.id.substr(0, 12) + ": " + e.what());
        }
      });
    for (std::thread& t : removals) t.join();
  }

  // The engine of the agent process that holds the node now, from a fresh refusal of this
  // one's watch (RefuseASupersededAgent); sets replacing_engine_. "" when the server cannot be
  // asked: 5 tries, 2 s apart. A server that answers but knows no agent of the node yet (it
  // restarted) is asked for up to a minute, every agent's longest reconnect back-off several
  // times over (review: this agent gave up and left a job running on two engines).
  std::string CurrentHolder() {
    const auto until = Clock::now() + std::chrono::minutes(1);
    for (int unanswered = 0; unanswered < 5 && Clock::now() < until;) {
      const auto client = Connect(5);
      const httplib::Result res = client->Get("/v1/agents/" + options_.node +
                                              "/assignments?since=0&wait=0&instance=" + instance_);
      const Json body = res ? Json::parse(res->body, nullptr, false) : Json();
      if (res && res->status == 409 && body.is_object() && body.contains("replacedBy") &&
          body["replacedBy"].is_object()) {
        const Json& by = body["replacedBy"];
        std::lock_guard<std::mutex> lock(mu_);
        const std::string now_by = by.value("instance", std::string("?"));
        if (now_by != replaced_by_)
          Log("since then process " + now_by + " has registered as node " + options_.node);
        replaced_by_ = now_by;
        replacing_engine_ = by.value("engine", std::string());
        return replaced_by_;
      }
      if (!res || res->status >= 500) ++unanswered;
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    return "";
  }

  void Log(const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu_);  // lines from several threads stay whole
    if (options_.log)
      options_.log(line);
    else
      std::cerr << "berth agent " << options_.node << ": " << line << std::endl;
  }

  void Sleep(double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    std::unique_lock<std::mutex> lock(mu_);
    while (!Stopping() && Clock::now() < until)
      changed_.wait_for(lock, std::chrono::milliseconds(200));
  }

  std::unique_ptr<httplib::Client> Connect(int read_timeout_s) const {
    auto client = std::make_unique<httplib::Client>(options_.server);
    if (!options_.token.empty()) client->set_bearer_token_auth(options_.token);
    if (!options_.ca_cert.empty()) client->set_ca_cert_path(options_.ca_cert);
    client->set_connection_timeout(5);
    client->set_read_timeout(read_timeout_s);
    client->set_write_timeout(10);
    return client;
  }

  static std::string ErrorOf(const httplib::Result& res) {
    if (!res) return httplib::to_string(res.error());
    const Json body = Json::parse(res->body, nullptr, false);
    return "HTTP " + std::to_string(res->status) + ": " +
           (body.is_object() ? body.value("error", res->body) : res->body);
  }

  // Registers until the server answers; false when it refuses the node (or on stop).
  bool Register() {
    NodeRegistration registration;
    registration.gpu_uuids = options_.gpu_uuids;
    registration.migs = options_.migs;
    registration.simulated = options_.simulated;
    registration.agent_version = "berth";
    registration.instance = instance_;
    registration.report_every_ms = std::llround(options_.heartbeat_s * 1000);
    try {
      DockerClient docker(options_.docker_socket);  // registering again is the heartbeat's
      registration.engine = docker.EngineIdentity();
    } catch (const DockerError&) {
      // Not known: a replaced agent then leaves its containers (LeaveTheNode); the first
      // report says the engine is away.
    }
    registration.found = options_.found;
    registration.declared = options_.declared;
    registration.models = options_.models;
    // Engine and driver texts may not be UTF-8: replaced, never an exception.
    const std::string body =
        ToJson(registration).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    Backoff backoff;
    bool refused = false;  // a 409 came: the node's containers are listed before each try
    std::map<std::string, Clock::time_point> first_refused;  // by holder (LeaveToAnotherEngine)
    while (!Stopping()) {
      // What a refusal may stop is what ran before it was asked for (not on the first try: an
      // agent that gets in at once lists nothing more).
      const Ours before = refused ? OursNow() : Ours();
      const auto client = Connect(10);
      const auto sent = Clock::now();
      const httplib::Result res =
          client->Post("/v1/agents/" + options_.node + "/register", body, "application/json");
      if (res && res->status == 200) {
        const Json answer = Json::parse(res->body, nullptr, false);
        const auto given = answer.is_object() ? answer.find("replaceableAfterMs") : answer.end();
        const double after_ms =
            given != answer.end() && given->is_number() ? given->get<double>() : 0;
        // What a server older than these parts of the protocol does not take is not sent.
        const auto says = [&](const char* key) {
          const auto it = answer.is_object() ? answer.find(key) : answer.end();
          return it != answer.end() && *it == true;
        };
        {
          std::lock_guard<std::mutex> lock(mu_);
          reached_server_ = sent;
          registered_once_ = true;
          binary_logs_ = says("binaryLogs");
          interrupted_state_ = says("interruptedState");
          if (after_ms > 0) replaceable_after_ = std::chrono::duration<double>(after_ms / 1000);
        }
        Log("registered with " + options_.server + " (" +
            std::to_string(options_.gpu_uuids.size()) + (options_.simulated ? " simulated" : "") +
            " GPUs)");
        return true;
      }
      // 409 is a refusal for now (new hardware under placed jobs: it clears once they are
      // drained): the agent stays, keeping the containers the server still places here, and
      // asks again.
      if (NodeUnknownIn(res)) return false;
      if (res && res->status >= 400 && res->status < 500 && res->status != 408 &&
          res->status != 409 && res->status != 429) {
        Log("the server refuses this node: " + ErrorOf(res));
        return false;
      }
      Log("cannot register with " + options_.server + " (" + ErrorOf(res) + "); retrying");
      if (res && res->status == 409) {
        StopWhatIsNotKept(res, before.containers);
        LeaveToAnotherEngine(res, before, &first_refused);
        refused = true;
      }
      Sleep(backoff.Next());
    }
    return false;
  }

  // Keeps set_ at the server's newest assignments.
  void Watch() {
    Backoff backoff;
    const auto client = Connect(kAssignmentWaitS + 10);
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_client_ = client.get();
    }
    while (!Stopping()) {
      uint64_t since = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        since = set_.version;
      }
      const httplib::Result res = client->Get(
          "/v1/agents/" + options_.node + "/assignments?since=" + std::to_string(since) +
          "&wait=" + std::to_string(kAssignmentWaitS) + "&instance=" + instance_);
      if (ReplacedIn(res) || NodeUnknownIn(res)) break;
      AssignmentSet set;
      try {
        if (!res || res->status != 200) throw ProtocolError(ErrorOf(res));
        set = ParseAssignments(Json::parse(res->body));
      } catch (const std::exception& e) {
        Log(std::string("watching the assignments failed (") + e.what() + "); retrying");
        Sleep(backoff.Next());
        continue;
      }
      backoff.Reset();
      std::lock_guard<std::mutex> lock(mu_);
      set_ = std::move(set);
      changed_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    watch_client_ = nullptr;
  }

  void Heartbeat() {
    DockerClient docker(options_.docker_socket);  // this thread's own
    Backoff backoff;
    bool engine_away = false;  // said once an outage
    while (!Stopping()) {
      bool sent = false;
      try {
        sent = SendReport(docker);
        if (sent && engine_away) Log("the Docker engine answers again");
        engine_away = engine_away && !sent;
      } catch (const DockerError& e) {
        // A report without the containers would tell the server they are gone: this one says
        // the engine is away instead, so the node takes no new jobs while it is. It keeps the
        // heartbeat's pace: the node's GPUs are still reported.
        if (!engine_away)
          Log(std::string("cannot list the containers to report them: ") + e.what() +
              "; reporting the engine away until it answers");
        engine_away = true;
        sent = ReportEngineAway(e.what());
      }
      if (!sent) {
        Sleep(backoff.Next());
        continue;
      }
      backoff.Reset();
      // Until the next heartbeat, or sooner when a container exits: its job ends, and its
      // GPUs go to the next job, without waiting for the heartbeat. Output that did not fit the
      // report goes at once: an exited container's job holds its GPUs until all of it is sent.
      const auto due =
          Clock::now() + std::chrono::duration<double>(log_backlog_ ? 0.0 : options_.heartbeat_s);
      std::unique_lock<std::mutex> lock(mu_);
      while (!Stopping() && !exited_ && Clock::now() < due)
        changed_.wait_for(lock, std::chrono::milliseconds(200));
      exited_ = false;
    }
  }

  // Wakes the heartbeat when one of the node's containers exits (the engine's events), and
  // notes the containers the engine signalled, so that an exit the agent did not ask for is
  // told from the job's own (SendReport). The engine streams its events live while it shuts
  // down, so its own stops are seen before it goes. An agent restarted while its engine ran
  // missed the kills meanwhile (a docker stop by hand): it first reads back every event the
  // engine still keeps (its last few hundred), whatever their age: an old kill is matched to an
  // exit by its time (ExitCauseOf).
  void WatchExits() {
    DockerClient docker(options_.docker_socket);  // this thread's own
    int64_t after_ns = 1;                         // the last event seen: none yet
    // While it reads back events from before it began, it wakes the heartbeat for none: those
    // exits are in the containers' listing already, and a report held for their events goes
    // once the watch is past them (else one report per exit the engine kept).
    const int64_t watching_since_ns = static_cast<int64_t>(WallSeconds() * 1e9);
    while (!Stopping()) {
      EngineEventsSeen seen;
      bool exited = false, away = false;
      try {
        exited = docker.WaitForExit("berth.node=" + options_.node, 1, &after_ns, &seen);
      } catch (const DockerError&) {
        away = true;  // the heartbeat says so
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const EngineEventsSeen::Signal& s : seen.signalled)
          if (s.signal == SIGTERM || s.signal == SIGKILL || s.signal == SIGINT ||
              s.signal == SIGQUIT)
            engine_signalled_[s.container] = s.at_ns;
        if (!away) events_seen_until_ns_ = seen.until_ns;
        const bool caught_up = !away && seen.until_ns >= watching_since_ns;
        if (caught_up && (exited || exit_held_)) {
          exited_ = true;
          exit_held_ = false;
          changed_.notify_all();
        }
      }
      // Tried again soon, without a growing back-off: the engine is a local socket, and
      // exits seen once it is back wait for its events (ExitCauseOf).
      if (away) Sleep(0.5);
    }
  }

  // Pulls the images the server asks to have ahead (AssignmentSet::prefetch: jobs waiting to
  // land here), one at a time, with progress in the log, so that their pulls overlap their
  // wait. A pull that failed is tried again after a minute, not on every change of the
  // assignments.
  void Prefetch() {
    DockerClient docker(options_.docker_socket);      // this thread's own
    std::map<std::string, Clock::time_point> failed;  // image: when its pull failed
    uint64_t seen = 0;
    while (!Stopping()) {
      std::vector<std::string> images;
      {
        std::unique_lock<std::mutex> lock(mu_);
        const auto due = Clock::now() + std::chrono::seconds(10);
        while (!Stopping() && set_.version == seen && Clock::now() < due)
          changed_.wait_for(lock, std::chrono::milliseconds(200));
        seen = set_.version;
        images = set_.prefetch;
      }
      std::erase_if(failed, [&](const auto& f) {
        return Clock::now() - f.second > std::chrono::minutes(1) ||
               std::find(images.begin(), images.end(), f.first) == images.end();
      });
      for (const std::string& image : images) {
        if (Stopping()) break;
        if (failed.count(image)) continue;
        try {
          if (docker.HasImage(image)) continue;
          Log("prefetching " + image + " for a job waiting to run here");
          const auto began = Clock::now();
          docker.Pull(
              image, [&](const std::string& line) { Log(image + ": " + line); }, &ending_);
          char took[32];
          std::snprintf(took, sizeof took, "%.1f", SecondsSince(began));
          Log("prefetched " + image + " in " + took + " s");
        } catch (const DockerError& e) {
          failed[image] = Clock::now();
          Log("cannot prefetch " + image + ": " + e.what());
        }
      }
    }
  }

  // Makes the node's containers what the newest assignments say, handing the replicas to
  // start to the start workers. False when a replica must wait for an earlier run of its job
  // to stop: the version is then not acted on yet.
  bool Reconcile() {
    AssignmentSet set;
    std::set<RunKey> in_flight;  // queued or being started, looked at before the listing: a
                                 // start that ends after it is in the listing or in here
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Before the first answer nothing is known to be unwanted: a restarted agent must not
      // stop the containers it is about to adopt.
      if (set_.version == 0) return true;
      if (OutOfTouch()) return false;
      set = set_;
      for (const auto& [key, version] : in_flight_) in_flight.insert(key);
    }
    std::map<RunKey, ContainerInfo> found;
    for (ContainerInfo& c : docker_.List("berth.node=" + options_.node)) {
      RunKey key;
      if (KeyOf(c, &key)) found[key] = std::move(c);
    }
    std::set<RunKey> wanted;
    std::vector<StartTask> to_start;
    bool done = true;
    for (const Assignment& a : set.assignments) {
      const RunKey key{a.job, a.replica, a.placement};
      wanted.insert(key);
      bool started_here = false;
      {
        std::lock_guard<std::mutex> lock(books_mu_);
        log_cursor_.try_emplace(key, a.log_since);
        if (failed_.count(key)) continue;  // reported; the server re-places it
        started_here = started_at_.count(key) > 0;
      }
      if (in_flight.count(key)) continue;
      auto it = found.find(key);
      // A kept container whose replica is assigned again (an elastic job grown back on the
      // node, under the same placement) is no run of it: gone, so that the replica starts.
      if (it != found.end() && !it->second.running && ForgetKept(it->second.id, key, a.log_since)) {
        Log("removing the kept container " + it->second.id.substr(0, 12) + ": job " +
            std::to_string(a.job) + " replica " + std::to_string(a.replica) + " runs here again");
        docker_.Remove(it->second.id, true);
        found.erase(it);
        it = found.end();
      }
      // An earlier run of the same job still stopping here (the node was lost and came back)
      // holds the same GPUs: the new one starts once it has stopped, so the job never runs
      // twice on this node.
      const bool earlier_run = std::any_of(found.begin(), found.end(), [&](const auto& f) {
        return std::get<0>(f.first) == a.job && std::get<2>(f.first) != a.placement &&
               f.second.running;
      });
      if (it == found.end() && earlier_run)
        done = false;
      else if (it == found.end()) {
        // A run that started (the server saw it, or this agent started it) and is gone was
        // removed by hand or lost by the engine: it is reported gone and placed again. Made
        // again here, it would run a second time that nobody sees (review).
        if (!a.ran && !started_here) to_start.push_back({a, key});
      } else if (it->second.status == "created" && !StartCreated(it->second))
        done = false;  // created again by the next pass: not acted on until it starts
      else if (it->second.running)
        Rebind(it->second, a);
    }
    std::erase_if(rebind_refused_, [&](const auto& r) {
      return std::none_of(found.begin(), found.end(),
                          [&](const auto& f) { return f.second.id == r.first; });
    });
    {
      std::lock_guard<std::mutex> lock(books_mu_);
      std::erase_if(off_gpus_, [&](const auto& o) {
        const auto f = found.find(o.first);
        return f == found.end() || !f->second.running;
      });
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (StartTask& task : to_start) {
        // The replica may have been assigned at any version after the last one reconciled
        // (the watch hands over only the newest), or, when an earlier start found the engine
        // gone, after the one reconciled before that start.
        const auto retry = retry_before_.find(task.key);
        in_flight_[task.key] = retry != retry_before_.end() ? retry->second : reconciled_version_;
        if (retry != retry_before_.end()) retry_before_.erase(retry);
        start_queue_.push_back(std::move(task));
      }
      std::erase_if(retry_before_,
                    [&](const auto& r) { return !wanted.count(r.first) || found.count(r.first); });
      changed_.notify_all();
    }
    const std::set<std::string> keep = FailedToKeep(found, wanted);
    for (const auto& [key, c] : found) {
      if (wanted.count(key)) continue;
      if (c.running) {
        StopInBackground(c);
        continue;
      }
      if (c.status == "created") {  // never ran: nothing to stop or to send
        if (!in_flight.count(key)) docker_.Remove(c.id, true);
        continue;
      }
      std::unique_lock<std::mutex> lock(books_mu_);
      if (!all_logs_sent_.count(key)) continue;  // removed once its last lines are sent
      if (keep.count(c.id)) {
        if (kept_.insert(c.id).second)
          Log("keeping the container of job " + std::to_string(std::get<0>(key)) + " replica " +
              std::to_string(std::get<1>(key)) + ", which failed (exit code " +
              std::to_string(c.exit_code) + (c.oom_killed ? ", out of memory" : "") +
              "), for docker logs / docker inspect " + c.id.substr(0, 12) + " (--keep-failed " +
              std::to_string(options_.keep_failed) + ")");
        continue;
      }
      kept_.erase(c.id);
      lock.unlock();
      docker_.Remove(c.id, true);
      lock.lock();
      all_logs_sent_.erase(key);
      log_cursor_.erase(key);
      logs_full_.erase(key);
    }
    {  // What no longer runs needs no more bookkeeping.
      std::lock_guard<std::mutex> lock(books_mu_);
      std::erase_if(failed_, [&](const auto& f) { return !wanted.count(f.first); });
      std::erase_if(phases_, [&](const auto& p) { return !wanted.count(p.first); });
      std::erase_if(started_at_, [&](const auto& p) { return !wanted.count(p.first); });
      const auto gone = [&](const RunKey& key) { return !wanted.count(key) && !found.count(key); };
      std::erase_if(log_cursor_, [&](const auto& l) { return gone(l.first); });
      std::erase_if(all_logs_sent_, gone);
      std::erase_if(logs_full_, gone);
      std::erase_if(kept_, [&](const std::string& id) { return !keep.count(id); });
    }
    if (!done) return false;
    std::lock_guard<std::mutex> lock(mu_);
    reconciled_version_ = set.version;
    return true;
  }

  // The version the heartbeat reports acted on: the last one reconciled, but none that may
  // have assigned a replica still starting, or to be started again (the server would take it
  // for lost).
  uint64_t AppliedVersion() const {  // under mu_
    uint64_t applied = reconciled_version_;
    for (const auto& [key, before] : in_flight_) applied = std::min(applied, before);
    for (const auto& [key, before] : retry_before_) applied = std::min(applied, before);
    return applied;
  }

  // The ids of the containers to keep after their jobs end (--keep-failed): the newest
  // options_.keep_failed of those that failed by themselves (exited non-zero or out of memory;
  // not stopped by berth, as for a preemption or `berth stop`), so that a platform engineer can
  // still read why. Bounded, so that a job failing over and over does not fill the disk.
  // Exited non-zero, and not by SIGTERM or SIGKILL (143, 137): what a stop does, which an agent
  // restarted since cannot tell from its own (stopped_by_us_ is not kept).
  static bool FailedByItself(const ContainerInfo& c) {
    return c.exit_code != 0 && c.exit_code != 128 + SIGTERM && c.exit_code != 128 + SIGKILL;
  }

  std::set<std::string> FailedToKeep(const std::map<RunKey, ContainerInfo>& found,
                                     const std::set<RunKey>& wanted) {
    std::vector<std::pair<double, std::string>> failed;  // (finished, id)
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [key, c] : found)
        if (!wanted.count(key) && !c.running && c.status != "created" &&
            // Out of memory: its main process killed (137), not a child it outlived.
            (FailedByItself(c) || (c.oom_killed && c.exit_code != 0)) &&
            !stopped_by_us_.count(c.id))
          failed.emplace_back(EngineSeconds(c.finished_at), c.id);
    }
    const size_t most = static_cast<size_t>(std::max(options_.keep_failed, 0));
    std::sort(failed.rbegin(), failed.rend());
    std::set<std::string> keep;
    for (size_t i = 0; i < std::min(most, failed.size()); ++i) keep.insert(failed[i].second);
    return keep;
  }

  // True when `id` was kept (FailedToKeep): it is no longer, and the books of its run are
  // those of a new one, read from `log_since`.
  bool ForgetKept(const std::string& id, const RunKey& key, const std::string& log_since) {
    std::lock_guard<std::mutex> lock(books_mu_);
    if (kept_.erase(id) == 0) return false;
    all_logs_sent_.erase(key);
    logs_full_.erase(key);
    log_cursor_[key] = log_since;
    return true;
  }

  // Starts a container found created (before a restart of the agent or the engine, never
  // started). One the engine cannot start (a task left by an engine killed mid-start) is
  // removed, to be created again: false then. Throws DockerError when the engine is gone.
  bool StartCreated(const ContainerInfo& c) {
    try {
      docker_.Start(c.id);
      return true;
    } catch (const DockerError& e) {
      if (e.status == 0) throw;
      Log("cannot start container " + c.id.substr(0, 12) + " (" + e.what() +
          "); removing it to create it again");
      docker_.Remove(c.id, true);
      return false;
    }
  }

  // Takes replicas off the start queue, one at a time, until stop. One no longer assigned
  // (stopped while it waited) is dropped. A start that finds the engine gone is handed back to
  // the next pass, after a back-off: the pass finds what the start made, if anything.
  void StartWorker() {
    DockerClient docker(options_.docker_socket);  // one client a thread
    Backoff engine_backoff;
    while (true) {
      StartTask task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        while (!Stopping() && start_queue_.empty())
          changed_.wait_for(lock, std::chrono::milliseconds(200));
        if (Stopping()) return;
        task = std::move(start_queue_.front());
        start_queue_.pop_front();
        const auto& assigned = set_.assignments;
        if (std::none_of(assigned.begin(), assigned.end(), [&](const Assignment& a) {
              return RunKey{a.job, a.replica, a.placement} == task.key;
            })) {
          in_flight_.erase(task.key);
          start_ended_ = true;
          changed_.notify_all();
          continue;
        }
        // Queued before the agent fell out of touch: made again by a pass once it is back
        // (review: a woken agent started a queued container before it learned it was replaced).
        if (OutOfTouch()) {
          retry_before_[task.key] = in_flight_[task.key];
          in_flight_.erase(task.key);
          start_ended_ = true;
          changed_.notify_all();
          continue;
        }
      }
      bool engine_gone = false;
      try {
        Start(docker, task.assignment, task.key);
        engine_backoff.Reset();
      } catch (const DockerError& e) {
        Log(e.what());
        engine_gone = true;
      }
      if (engine_gone) Sleep(engine_backoff.Next());
      std::lock_guard<std::mutex> lock(mu_);
      if (engine_gone) retry_before_[task.key] = in_flight_[task.key];
      in_flight_.erase(task.key);
      start_ended_ = true;
      changed_.notify_all();
    }
  }

  // Why a MIG slice cannot start here ("" when it can): on real GPUs it needs the instance at
  // its place, which the server names by UUID when the node registered one there; given the
  // parent GPU instead, the container would see every instance of it.
  std::string MigProblem(const Assignment& a) const {
    if (a.mig_profile.empty() || options_.simulated) return "";
    if (a.gpu_uuids.size() == 1 && a.gpu_uuids[0].rfind("MIG-", 0) == 0) return "";
    const std::string gpu = a.gpus.empty() ? "?" : std::to_string(a.gpus[0]);
    return "GPU " + gpu + " has no MIG instance " + a.mig_profile + " at memory slot " +
           std::to_string(a.mig_start) +
           ": make the GPU's instances as the cluster file lays them out (nvidia-smi mig -cgi), "
           "or declare the layout they have (mig.layout in the cluster file; berth agent prints "
           "it as it starts)";
  }

  void Start(DockerClient& docker, const Assignment& a, const RunKey& key) {
    std::map<std::string, double> phases;
    std::string id;
    {
      std::lock_guard<std::mutex> lock(books_mu_);
      starting_.insert(key);
    }
    // However the start ends, its phases (or its failure) are in the books before a report may
    // say the container exited.
    struct Started {
      Agent* agent;
      const RunKey& key;
      ~Started() {
        std::lock_guard<std::mutex> lock(agent->books_mu_);
        agent->starting_.erase(key);
      }
    } started{this, key};
    std::string why = MigProblem(a);
    for (const Mounted& m : a.mounts)
      if (const std::string link = WhyHostPathIsNotPlain(m.host); why.empty() && !link.empty())
        why = "volume " + m.host + ": " + link;
    if (!why.empty()) {
      std::lock_guard<std::mutex> lock(books_mu_);
      failed_[key] = why;
      Log("job " + std::to_string(a.job) + " could not be started: " + why);
      return;
    }
    try {
      auto step = Clock::now();
      if (!docker.HasImage(a.image)) {
        Log("pulling " + a.image + " for job " + std::to_string(a.job));
        docker.Pull(
            a.image, [&](const std::string& line) { Log(a.image + ": " + line); }, &ending_);
        phases["pull"] = SecondsSince(step);
        step = Clock::now();
      }
      ContainerSpec spec;
      spec.image = a.image;
      spec.command = a.command;
      spec.env = a.env;
      // The NVIDIA runtime (a host's default one, often) exposes the GPUs this variable names,
      // and CUDA images set it to "all": it is set to the job's own, "void" (none) without.
      // A job's own is dropped (one from an older server that did not refuse it).
      std::erase_if(spec.env, [](const std::string& kv) {
        return kv.starts_with("NVIDIA_VISIBLE_DEVICES=");
      });
      std::string gpus;
      for (const std::string& uuid : a.gpu_uuids) gpus += (gpus.empty() ? "" : ",") + uuid;
      if (options_.simulated) {
        spec.env.push_back("NVIDIA_VISIBLE_DEVICES=" + (gpus.empty() ? "none" : gpus));
        spec.env.push_back("CUDA_VISIBLE_DEVICES=" + gpus);
      } else {
        spec.env.push_back("NVIDIA_VISIBLE_DEVICES=" + (gpus.empty() ? "void" : gpus));
        spec.gpu_device_ids = a.gpu_uuids;
      }
      spec.env.push_back("BERTH_JOB_ID=" + std::to_string(a.job));
      spec.env.push_back("BERTH_REPLICA=" + std::to_string(a.replica));
      spec.labels = {
          {"berth.job", std::to_string(a.job)},       {"berth.replica", std::to_string(a.replica)},
          {"berth.placement", a.placement},           {"berth.node", options_.node},
          {"berth.grace", std::to_string(a.grace_s)}, {"berth.name", a.name}};
      for (const Mounted& m : a.mounts) spec.mounts.push_back({m.host, m.container, m.read_only});
      spec.shm_bytes = a.shm_bytes;
      spec.memory_bytes = a.memory_bytes;
      spec.nano_cpus = a.nano_cpus;
      spec.cpuset_cpus = OnHost(a.cpuset_cpus, host_cpus_, "CPUs");
      spec.cpuset_mems = OnHost(a.cpuset_mems, host_mems_, "NUMA nodes");
      spec.name = ContainerName(options_.node, key);
      try {
        id = docker.Create(spec);
      } catch (const DockerError& e) {
        if (e.status != 409) throw;
        // An earlier create of this run made it (its answer was lost): that one is the run's.
        const ContainerInfo made = docker.Inspect(spec.name);
        RunKey made_key;
        if (!KeyOf(made, &made_key) || made_key != key)
          throw DockerError(409, "a container named " + spec.name +
                                     " that berth did not make is in the way: remove it");
        if (made.status != "created") return;  // started already: never run twice
        id = made.id;
      }
      phases["create"] = SecondsSince(step);
      step = Clock::now();
      docker.Start(id);
      phases["start"] = SecondsSince(step);
      std::lock_guard<std::mutex> lock(books_mu_);
      phases_[key] = phases;
      started_at_[key] = WallSeconds();
    } catch (const DockerError& e) {
      if (e.status == 0) throw;  // the engine is gone: nothing is wrong with the job
      std::unique_lock<std::mutex> lock(books_mu_);
      failed_[key] = e.what();
      lock.unlock();
      if (!id.empty()) docker.Remove(id, true);  // created, not started: nothing to keep
      Log("job " + std::to_string(a.job) + " could not be started: " + e.what());
    }
  }

  // Makes a running container's CPU set the assignment's: the server may move a replica's
  // CPUs, and a hand-made `docker update` is undone. A change the engine refuses is said once
  // and not tried again for that container. Throws DockerError when the engine is gone.
  // A container left off its GPUs' NUMA node (the engine refused the move) is reported so
  // (ContainerReport::off_gpus), and becomes the node's condition on the server.
  void Rebind(const ContainerInfo& c, const Assignment& a) {
    const RunKey key{a.job, a.replica, a.placement};
    const std::string cpus = OnHost(a.cpuset_cpus, host_cpus_, "CPUs");
    const std::string mems = OnHost(a.cpuset_mems, host_mems_, "NUMA nodes");
    if (cpus.empty() || (SameList(cpus, c.cpuset_cpus) && SameList(mems, c.cpuset_mems))) {
      std::lock_guard<std::mutex> lock(books_mu_);
      off_gpus_.erase(key);
      return;
    }
    const std::string wanted = cpus + "/" + mems;
    if (const auto r = rebind_refused_.find(c.id);
        r != rebind_refused_.end() && r->second == wanted)
      return;
    const std::string has = "CPUs " + (c.cpuset_cpus.empty() ? "any" : c.cpuset_cpus) +
                            ", NUMA nodes " + (c.cpuset_mems.empty() ? "any" : c.cpuset_mems);
    try {
      docker_.UpdateCpuset(c.id, cpus, mems);
      Log("container " + c.id.substr(0, 12) + " of job " + std::to_string(a.job) + ": " + has +
          " -> CPUs " + cpus + ", NUMA nodes " + mems);
      std::lock_guard<std::mutex> lock(books_mu_);
      off_gpus_.erase(key);
    } catch (const DockerError& e) {
      if (e.status == 0) throw;
      rebind_refused_[c.id] = wanted;
      Log("cannot move container " + c.id.substr(0, 12) + " to CPUs " + cpus + ": " + e.what());
      std::string why = "runs on " + has + " rather than its GPUs' (CPUs " + cpus +
                        ", NUMA nodes " + mems + "): the engine refused the move: " + e.what();
      if (why.size() > kMaxOffGpusText) {  // cut between characters
        size_t cut = kMaxOffGpusText;
        while (cut > 0 && (static_cast<unsigned char>(why[cut]) & 0xC0) == 0x80) --cut;
        why.resize(cut);
      }
      std::lock_guard<std::mutex> lock(books_mu_);
      off_gpus_[key] = std::move(why);
    }
  }

  // Whether a CPU or NUMA node list the agent wants is the one a container has, however
  // written ("0-2" is "0,1,2"). Nothing wanted is always had: the engine keeps what it has.
  static bool SameList(const std::string& wanted, const std::string& has) {
    if (wanted.empty()) return true;
    try {
      return ParseCpuList(wanted, "wanted") == ParseCpuList(has, "the container's");
    } catch (const ConfigError&) {
      return false;
    }
  }

  // The part of an assigned CPU or NUMA node list this host has; "" (no pinning) for none. A
  // node declared with CPUs the host lacks (simulated GPUs, a wrong cluster file) is said once.
  std::string OnHost(const std::string& assigned, const std::vector<int>& host, const char* what) {
    if (assigned.empty() || host.empty()) return "";
    std::vector<int> wanted, have;
    try {
      wanted = ParseCpuList(assigned, "the assignment");
    } catch (const ConfigError&) {
      return "";
    }
    for (int id : wanted)
      if (std::binary_search(host.begin(), host.end(), id)) have.push_back(id);
    std::unique_lock<std::mutex> lock(log_mu_);
    const bool first = have.size() != wanted.size() && pinning_warned_.insert(assigned).second;
    lock.unlock();
    if (first)
      Log(std::string("the server assigns ") + what + " " + assigned + " and this host has " +
          FormatCpuList(host) + ": pinned to " + (have.empty() ? "none" : FormatCpuList(have)) +
          "; check the cluster file's sockets for this node");
    return have.empty() ? "" : FormatCpuList(have);
  }

  // The job's grace period, as its container was labelled when created.
  static int GraceOf(const ContainerInfo& c) {
    const auto g = c.labels.find("berth.grace");
    return g == c.labels.end() ? 30 : std::clamp(std::atoi(g->second.c_str()), 0, 86400);
  }

  // `remove`: removed too once stopped (a copy of a job that runs on another engine now).
  void StopInBackground(const ContainerInfo& c, bool remove = false) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_by_us_[c.id] = Clock::now();  // before the engine's kill event can be seen
      if (remove) remove_after_stop_.insert(c.id);
      if (!stopping_.insert(c.id).second) return;  // already being stopped: it sees the set
    }
    const int grace = GraceOf(c);
    Log("stopping container " + c.id.substr(0, 12) + " (grace " + std::to_string(grace) + " s)");
    std::thread([this, id = c.id, grace] {
      try {
        DockerClient docker(options_.docker_socket);  // one client a thread
        docker.Stop(id, grace);
        bool remove = false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          remove = remove_after_stop_.erase(id) > 0;
        }
        if (remove) docker.Remove(id, true);
      } catch (const DockerError& e) {
        Log(e.what());
      }
      std::lock_guard<std::mutex> lock(mu_);
      remove_after_stop_.erase(id);
      stopping_.erase(id);
      changed_.notify_all();
    }).detach();
  }

  // The container's contention since the last heartbeat, from its cgroup; nothing on the
  // first sample, or where the cgroup cannot be read.
  void Contention(const std::string& id, ContainerReport* c) {
    const std::optional<ContainerCgroup> cgroup = FindContainerCgroup(id, options_.cgroup_root);
    if (!cgroup) return;
    CgroupSample sample;
    try {
      sample = ReadCgroupSample(*cgroup);
    } catch (const ConfigError& e) {
      if (warned_.insert("cgroup").second) Log(e.what());
      return;
    }
    const auto now = Clock::now();
    const auto before = samples_.find(id);
    if (before != samples_.end()) {
      const double wall = std::chrono::duration<double>(now - before->second.first).count();
      SetContention(GradeContention(before->second.second, sample, wall, capacity_), c);
    }
    samples_[id] = {now, sample};
    const auto measured = [](int64_t v) { return v >= 0 ? static_cast<double>(v) : -1.0; };
    c->cpu_throttled_periods = measured(sample.cpu_nr_throttled);
    c->cpu_throttled_seconds =
        sample.cpu_throttled_usec >= 0 ? static_cast<double>(sample.cpu_throttled_usec) / 1e6 : -1;
    c->io_read_bytes = measured(sample.io_read_bytes);
    c->io_write_bytes = measured(sample.io_write_bytes);
    c->memory_bytes = measured(sample.memory_bytes);
    c->memory_limit_bytes = measured(sample.memory_limit_bytes);
    const auto percent = [](double v) { return v >= 0 && v <= 100 ? v : -1.0; };
    c->cpu_pressure = percent(sample.cpu_pressure);
    c->memory_pressure = percent(sample.memory_pressure);
    c->io_pressure = percent(sample.io_pressure);
    try {
      if (const std::optional<NetBytes> net = ReadContainerNetBytes(*cgroup, options_.proc_root)) {
        c->net_rx_bytes = static_cast<double>(net->rx_bytes);
        c->net_tx_bytes = static_cast<double>(net->tx_bytes);
      }
    } catch (const ConfigError& e) {
      if (warned_.insert("net").second) Log(e.what());
    }
  }

  // The node's GPUs as last sampled, from a DCGM exporter or NVML, by a thread of their own, so
  // that neither an exporter answering slowly nor NVML held in the driver delays a report.
  struct GpuSamples {
    std::mutex mu;
    std::condition_variable wake;  // at `stop`, and when sampling ends
    bool stop = false;
    bool sampling = false;  // the sampler thread runs
    std::string why;        // NVML is not usable (said once)
    std::vector<GpuReport> gpus;
    Clock::time_point at;  // of `gpus`
  };

  // The GPUs as last sampled (SampleDcgm, SampleNvml), while that is recent; none without a
  // source.
  std::vector<GpuReport> LatestGpus() {
    std::lock_guard<std::mutex> lock(gpu_samples_->mu);
    if (!gpu_samples_->why.empty() && warned_.insert("nvml").second)
      Log("no GPU telemetry (" + gpu_samples_->why + "); give a DCGM exporter with --dcgm-url");
    const auto stale = std::chrono::duration<double>(3 * options_.heartbeat_s + 5);
    if (Clock::now() - gpu_samples_->at > stale) return {};
    return gpu_samples_->gpus;
  }

  // Samples the GPUs through NVML every `period_s` until stopped. A thread of its own, detached
  // and holding only `samples`: a GPU fallen off the bus can keep NVML in the driver for ever,
  // and then its samples go stale instead of the heartbeat stalling.
  static void SampleNvml(std::shared_ptr<GpuSamples> samples, std::string library,
                         std::vector<std::string> uuids, double period_s) {
    std::string why;
    std::unique_ptr<NvmlSampler> sampler = NvmlSampler::Open(library, uuids, &why);
    std::unique_lock<std::mutex> lock(samples->mu);
    samples->why = why;
    while (sampler != nullptr && !samples->stop) {
      lock.unlock();
      std::vector<GpuReport> gpus = sampler->Sample();
      lock.lock();
      samples->gpus = std::move(gpus);
      samples->at = Clock::now();
      samples->wake.wait_for(lock, std::chrono::duration<double>(period_s));
    }
    lock.unlock();
    sampler.reset();  // NVML's shutdown
    lock.lock();
    samples->sampling = false;
    samples->wake.notify_all();
  }

  // Scrapes the DCGM exporter every heartbeat until the agent ends.
  void SampleDcgm() {
    while (!Stopping()) {
      std::vector<GpuReport> gpus = ScrapeDcgm();
      {
        std::lock_guard<std::mutex> lock(gpu_samples_->mu);
        gpu_samples_->gpus = std::move(gpus);
        gpu_samples_->at = Clock::now();
      }
      Sleep(options_.heartbeat_s);
    }
  }

  // The node's GPUs as the DCGM exporter sees them; none when it does not answer (said once).
  std::vector<GpuReport> ScrapeDcgm() {
    std::vector<GpuReport> out;
    const std::string& url = options_.dcgm_url;
    const size_t scheme = url.find("://");
    const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    // Bounded in time and size, so that an exporter answering slowly, or without end, leaves
    // samples 2 s late at most and never grows the agent (review: when the scrape ran in the
    // report's path, the node went lost, and its job ran twice).
    httplib::Client client(url.substr(0, slash));
    client.set_connection_timeout(1);
    client.set_read_timeout(1);
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    std::string body;
    bool cut = false;
    const httplib::Result res =
        client.Get(slash == std::string::npos ? "/metrics" : url.substr(slash),
                   [&](const char* data, size_t size) {
                     cut = body.size() + size > kMaxDcgmBytes || Clock::now() > deadline;
                     if (!cut) body.append(data, size);
                     return !cut;
                   });
    if (cut || !res || res->status != 200) {
      if (!std::exchange(dcgm_warned_, true))
        Log("the DCGM exporter at " + url + " does not answer" +
            (cut ? " within 2 s and " + std::to_string(kMaxDcgmBytes >> 20) + " MiB"
                 : " (" + ErrorOf(res) + ")"));
      return out;
    }
    DcgmScrape scrape;
    try {
      scrape = ParseDcgmMetrics(body, url);
    } catch (const ConfigError& e) {
      if (!std::exchange(dcgm_warned_, true)) Log(e.what());
      return out;
    }
    const std::vector<std::string>& uuids = options_.gpu_uuids;
    // Whole GPUs by UUID first, then by index for the slots no UUID took: an exporter whose
    // index labels disagree with its UUIDs reports each GPU once, as itself.
    std::set<int> taken;
    for (const bool by_uuid : {true, false})
      for (const DcgmGpuMetrics& m : scrape.gpus) {
        if (m.mig_instance >= 0) continue;
        const auto found = std::find(uuids.begin(), uuids.end(), m.uuid);
        if (by_uuid != (found != uuids.end())) continue;
        const int gpu = by_uuid ? static_cast<int>(found - uuids.begin()) : m.gpu;
        if (gpu < 0 || gpu >= static_cast<int>(uuids.size()) || !taken.insert(gpu).second) continue;
        out.push_back(ToGpuReport(gpu, m));
      }
    return out;
  }

  // The node's images, for the server's image-locality score, when they differ from what the
  // server was last sent (`*now` says what they are); none when they do not, or when the engine
  // cannot list them (said once).
  std::optional<std::vector<ReportedImage>> ChangedImages(DockerClient& docker, std::string* now) {
    std::vector<ImageInfo> images;
    try {
      images = docker.Images(&image_layers_);
    } catch (const DockerError& e) {
      if (warned_.insert("images").second) Log(std::string("cannot list the images: ") + e.what());
      return std::nullopt;
    }
    std::sort(images.begin(), images.end(),
              [](const ImageInfo& a, const ImageInfo& b) { return a.id < b.id; });
    now->clear();
    for (const ImageInfo& image : images) {
      *now += image.id;
      for (const std::string& name : image.names) *now += " " + name;
      *now += "\n";
    }
    if (*now == images_sent_) return std::nullopt;
    std::vector<ReportedImage> out;
    size_t bytes = 0;  // of their JSON, about
    for (const ImageInfo& image : images) {
      ReportedImage reported;
      size_t size = 32;
      for (const std::string& name : image.names)  // within what the protocol takes
        if (name.size() <= 1024 && reported.names.size() < kMaxImageNames) {
          reported.names.push_back(name);
          size += name.size() + 3;
        }
      for (const ImageLayer& l : image.layers)
        if (l.digest.size() <= 128 && reported.layers.size() < kMaxImageLayers) {
          reported.layers.push_back({l.digest, std::clamp<int64_t>(l.bytes, 0, kMaxLayerBytes)});
          size += l.digest.size() + 40;
        }
      if (out.size() == kMaxReportImages || bytes + size > kMaxReportImageBytes) {
        if (warned_.insert("image count").second)
          Log(std::to_string(images.size()) +
              " images on this node: the server is told of the first " +
              std::to_string(out.size()) + " only");
        break;
      }
      bytes += size;
      out.push_back(std::move(reported));
    }
    return out;
  }

  // The heartbeat: every container of ours with its state, and new log lines.
  bool SendReport(DockerClient& docker) {
    AgentReport report;
    std::map<RunKey, std::string> new_cursor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Not before the first assignments: they carry where the server's copy of each log
      // ends, and reading an adopted container from its start would store its lines twice.
      if (set_.version == 0) return true;
      report.applied_version = AppliedVersion();
    }
    // The books as they are now; what changes meanwhile goes with the next report.
    std::map<RunKey, std::string> failed, cursors, off_gpus;
    std::map<RunKey, std::map<std::string, double>> phases;
    std::map<RunKey, double> started_at;
    std::set<RunKey> starting, logs_full;
    std::map<std::string, int64_t> signalled;                // container id: by the engine, when
    std::map<std::string, Clock::time_point> stopped_by_us;  // container id: when
    int64_t events_seen_until_ns = 0;
    bool binary_logs = false, interrupted_state = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      binary_logs = binary_logs_;
      interrupted_state = interrupted_state_;
      signalled = engine_signalled_;
      stopped_by_us = stopped_by_us_;
      events_seen_until_ns = events_seen_until_ns_;
    }
    bool hold_exits = false;
    {
      std::lock_guard<std::mutex> lock(books_mu_);
      failed = failed_;
      logs_full = logs_full_;
      off_gpus = off_gpus_;
      started_at = started_at_;
      cursors = log_cursor_;
      phases = phases_;
      starting = starting_;
    }
    size_t log_budget = kMaxReportLogBytes;
    log_backlog_ = false;
    std::set<RunKey> ended;          // stopped containers whose every line this report sends
    std::map<RunKey, size_t> taken;  // of an exited container's read ahead, lines sent
    std::set<RunKey> exited;         // the containers listed exited
    std::set<std::string> seen;
    // Exited containers first: their jobs hold their GPUs until all their output is in, and a
    // chatty running one read first took the report's whole budget every time.
    std::vector<ContainerInfo> listing = docker.List("berth.node=" + options_.node);
    std::stable_partition(listing.begin(), listing.end(),
                          [](const ContainerInfo& c) { return !c.running; });
    std::set<std::string> kept;
    {
      std::lock_guard<std::mutex> lock(books_mu_);
      kept = kept_;
    }
    for (const ContainerInfo& listed : listing) {
      RunKey key;
      // A kept container's job has ended and the server has all its output: nothing to tell.
      if (!KeyOf(listed, &key) || kept.count(listed.id)) continue;
      seen.insert(listed.id);
      ContainerReport c;
      std::tie(c.job, c.replica, c.placement) = key;
      c.container_id = listed.id;
      c.state = listed.status == "created" || starting.count(key) ? "starting"
                : listed.running                                  ? "running"
                                                                  : "exited";
      c.exit_code = std::clamp(listed.exit_code, 0, 255);
      if (c.state == "exited") {
        ExitEvidence evidence;
        evidence.finished_s = EngineSeconds(listed.finished_at);
        if (const auto at = signalled.find(listed.id); at != signalled.end())
          evidence.signalled_s = at->second / 1e9;
        evidence.stopped_by_agent = stopped_by_us.count(listed.id) > 0;
        evidence.grace_s = GraceOf(listed);
        evidence.events_seen_until_s = events_seen_until_ns / 1e9;
        evidence.seen_exited_s =
            SecondsSince(first_seen_exited_.try_emplace(listed.id, Clock::now()).first->second);
        const ExitCause cause = ExitCauseOf(evidence);
        if (cause == ExitCause::kNotKnownYet) hold_exits = true;
        // A server older than the state takes it for an exit, as it was before.
        c.state = cause == ExitCause::kNotKnownYet                   ? "running"
                  : cause == ExitCause::kEngine && interrupted_state ? "interrupted"
                                                                     : "exited";
      }
      if (const auto p = phases.find(key); p != phases.end()) c.phases = p->second;
      if (listed.running) Contention(listed.id, &c);
      if (!listed.running) exited.insert(key);
      if (const auto o = off_gpus.find(key); o != off_gpus.end() && listed.running)
        c.off_gpus = o->second;
      // A container of a run not assigned here (an adopted leftover) is read from its start;
      // the server refuses what it already holds and says where to read from.
      std::string cursor = cursors.try_emplace(key, "").first->second;
      // A read after its last line found nothing more, or there is nothing more to send.
      bool drained = logs_full.count(key) > 0;
      LogChunk chunk{c.job, c.replica, c.placement, cursor, "", "", {}};
      // A running container is read once a report. A stopped one is read until a read
      // reaches the end of its log, so that its job can end with this report rather than the
      // next. Only a read with the whole budget may cut a line (one longer than the budget):
      // with less, a long line waits whole for the next report.
      // Not read while its start has not returned (its books are not written yet): its first
      // line then still times the firstLog phase, next report.
      while (log_budget > 0 && !starting.count(key) && !drained) {
        std::vector<LogLine> lines;
        bool more = false;
        try {
          // Read past the budget: the lines after it tell where the read may stop (SafeStop).
          const size_t most = log_budget + kLogLookahead;
          const bool cut = log_budget == kMaxReportLogBytes;
          lines = listed.running ? docker.Logs(listed.id, cursor, most, &more, cut)
                                 : ReadExited(docker, listed.id, key, *chunk.from, taken[key], most,
                                              &more, cut);
        } catch (const DockerError& e) {
          if (e.status == 0) throw;  // the engine is gone: no report
          // Being removed, or gone since the listing: the others are still reported.
          break;
        }
        // The last phase of a cold start: from the start to the first line the job printed.
        const auto started = started_at.find(key);
        if (!lines.empty() && started != started_at.end() && !c.phases.empty() &&
            !c.phases.count("firstLog")) {
          if (const double at = EngineSeconds(lines.front().timestamp); at > 0) {
            c.phases["firstLog"] = std::max(0.0, at - started->second);
            std::lock_guard<std::mutex> lock(books_mu_);
            if (const auto p = phases_.find(key); p != phases_.end()) p->second = c.phases;
          }
        }
        // Made valid for a server that takes no base64 chunks here rather than when the report
        // is written, so that the stderr spans' offsets hold.
        if (!binary_logs)
          for (LogLine& line : lines) line.text = ValidUtf8(std::move(line.text));
        size_t fit = LinesThatFit(lines, log_budget, log_budget == kMaxReportLogBytes);
        if (fit < lines.size()) log_backlog_ = true;
        if (listed.running) fit = std::min(fit, SettledLines(lines));
        more = more || fit < lines.size();
        lines.resize(fit);
        if (!listed.running) taken[key] += fit;
        for (const LogLine& line : lines) {
          // The engine's stdout and stderr are not merged in time order: the cursor is the
          // latest line sent, so that it only moves on (a chunk not after the server's cursor
          // is dropped there, and the same read would be sent again and again).
          chunk.until = std::max(chunk.until, NormalizedTimestamp(line.timestamp));
          const size_t from = chunk.text.size();
          chunk.text += line.text;
          StderrSpans& spans = chunk.stderr_spans;
          if (line.stderr_stream && !spans.empty() && spans.back().second == from)
            spans.back().second = chunk.text.size();
          else if (line.stderr_stream && !line.text.empty())
            spans.emplace_back(from, chunk.text.size());
          log_budget -= std::min(log_budget, ReportCost(line));
        }
        if (!lines.empty()) cursor = chunk.until;
        drained = !more;
        if (drained || lines.empty() || listed.running) break;
      }
      if (!chunk.text.empty()) {
        new_cursor[key] = chunk.until;
        report.logs.push_back(std::move(chunk));
      }
      // A stopped container has sent everything once drained; until then it is reported
      // running: the server ends a job only once its whole output is in, so that `berth run`
      // and `berth logs` after the end miss nothing.
      const bool stopped = c.state == "exited" || c.state == "interrupted";
      if (stopped && drained) ended.insert(key);
      if (stopped && !drained) c.state = "running";
      if (log_budget == 0 && !drained) log_backlog_ = true;  // not read, or read in part
      report.containers.push_back(std::move(c));
    }
    report.gpus = LatestGpus();
    // The images every 10 s (they change with pulls and builds only), and until sent once.
    std::string images_now;
    if (images_sent_.empty() || Clock::now() - images_listed_ > std::chrono::seconds(10)) {
      images_listed_ = Clock::now();
      report.images = ChangedImages(docker, &images_now);
    }
    std::erase_if(samples_, [&](const auto& s) { return !seen.count(s.first); });
    std::erase_if(first_seen_exited_, [&](const auto& f) { return !seen.count(f.first); });
    for (const auto& [key, error] : failed) {
      ContainerReport c;
      std::tie(c.job, c.replica, c.placement) = key;
      c.state = "failed";
      c.error = error;
      report.containers.push_back(std::move(c));
    }
    // Reads ahead of containers gone are not needed.
    std::erase_if(read_ahead_, [&](const auto& r) { return !exited.count(r.first); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      exit_held_ = exit_held_ || hold_exits;
      // Nor are the signals of containers gone a while (a container made after this listing
      // may already be stopping).
      const double a_minute_ago = WallSeconds() - 60;
      std::erase_if(engine_signalled_, [&](const auto& s) {
        return !seen.count(s.first) && s.second / 1e9 < a_minute_ago;
      });
      std::erase_if(stopped_by_us_, [&](const auto& s) {
        return !seen.count(s.first) && Clock::now() - s.second > std::chrono::minutes(1);
      });
    }
    ReportReply reply;
    if (const Posted posted = PostReport(report, &reply); posted != Posted::kTaken)
      return posted == Posted::kRegisteredAgain;
    for (const auto& [key, lines] : taken) {  // sent: what is left follows the new cursor
      const auto ahead = read_ahead_.find(key);
      const auto sent_until = new_cursor.find(key);
      if (ahead == read_ahead_.end() || sent_until == new_cursor.end()) continue;
      std::vector<LogLine>& left = ahead->second.lines;
      left.erase(left.begin(), left.begin() + static_cast<ptrdiff_t>(std::min(lines, left.size())));
      ahead->second.after = sent_until->second;
    }
    if (report.images) images_sent_ = images_now;
    // A chunk not taken did not start where the server's copy ends: read again from there.
    for (const LogCursor& c : reply.log_cursors) {
      const RunKey key{c.job, c.replica, c.placement};
      if (new_cursor.count(key)) new_cursor[key] = c.cursor;
      ended.erase(key);
      read_ahead_.erase(key);
    }
    std::lock_guard<std::mutex> lock(books_mu_);
    for (const LogCursor& c : reply.logs_full) logs_full_.insert({c.job, c.replica, c.placement});
    for (const auto& [key, until] : new_cursor) log_cursor_[key] = until;
    all_logs_sent_.insert(ended.begin(), ended.end());
    return true;
  }

  // An exited container's lines after `from` (the report's cursor), past the `taken` this
  // report has already. Its log no longer changes, so one large read serves the reports that
  // send it: the engine reads a log from its start to find the cursor, and reading a 64 MiB
  // log 512 KiB a report took minutes while its job held the GPUs. `max_bytes`, `more` and
  // `cut` are as DockerClient::Logs's.
  std::vector<LogLine> ReadExited(DockerClient& docker, const std::string& id, const RunKey& key,
                                  const std::string& from, size_t taken, size_t max_bytes,
                                  bool* more, bool cut) {
    ReadAhead& ahead = read_ahead_[key];
    if (!ahead.read || ahead.after != from || (ahead.lines.empty() && ahead.more)) {
      size_t held = 0;
      for (const auto& [other, r] : read_ahead_)
        for (const LogLine& line : r.lines) held += line.text.size();
      const size_t most =
          held < kMaxReadAheadBytes ? std::max(max_bytes, kReadAheadBytes) : max_bytes;
      bool after_them = false;
      std::vector<LogLine> lines = docker.Logs(id, from, most, &after_them, cut);
      ahead = {from, std::move(lines), after_them, true};
    }
    *more = ahead.more;
    if (taken < ahead.lines.size())
      return {ahead.lines.begin() + static_cast<ptrdiff_t>(taken), ahead.lines.end()};
    if (ahead.more) log_backlog_ = true;  // the next report reads on at once
    return {};
  }

  // Tells the server the engine cannot be reached (AgentReport::runtime_error).
  // True once the server has it (as SendReport).
  bool ReportEngineAway(const std::string& error) {
    AgentReport report;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (set_.version == 0) return true;  // as SendReport: not before the first assignments
      report.applied_version = AppliedVersion();
    }
    report.runtime_error = RuntimeErrorLine(error);
    report.gpus = LatestGpus();
    return PostReport(report) != Posted::kFailed;
  }

  enum class Posted { kTaken, kRegisteredAgain, kFailed };
  // Not a copy: a report may carry a MiB of logs. `reply`, when given, is the server's answer
  // to a report it took.
  Posted PostReport(AgentReport& report, ReportReply* reply = nullptr) {
    report.instance = instance_;
    const auto sent = Clock::now();
    const auto client = Connect(30);
    const httplib::Result res =
        client->Post("/v1/agents/" + options_.node + "/report",
                     ToJson(report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                     "application/json");
    if (ReplacedIn(res) || NodeUnknownIn(res)) return Posted::kFailed;
    if (res && res->status == 409) {  // a restarted server: register again
      Log("the server does not know this agent (it restarted); registering again");
      images_sent_.clear();  // the new server has none of them
      return Register() ? Posted::kRegisteredAgain : Posted::kFailed;
    }
    if (!res || res->status != 200) {
      Log("reporting failed (" + ErrorOf(res) + "); retrying");
      return Posted::kFailed;
    }
    if (reply != nullptr) {
      try {
        *reply = ParseReportReply(Json::parse(res->body));
      } catch (const std::exception& e) {  // taken all the same: the next report reads on
        Log(std::string("the server's answer to a report is not one: ") + e.what());
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    reached_server_ = sent;
    return Posted::kTaken;
  }

  const AgentOptions& options_;
  const std::atomic<bool>& stop_requested_;  // set by a signal handler: looked at, never waited on
  // The agent ends: stop was requested, or another agent process replaced this one. Pulls are
  // cancelled through it.
  std::atomic<bool> ending_{false};
  // This process, to the server: a second agent started under the same node name is told apart.
  const std::string instance_ = NewInstance();
  DockerClient docker_;  // the converging thread's; the heartbeat and stops use their own
  std::mutex mu_;
  std::condition_variable changed_;
  AssignmentSet set_;                // under mu_
  uint64_t reconciled_version_ = 0;  // under mu_
  // When the last report the server took (or registration) was sent; under mu_. The server
  // replaces an agent only after three report periods without one.
  Clock::time_point reached_server_;
  bool holding_ = false;  // under mu_: OutOfTouch said so
  // Under mu_: the server takes log text that is not UTF-8 (in base64) as it is; an older one
  // gets it made valid (ValidUtf8).
  bool binary_logs_ = false;
  bool interrupted_state_ = false;  // under mu_: the server takes the state "interrupted"
  // How long the server waits for it (its registration answer says; three report periods
  // unless it did not); under mu_.
  std::chrono::duration<double> replaceable_after_{3 * options_.heartbeat_s};
  // Replicas to start, and every replica queued or being started with the last version
  // reconciled before it was assigned; under mu_.
  struct StartTask {
    Assignment assignment;
    RunKey key;
  };
  std::deque<StartTask> start_queue_;
  std::map<RunKey, uint64_t> in_flight_;
  std::map<RunKey, uint64_t> retry_before_;  // starts that found the engine gone, to redo
  bool start_ended_ = false;                 // under mu_: a start ended since the last pass
  bool exited_ = false;                      // under mu_: a container exited since the report
  std::set<std::string> stopping_;           // container ids, under mu_
  std::set<std::string> remove_after_stop_;  // of those, to remove once stopped, under mu_
  // Under mu_: the containers the engine signalled (its kill events: container id, when), and
  // those the agent asked it to stop (id, when asked), so that an exit the agent did not ask
  // for is told apart (ExitCauseOf); every engine event before events_seen_until_ns_ has been
  // seen, and a report held an exit back until its events are (exit_held_).
  std::map<std::string, int64_t> engine_signalled_;
  std::map<std::string, Clock::time_point> stopped_by_us_;
  int64_t events_seen_until_ns_ = 0;
  bool exit_held_ = false;
  // The agent process that replaced this one, and its engine's identity; under mu_.
  std::string replaced_by_, replacing_engine_;
  bool node_unknown_ = false;     // the server has no such node (NodeUnknownIn): it is left
  bool registered_once_ = false;  // a registration was taken, under mu_
  std::map<std::string, std::string> rebind_refused_;  // container id: CPU set refused; the
                                                       // converging thread's
  httplib::Client* watch_client_ = nullptr;  // under mu_: stopped to end the watch at once
  // The books both the converging thread and the heartbeat keep, under books_mu_.
  std::mutex books_mu_;
  std::map<RunKey, std::string> failed_;    // could not be started: why
  std::map<RunKey, std::string> off_gpus_;  // running on CPUs away from its GPUs: how
  std::map<RunKey, std::map<std::string, double>> phases_;
  std::map<RunKey, double> started_at_;  // when its start returned, for its firstLog phase
  std::set<RunKey> starting_;            // being started: reported starting until its phases are in
  std::map<RunKey, std::string> log_cursor_;  // the last log line's timestamp sent
  std::set<RunKey> all_logs_sent_;            // stopped, and the server has every line
  std::set<RunKey> logs_full_;                // the server keeps no more of its job's log
  std::set<std::string> kept_;  // ids of failed containers kept (FailedToKeep) once all sent
  bool log_backlog_ = false;    // the heartbeat thread's: the last report left lines unsent
  struct ReadAhead {
    std::string after;           // the cursor the lines follow
    std::vector<LogLine> lines;  // in the engine's order
    bool more = false;           // the engine has lines after them
    bool read = false;
  };
  std::map<RunKey, ReadAhead> read_ahead_;  // the heartbeat thread's: exited containers'
  std::vector<int> host_cpus_, host_mems_;  // online, ascending
  NodeCapacity capacity_;  // what a container without a quota or limit is measured against
  // Each running container's last cgroup sample, and when it was taken.
  std::map<std::string, std::pair<Clock::time_point, CgroupSample>> samples_;
  // The heartbeat's: when each exited container (by id) was first listed exited.
  std::map<std::string, Clock::time_point> first_seen_exited_;
  std::mutex log_mu_;
  std::set<std::string> pinning_warned_;  // CPU lists already said not to be here, under log_mu_
  std::set<std::string> warned_;          // the heartbeat's problems already said
  const std::shared_ptr<GpuSamples> gpu_samples_ = std::make_shared<GpuSamples>();
  bool dcgm_warned_ = false;  // SampleDcgm's: a scrape's failure was said
  // The heartbeat's: the images as the server was last sent them (ChangedImages), and each
  // image's layers by id, so that only new images are inspected.
  std::string images_sent_;
  Clock::time_point images_listed_;
  std::map<std::string, std::vector<ImageLayer>> image_layers_;
};

}  // namespace

int RunAgent(const AgentOptions& options, const std::atomic<bool>& stop) {
  Agent agent(options, stop);
  return agent.Run();
}

}  // namespace berth
