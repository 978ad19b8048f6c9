#include "server/listen.h"

#include <sys/socket.h>

#include <cstdlib>

#include "server/control_plane.h"

namespace berth {

bool Loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]";
}

void SplitListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  const std::string port_text = colon == std::string::npos ? "" : listen.substr(colon + 1);
  char* end = nullptr;
  const long value = std::strtol(port_text.c_str(), &end, 10);
  if (colon == std::string::npos || port_text.empty() || *end != '\0' || value < 0 || value > 65535)
    throw ApiError(400, "--listen: expected HOST:PORT (port 0 to 65535), got \"" + listen + "\"");
  *host = listen.substr(0, colon);
  *port = static_cast<int>(value);
  if (*host == "[::1]") *host = "::1";
}

std::unique_ptr<httplib::Server> MakeHttpServer(const std::string& tls_cert,
                                                const std::string& tls_key) {
  const bool tls = !tls_cert.empty() || !tls_key.empty();
  if (tls && (tls_cert.empty() || tls_key.empty()))
    throw ApiError(400, "--tls-cert and --tls-key: give both, the certificate and its key");
  if (!tls) return std::make_unique<httplib::Server>();
  auto server = std::make_unique<httplib::SSLServer>(tls_cert.c_str(), tls_key.c_str());
  if (!server->is_valid())
    throw ApiError(400, "--tls-cert/--tls-key: cannot load " + tls_cert + " and " + tls_key +
                            " as a PEM certificate and its private key; check the files "
                            "and that the key matches the certificate");
  return server;
}

int BindServer(httplib::Server& server, const std::string& host, int port) {
  // The library listens with a backlog of 5: a burst of new clients would wait a second for a
  // SYN retransmission, or fail. The socket is kept here to listen again with a real backlog.
  int listen_socket = -1;
  server.set_socket_options([&](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket = sock;
  });
  if (port == 0) {
    port = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    port = -1;
  }
  if (port >= 0 && listen_socket >= 0) listen(listen_socket, SOMAXCONN);
  return port;
}

}  // namespace berth
