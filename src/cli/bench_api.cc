// `berth bench api`: submissions per second against a real server ($BERTH_ADDR) from many
// concurrent clients, each on its own keep-alive connection; their latency; the time `berth
// ps -a` takes to show every job; and, side by side, the same writes against the state store
// alone (SQLite with the same group commit, no HTTP, no engine): the ceiling.
#include <fcntl.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "config/config_error.h"
#include "store/state_store.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchApiArgs {
  int clients = 50;
  int jobs = 10000;
  std::string acks;  // a file: one acknowledged job id per line, as each is acknowledged
  bool json = false;
};

// The server's resident memory as its /metrics says (berth_process_resident_memory_bytes); -1
// when it does not.
double ServerResidentBytes(httplib::Client& server) {
  const httplib::Result res = server.Get("/metrics");
  if (!res || res->status != 200) return -1;
  const std::string name = "\nberth_process_resident_memory_bytes ";
  const size_t at = res->body.find(name);
  if (at == std::string::npos) return -1;
  return std::strtod(res->body.c_str() + at + name.size(), nullptr);
}

struct Load {
  double per_sec = 0, p50_ms = 0, p99_ms = 0;
  int done = 0, failed = 0;
};

// `clients` threads take turns at `submit` until `total` calls were made; each call's latency
// is kept. `submit(client)` returns false for a failed call.
template <typename Submit>
Load RunLoad(int clients, int total, Submit submit) {
  std::atomic<int> next{0}, failed{0};
  std::vector<std::vector<double>> latency(clients);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      while (next++ < total) {
        const auto t0 = Clock::now();
        if (!submit(c)) ++failed;
        latency[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& l : latency) all.insert(all.end(), l.begin(), l.end());
  Load load;
  load.failed = failed;
  load.done = total - load.failed;
  load.per_sec = load.done / seconds;
  load.p50_ms = Percentile(all, 0.5);
  load.p99_ms = Percentile(all, 0.99);
  return load;
}

// Milliseconds that `berth ps -a` (this binary) takes against $BERTH_ADDR, its output dropped.
double TimedListing() {
  const auto start = Clock::now();
  const pid_t child = ::fork();
  if (child < 0) throw ConfigError("cannot start `berth ps -a`: fork failed");
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDOUT_FILENO);
    ::execl("/proc/self/exe", "berth", "ps", "-a", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw ConfigError("`berth ps -a` failed (its message is above)");
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void RunBenchApi(const BenchApiArgs& a) {
  const ServerAddress server = ServerAddressFromEnv();
  const std::string& addr = server.text;

  std::unique_ptr<std::ofstream> acks;
  if (!a.acks.empty()) {
    acks = std::make_unique<std::ofstream>(a.acks, std::ios::trunc);
    if (!*acks) throw ConfigError("--acks: cannot write " + a.acks);
  }
  std::mutex acks_mu;         // the acks file and first_failure
  std::string first_failure;  // what the first failed submission got, for the report
  std::vector<std::unique_ptr<httplib::Client>> connections;
  for (int c = 0; c < a.clients; ++c) {
    connections.push_back(ConnectToServer(server));
    connections.back()->set_keep_alive(true);
  }
  const std::string spec = R"({"gpus": 1, "image": "bench", "command": ["true"]})";
  const double resident_before = ServerResidentBytes(*connections[0]);
  if (!a.json)
    std::cerr << "bench api: " << a.jobs << " submissions from " << a.clients << " clients to "
              << addr << "\n";
  const Load api = RunLoad(a.clients, a.jobs, [&](int c) {
    const httplib::Result res = connections[c]->Post("/v1/jobs", spec, "application/json");
    if (!res || res->status != 201) {
      std::lock_guard<std::mutex> lock(acks_mu);
      if (first_failure.empty())
        first_failure =
            res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error());
      return false;
    }
    if (acks) {
      const nlohmann::json job = nlohmann::json::parse(res->body, nullptr, false);
      std::lock_guard<std::mutex> lock(acks_mu);
      *acks << job.value("id", int64_t{-1}) << std::endl;  // flushed: a kill may follow
    }
    return true;
  });
  if (api.done == 0)
    throw ConfigError("no submission succeeded: is a server at " + addr +
                      "? start one with `berth server`");
  const double resident_after = ServerResidentBytes(*connections[0]);
  // The server's memory for its jobs: what it grew by, per 100,000 of them (-1: not known).
  const double bytes_per_100k = resident_before < 0 || resident_after < 0
                                    ? -1
                                    : (resident_after - resident_before) / api.done * 1e5;

  // `berth ps -a` itself (this binary, its table sent to /dev/null): every job, the median of
  // three runs.
  std::vector<double> list_runs;
  for (int run = 0; run < 3; ++run) list_runs.push_back(TimedListing());
  const double list_ms = Percentile(list_runs, 0.5);
  size_t listed = 0;
  for (nlohmann::json after = 0; !after.is_null();) {
    const httplib::Result res = connections[0]->Get("/v1/jobs?limit=10000&after=" + after.dump(),
                                                    {{"Accept", "text/tab-separated-values"}});
    if (!res || res->status != 200) throw ConfigError("listing the jobs failed");
    listed += std::count(res->body.begin(), res->body.end(), '\n') - 1;  // less the header
    after = res->has_header("Berth-Next")
                ? nlohmann::json(std::stoll(res->get_header_value("Berth-Next")))
                : nlohmann::json();
  }

  // The ceiling: the same writes, the same clients, straight into a state store.
  const std::string dir =
      std::filesystem::temp_directory_path() / ("berth-bench-api-" + std::to_string(::getpid()));
  Load store_only;
  {
    StateStore store(dir);
    std::atomic<int64_t> id{0};
    store_only = RunLoad(a.clients, a.jobs, [&](int) {
      StoredJob job;
      job.id = ++id;
      job.spec = spec;
      job.state = "pending";
      store.Wait(store.Enqueue({StoreWrite::Put(job)}));
      return true;
    });
  }
  std::filesystem::remove_all(dir);

  if (a.json) {
    std::cout << JsonText({{"clients", a.clients},
                           {"submissions", api.done},
                           {"failed", api.failed},
                           {"first_failure", first_failure},
                           {"submissions_per_sec", api.per_sec},
                           {"latency_ms_p50", api.p50_ms},
                           {"latency_ms_p99", api.p99_ms},
                           {"list_jobs", listed},
                           {"list_ms", list_ms},
                           {"server_memory_bytes_per_100k_jobs", bytes_per_100k},
                           {"store_only_writes_per_sec", store_only.per_sec},
                           {"store_only_latency_ms_p50", store_only.p50_ms},
                           {"store_only_latency_ms_p99", store_only.p99_ms}})
              << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(1) << "submissions: " << api.done << " ("
            << api.failed << " failed" << (first_failure.empty() ? "" : ", first: " + first_failure)
            << ") from " << a.clients << " clients\n"
            << "  server:      " << std::setw(9) << api.per_sec << " /s   p50 " << api.p50_ms
            << " ms   p99 " << api.p99_ms << " ms\n"
            << "  store alone: " << std::setw(9) << store_only.per_sec << " /s   p50 "
            << store_only.p50_ms << " ms   p99 " << store_only.p99_ms << " ms   (the ceiling; "
            << std::setprecision(2) << api.per_sec / store_only.per_sec << "x of it)\n"
            << std::setprecision(1) << "berth ps -a, " << listed << " jobs: " << list_ms
            << " ms (median of 3)\n";
  if (bytes_per_100k < 0)
    std::cout << "server memory: not known (its /metrics has no resident memory)\n";
  else
    std::cout << "server memory: " << bytes_per_100k / (1 << 20)
              << " MiB per 100,000 jobs (its resident memory's growth)\n";
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

void AddBenchApiCommand(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "api", "Submissions per second against a server ($BERTH_ADDR), next to the store alone");
  auto a = std::make_shared<BenchApiArgs>();
  cmd->add_option("--clients", a->clients, "Concurrent clients, 1 to 1000")
      ->check(IntegerIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--jobs", a->jobs, "Submissions in all, 1 to 10^6")
      ->check(IntegerIn(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--acks", a->acks, "Write each acknowledged job id to this file")
      ->check(NonEmptyPath());
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { RunBenchApi(*a); });
}

}  // namespace berth
