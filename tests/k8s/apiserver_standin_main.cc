// berth_k8s_apiserver: the Kubernetes API-server stand-in (apiserver_standin.h) as a process,
// for shell tests and trying the extender by hand. Serves until SIGTERM or SIGINT.
//
//   berth_k8s_apiserver [--listen-port PORT] [--token TOKEN]

#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "k8s/apiserver_standin.h"

int main(int argc, char** argv) {
  int port = 0;
  std::string token;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--listen-port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (arg == "--token" && i + 1 < argc) {
      token = argv[++i];
    } else {
      std::cerr << "usage: berth_k8s_apiserver [--listen-port PORT] [--token TOKEN]\n";
      return 2;
    }
  }
  // Blocked before the server's threads start, so that they inherit the mask and sigwait below
  // is the one to take the signal.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  berth::testing::ApiServerStandIn server;
  try {
    std::cout << "listening on " << server.Start(token, port) << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "berth_k8s_apiserver: " << e.what() << "\n";
    return 1;
  }
  int signal = 0;
  sigwait(&signals, &signal);
  server.Stop();
  return 0;
}
