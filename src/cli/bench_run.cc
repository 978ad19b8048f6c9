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
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "config/config_error.h"
#include "docker/docker_client.h"
#include "k8s/pod_job.h"

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

// The engine's RFC 3339 time with nanoseconds ("2026-12-02T13:40:01.123456789Z") as Unix
// seconds; throws when it is unset or malformed.
double EngineTime(const std::string& text) {
  double seconds = 0;
  const size_t dot = text.find('.');
  if (text.size() < 20 || !ParseTimestamp(text.substr(0, 19) + "Z", &seconds))
    throw ConfigError("the Docker engine gave no container time (\"" + text + "\")");
  if (dot == 19)
    seconds += std::strtod(("0" + text.substr(dot, text.size() - dot - 1)).c_str(), nullptr);
  return seconds;
}

void Sleep(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Polls `ready` every 5 ms for up to `timeout_s`; throws `what` when it never holds.
template <class Ready>
void WaitFor(Ready ready, double timeout_s, const std::string& what) {
  const double deadline = WallNow() + timeout_s;
  while (!ready()) {
    if (WallNow() > deadline) throw ConfigError("bench run: " + what);
    Sleep(0.005);
  }
}

std::string JobSpecText(const BenchRunArgs& a, const std::vector<std::string>& command) {
  return json{{"gpus", a.gpus}, {"image", a.image}, {"command", command}}.dump();
}

// The job's container, once the agent has created it; empty until then.
std::vector<ContainerInfo> JobContainers(DockerClient& docker, int64_t job) {
  return docker.List("berth.job=" + std::to_string(job));
}

struct Trial {
  double to_running = 0, exit_to_done = 0;
};

// One job through berth: submitted, its container seen running and exited, the job succeeded.
Trial BerthTrial(const BenchRunArgs& a, DockerClient& docker) {
  const double t0 = WallNow();
  const int64_t id =
      CallServer("POST", "/v1/jobs", JobSpecText(a, {"sleep", "1"}))["id"].get<int64_t>();
  std::string container;
  WaitFor(
      [&] {
        const auto found = JobContainers(docker, id);
        if (!found.empty()) container = found[0].id;
        return !container.empty();
      },
      60, "job " + std::to_string(id) + " got no container in 60 s");
  ContainerInfo info;
  WaitFor(
      [&] {
        try {
          info = docker.Inspect(container);
        } catch (const DockerError& e) {
          throw ConfigError("bench run: job " + std::to_string(id) +
                            "'s container went before its exit was seen: " + e.what());
        }
        return !info.running && !info.finished_at.empty() && info.finished_at[0] != '0';
      },
      60, "job " + std::to_string(id) + "'s container did not exit");
  const std::string path = "/v1/jobs/" + std::to_string(id);
  WaitFor([&] { return CallServer("GET", path).value("state", "") == "succeeded"; }, 60,
          "job " + std::to_string(id) + " did not succeed: " + CallServer("GET", path).dump());
  double succeeded = 0;
  const json events = CallServer("GET", path + "/events");
  for (const json& e : events["events"])
    if (e.value("state", "") == "succeeded") succeeded = e.value("at", 0.0);
  return {EngineTime(info.started_at) - t0, succeeded - EngineTime(info.finished_at)};
}

// The same container by the engine alone: `docker run -d`, then `docker run`'s wait.
Trial DockerTrial(const BenchRunArgs& a, DockerClient& docker, const std::string& label) {
  ContainerSpec spec;
  spec.image = a.image;
  spec.command = {"sleep", "1"};
  spec.labels = {{"berth.bench", label}};
  const double t0 = WallNow();
  const std::string id = docker.Create(spec);
  docker.Start(id);
  const double started = EngineTime(docker.Inspect(id).started_at);
  if (!docker.WaitForExit("berth.bench=" + label, 60))
    throw ConfigError("bench run: the engine's container did not exit in 60 s");
  const double noticed = WallNow();
  const double finished = EngineTime(docker.Inspect(id).finished_at);
  docker.Remove(id, true);
  return {started - t0, noticed - finished};
}

// `jobs` containers that exit at once, `parallel` at a time, by the engine alone.
double DockerBatch(const BenchRunArgs& a, int parallel) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  const double t0 = WallNow();
  std::vector<std::thread> workers;
  for (int w = 0; w < parallel; ++w)
    workers.emplace_back([&, w] {
      DockerClient own(a.docker_socket);  // one connection per worker, as docker CLIs have
      try {
        for (int i = next++; i < a.jobs; i = next++) {
          ContainerSpec spec;
          spec.image = a.image;
          spec.command = {"true"};
          const std::string label = "batch-" + std::to_string(getpid()) + "-" + std::to_string(i);
          spec.labels = {{"berth.bench", label}};
          const std::string id = own.Create(spec);
          own.Start(id);
          if (own.Inspect(id).running && !own.WaitForExit("berth.bench=" + label, 60))
            throw ConfigError("container " + id + " did not exit in 60 s");
          own.Remove(id, true);
        }
      } catch (const std::exception& e) {
        std::cerr << "bench run: docker worker " << w << ": " << e.what() << "\n";
        failed = true;
      }
    });
  for (std::thread& w : workers) w.join();
  if (failed) throw ConfigError("bench run: the engine failed to run the batch");
  return WallNow() - t0;
}

// `jobs` jobs that exit at once through berth: submitted together, done when all succeeded.
double BerthBatch(const BenchRunArgs& a) {
  const double t0 = WallNow();
  int64_t first = 0, last = 0;
  for (int i = 0; i < a.jobs; ++i) {
    last = CallServer("POST", "/v1/jobs", JobSpecText(a, {"true"}))["id"].get<int64_t>();
    if (i == 0) first = last;
  }
  WaitFor(
      [&] {
        int done = 0;
        for (json after = first - 1; !after.is_null();) {
          const json page = CallServer("GET", "/v1/jobs?limit=10000&after=" + after.dump());
          for (const json& j : page["jobs"])
            if (j.value("id", int64_t{0}) <= last && j.value("state", "") == "succeeded") ++done;
          after = page["next"];
        }
        return done == a.jobs;
      },
      600, "the batch's jobs did not all succeed in 600 s");
  return WallNow() - t0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
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
    const Trial d =
        DockerTrial(a, docker, "trial-" + std::to_string(getpid()) + "-" + std::to_string(r));
    berth_run.push_back(b.to_running);
    berth_exit.push_back(b.exit_to_done);
    docker_run.push_back(d.to_running);
    docker_exit.push_back(d.exit_to_done);
  }
  progress(std::to_string(a.jobs) + " short jobs through berth, " + std::to_string(parallel) +
           " at a time");
  const double berth_batch = BerthBatch(a);
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
  cmd->add_option("--jobs", a->jobs, "Short jobs in the batch, 1 to 10000")
      ->check(IntegerIn(1, 10000))
      ->capture_default_str();
  cmd->add_option("--docker-socket", a->docker_socket, "The engine berth's agent uses")
      ->check(NonEmptyPath())
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { RunBenchRun(*a); });
}

}  // namespace berth
