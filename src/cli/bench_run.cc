// `berth bench run`: what berth adds to running a container, side by side with the Docker
// engine its agent drives, in one run on the same engine:
//   - from submitting a job (`berth run -d`) to its container running, against `docker run -d`
//     (create and start) of the same image and command;
//   - from the container's exit to the job's `succeeded`, against `docker run` noticing the
//     exit (the engine's wait);
//   - N short jobs through berth against N `docker run`s, as many at once as berth runs them
//     (the node's free GPUs over the job's).
// The container times come from the engine (State.StartedAt, FinishedAt) and the job's from the
// server's event log, so the bench must run on the host of the agent that runs the jobs (`berth
// up`): one clock for both.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "config/config_error.h"
#include "docker/docker_client.h"

namespace berth {
namespace {

using nlohmann::json;

struct BenchRunArgs {
  std::string image = "berth-demo:1";
  int gpus = 1;
  int repeat = 5;
  int jobs = 200;
  std::string docker_socket = "/var/run/docker.sock";
  bool json = false;
};

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The engine's time as Unix seconds; throws when it is unset or malformed.
double EngineTime(const std::string& text) {
  const double seconds = EngineSeconds(text);
  if (seconds <= 0)
    throw ConfigError("the Docker engine gave no container time (\"" + text + "\")");
  return seconds;
}

void Sleep(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Polls `ready` every `every_s` for up to `timeout_s`; then throws with what `why` says.
template <class Ready, class Why>
void WaitFor(Ready ready, double every_s, double timeout_s, Why why) {
  const double deadline = WallNow() + timeout_s;
  while (!ready()) {
    if (WallNow() > deadline) throw ConfigError("bench run: " + why());
    Sleep(every_s);
  }
}

// Whether the container has exited (the engine's own wait, polled: a short one exits before an
// event subscription could start).
bool Exited(DockerClient& docker, const std::string& id) {
  const ContainerInfo found = docker.Inspect(id);
  return !found.running && !found.finished_at.empty() && found.finished_at[0] != '0';
}

std::string JobSpecText(const BenchRunArgs& a, const std::vector<std::string>& command) {
  return json{{"gpus", a.gpus}, {"image", a.image}, {"command", command}}.dump();
}

// The bench's jobs on the server: stopped unless they end on their own, so that a failed or
// interrupted bench leaves nothing queued. Answers are not checked (an ended job refuses).
class BenchJobs {
 public:
  int64_t Submit(const std::string& spec) {
    const int64_t id = CallServer("POST", "/v1/jobs", spec)["id"].get<int64_t>();
    ids_.insert(id);
    return id;
  }
  const std::set<int64_t>& ids() const { return ids_; }
  void Ended(int64_t id) { ids_.erase(id); }
  ~BenchJobs() {
    if (ids_.empty()) return;
    const std::unique_ptr<httplib::Client> client = ConnectToServer(ServerAddressFromEnv());
    for (int64_t id : ids_) client->Post("/v1/jobs/" + std::to_string(id) + "/stop");
  }

 private:
  std::set<int64_t> ids_;
};

std::string StateOf(int64_t id) {
  return CallServer("GET", "/v1/jobs/" + std::to_string(id)).value("state", "");
}

// Throws when the job ended otherwise than succeeded; true once it has succeeded.
bool Succeeded(int64_t id, const std::string& state) {
  if (state == "failed" || state == "stopped")
    throw ConfigError("bench run: job " + std::to_string(id) + " " + state + ": " +
                      CallServer("GET", "/v1/jobs/" + std::to_string(id)).dump());
  return state == "succeeded";
}

struct Trial {
  double to_running = 0, exit_to_done = 0;
};

// One job through berth: submitted, its container seen running and exited, the job succeeded.
Trial BerthTrial(const BenchRunArgs& a, DockerClient& docker) {
  BenchJobs jobs;
  const double t0 = WallNow();
  const int64_t id = jobs.Submit(JobSpecText(a, {"sleep", "1"}));
  const std::string job = "job " + std::to_string(id);
  std::string container;
  WaitFor(
      [&] {
        const auto found = docker.List("berth.job=" + std::to_string(id));
        if (!found.empty()) container = found[0].id;
        return !container.empty();
      },
      0.02, 60,
      [&] { return job + " got no container in 60 s (" + StateOf(id) + "; free GPUs?)"; });
  // Its start time, once it has one (it runs a second); its exit time from the engine's die
  // event, as the agent may remove the container as soon as the job is done.
  double started = 0;
  WaitFor(
      [&] {
        try {
          const ContainerInfo info = docker.Inspect(container);
          if (!info.started_at.empty() && info.started_at[0] != '0')
            started = EngineTime(info.started_at);
        } catch (const DockerError& e) {
          // The engine lists a container a moment before it can be inspected.
          if (e.status != 404) throw;
        }
        return started > 0;
      },
      0.02, 60, [&] { return job + "'s container did not start in 60 s"; });
  int64_t exited_ns = static_cast<int64_t>(t0 * 1e9);
  if (!docker.WaitForExit("berth.job=" + std::to_string(id), 60, &exited_ns))
    throw ConfigError("bench run: " + job + "'s container did not exit in 60 s");
  WaitFor([&] { return Succeeded(id, StateOf(id)); }, 0.02, 60,
          [&] { return job + " did not succeed in 60 s: " + StateOf(id); });
  jobs.Ended(id);
  // The state is visible a moment before its event is committed: waited for.
  double succeeded = 0;
  WaitFor(
      [&] {
        const json events = CallServer("GET", "/v1/jobs/" + std::to_string(id) + "/events");
        for (const json& e : events["events"])
          if (e.value("state", "") == "succeeded") succeeded = e.value("at", 0.0);
        return succeeded > 0;
      },
      0.01, 10, [&] { return job + " succeeded without a succeeded event"; });
  return {started - t0, succeeded - static_cast<double>(exited_ns) / 1e9};
}

// The same container by the engine alone: `docker run -d`, then `docker run` noticing the exit.
Trial DockerTrial(const BenchRunArgs& a, DockerClient& docker) {
  ContainerSpec spec;
  spec.image = a.image;
  spec.command = {"sleep", "1"};
  const double t0 = WallNow();
  const std::string label = "berth.bench=" + std::to_string(static_cast<int64_t>(t0 * 1e6));
  spec.labels = {{"berth.bench", label.substr(label.find('=') + 1)}};
  const std::string id = docker.Create(spec);
  try {
    docker.Start(id);
    const double started = EngineTime(docker.Inspect(id).started_at);
    // The exit as berth's trial times it: from the engine's die event to when it is known.
    int64_t exited_ns = static_cast<int64_t>(t0 * 1e9);
    if (!docker.WaitForExit(label, 60, &exited_ns))
      throw ConfigError("bench run: the engine's container did not exit in 60 s");
    const double noticed = WallNow();
    docker.Remove(id, true);
    return {started - t0, noticed - static_cast<double>(exited_ns) / 1e9};
  } catch (...) {
    docker.Remove(id, true);
    throw;
  }
}

// `jobs` containers that exit at once, `parallel` at a time, by the engine alone: create,
// start, wait, remove, as `docker run --rm` does.
double DockerBatch(const BenchRunArgs& a, int parallel) {
  std::atomic<int> next{0};
  std::mutex failed_mu;
  std::string failed;
  const double t0 = WallNow();
  std::vector<std::thread> workers;
  for (int w = 0; w < parallel; ++w)
    workers.emplace_back([&] {
      DockerClient own(a.docker_socket);  // one connection per worker, as docker CLIs have
      for (int i = next++; i < a.jobs; i = next++) {
        std::string id;
        try {
          ContainerSpec spec;
          spec.image = a.image;
          spec.command = {"true"};
          id = own.Create(spec);
          own.Start(id);
          WaitFor([&] { return Exited(own, id); }, 0.005, 60,
                  [] { return std::string("a container did not exit in 60 s"); });
          own.Remove(id, true);
        } catch (const std::exception& e) {
          if (!id.empty()) own.Remove(id, true);
          std::lock_guard<std::mutex> lock(failed_mu);
          failed = e.what();
          next = a.jobs;  // the others stop too
        }
      }
    });
  for (std::thread& w : workers) w.join();
  if (!failed.empty()) throw ConfigError("bench run: the engine alone failed: " + failed);
  return WallNow() - t0;
}

// `jobs` jobs that exit at once through berth: submitted together, done when all of them (and
// no one else's) have succeeded.
double BerthBatch(const BenchRunArgs& a, int parallel) {
  BenchJobs jobs;
  const double t0 = WallNow();
  for (int i = 0; i < a.jobs; ++i) jobs.Submit(JobSpecText(a, {"true"}));
  const int64_t first = *jobs.ids().begin();
  // Generous: berth should take about what the engine does, a second or two a job and slot.
  const double limit = 120 + 10.0 * a.jobs / parallel;
  WaitFor(
      [&] {
        for (json after = first - 1; !after.is_null() && !jobs.ids().empty();) {
          const json page = CallServer("GET", "/v1/jobs?limit=10000&after=" + after.dump());
          for (const json& j : page["jobs"]) {
            const int64_t id = j.value("id", int64_t{0});
            if (jobs.ids().count(id) && Succeeded(id, j.value("state", ""))) jobs.Ended(id);
          }
          after = page["next"];
        }
        return jobs.ids().empty();
      },
      0.02, limit,
      [&] {
        return std::to_string(jobs.ids().size()) + " of the batch's jobs did not succeed in " +
               std::to_string(static_cast<int>(limit)) + " s";
      });
  return WallNow() - t0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void RunBenchRun(const BenchRunArgs& a) {
  DockerClient docker(a.docker_socket);
  docker.Negotiate();
  if (!docker.HasImage(a.image))
    throw ConfigError("--image " + a.image + ": not on the Docker engine at " + a.docker_socket +
                      "; build it (scripts/busybox-image.sh) or name one it has");
  int free_gpus = 0;
  const json nodes = CallServer("GET", "/v1/nodes");
  for (const json& node : nodes["nodes"]) free_gpus += node.value("freeGpus", 0);
  const int parallel = std::max(1, free_gpus / a.gpus);
  const auto progress = [&](const std::string& what) {
    if (!a.json) std::cerr << "bench run: " << what << std::endl;
  };
  std::vector<double> berth_run, docker_run, berth_exit, docker_exit;
  for (int r = 0; r < a.repeat; ++r) {
    progress("trial " + std::to_string(r + 1) + " of " + std::to_string(a.repeat));
    const Trial b = BerthTrial(a, docker);
    const Trial d = DockerTrial(a, docker);
    berth_run.push_back(b.to_running);
    berth_exit.push_back(b.exit_to_done);
    docker_run.push_back(d.to_running);
    docker_exit.push_back(d.exit_to_done);
  }
  progress(std::to_string(a.jobs) + " short jobs through berth, " + std::to_string(parallel) +
           " at a time");
  const double berth_batch = BerthBatch(a, parallel);
  progress("the same through the engine alone");
  const double docker_batch = DockerBatch(a, parallel);
  const auto row = [](double berth, double engine) {
    return json{{"berth_s", berth}, {"docker_s", engine}, {"ratio", berth / engine}};
  };
  const json report = {{"image", a.image},
                       {"gpus_per_job", a.gpus},
                       {"repeat", a.repeat},
                       {"submit_to_running", row(Median(berth_run), Median(docker_run))},
                       {"exit_to_done", row(Median(berth_exit), Median(docker_exit))},
                       {"batch", row(berth_batch, docker_batch)},
                       {"batch_jobs", a.jobs},
                       {"batch_parallel", parallel}};
  if (a.json) {
    std::cout << JsonText(report) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(3) << "berth against the Docker engine alone ("
            << a.image << ", medians of " << a.repeat << ")\n"
            << "                               berth s   docker s   ratio\n";
  const auto print = [&](const char* name, const json& r) {
    std::cout << std::left << std::setw(30) << name << std::right << std::setw(9)
              << r["berth_s"].get<double>() << std::setw(11) << r["docker_s"].get<double>()
              << std::setw(8) << std::setprecision(2) << r["ratio"].get<double>()
              << std::setprecision(3) << "\n";
  };
  print("submit to running", report["submit_to_running"]);
  print("exit to done", report["exit_to_done"]);
  print(
      (std::to_string(a.jobs) + " short jobs, " + std::to_string(parallel) + " at a time").c_str(),
      report["batch"]);
}

}  // namespace

void AddBenchRunCommand(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "run", "Running containers through berth ($BERTH_ADDR) against the Docker engine alone");
  auto a = std::make_shared<BenchRunArgs>();
  cmd->add_option("--image", a->image, "Image both run (present on the engine)")
      ->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "GPUs per job, 1 to 64")
      ->check(IntegerIn(1, 64))
      ->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "Single-job trials, 1 to 100")
      ->check(IntegerIn(1, 100))
      ->capture_default_str();
  cmd->add_option("--jobs", a->jobs, "Short jobs in the batch, 1 to 1000")
      ->check(IntegerIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--docker-socket", a->docker_socket, "The engine berth's agent uses")
      ->check(NonEmptyPath())
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { RunBenchRun(*a); });
}

}  // namespace berth
