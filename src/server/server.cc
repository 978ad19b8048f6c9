#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <iostream>
#include <memory>
#include <thread>

#include "server/http_api.h"
#include "server/listen.h"
#include "store/log_store.h"

namespace berth {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

double WallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Anything but loopback is served only with both tokens and TLS, so that neither the jobs nor
// the tokens cross a network in the clear, and nobody unnamed reaches the API.
std::unique_ptr<httplib::Server> MakeServer(const ServerOptions& options, const std::string& host) {
  const bool tls = !options.tls_cert.empty() || !options.tls_key.empty();
  if (!Loopback(host) && (options.tokens.empty() || !tls))
    throw ApiError(400, "--listen: " + host +
                            " is not loopback, and the server would be open to the network: "
                            "give --tokens FILE and --tls-cert/--tls-key too, or listen on "
                            "127.0.0.1");
  return MakeHttpServer(options.tls_cert, options.tls_key);
}

}  // namespace

int RunServer(ServerOptions options) {
  std::string host;
  int port = 0;
  SplitListen(options.listen, &host, &port);
  const std::unique_ptr<httplib::Server> served = MakeServer(options, host);
  httplib::Server& server = *served;
  const AccessControl access(options.tokens);
  StateStore store(options.state_dir);
  LogStore logs(options.state_dir + "/logs");
  options.config.logs = &logs;
  ControlPlane plane(std::move(options.config), &store, WallClock);

  // 64 workers for requests: 50 clients at once each keep a connection (keep-alive) without
  // queueing; one for each watch (events, log follows), and one for each node's agent, whose
  // watch of its assignments waits for changes.
  const int nodes = static_cast<int>(plane.max_nodes());
  server.new_task_queue = [nodes] { return new httplib::ThreadPool(64 + kMaxWatches + nodes); };
  server.set_payload_max_length(kMaxRequestBytes);
  // A client that stalls mid-request is dropped instead of holding a worker.
  server.set_read_timeout(kReadTimeoutS);
  server.set_write_timeout(10);
  server.set_keep_alive_max_count(1000);
  // Without it, Nagle and delayed ACKs hold each small reply for 40 ms.
  server.set_tcp_nodelay(true);
  ApiContext api(plane, access);
  api.max_assignment_watches = nodes;
  AddApiRoutes(server, api);
  port = BindServer(server, host, port);
  if (port < 0) {
    std::cerr << "berth server: cannot listen on " << options.listen
              << ": the address is in use or not available; pick another with --listen\n";
    return 1;
  }

  RequestDeadline deadline(port, options.request_timeout_s);
  api.deadline = &deadline;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::thread cycles([&] {
    while (!g_stop && !plane.broken()) {
      try {
        plane.Cycle();
      } catch (const ApiError& e) {
        std::cerr << "berth server: " << e.what() << "\n";
      }
      plane.WaitForWork(options.cycle_interval_s);
    }
    plane.StopWatches();  // else stopping waits out the agents' long polls
    server.stop();
  });
  const std::string url = std::string(options.tls_cert.empty() ? "http" : "https") + "://" +
                          (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                          std::to_string(port);
  std::cout << "berth server: listening on " << url << " (state " << store.path() << "; "
            << (access.enabled() ? "tokens required" : "no tokens: loopback only") << "; "
            << plane.recovery_summary() << ")" << std::endl;
  std::thread companion;
  std::atomic<bool> companion_ended{false};
  if (options.companion)
    companion = std::thread([&] {
      if (options.companion(url, g_stop) != 0 && !g_stop) {
        companion_ended = true;
        g_stop = true;
      }
    });
  server.listen_after_bind();
  const bool asked = g_stop;  // else the library's accept loop gave up on its own
  g_stop = true;
  cycles.join();
  if (companion.joinable()) companion.join();
  if (plane.broken()) {
    std::cerr << "berth server: stopped: the state store failed; restart to rebuild from it\n";
    return 1;
  }
  if (companion_ended) {
    std::cerr << "berth server: stopped: what ran beside it ended (said why above)\n";
    return 1;
  }
  if (!asked) {
    std::cerr << "berth server: stopped: accepting connections failed\n";
    return 1;
  }
  std::cout << "berth server: stopped" << std::endl;
  return 0;
}

}  // namespace berth
