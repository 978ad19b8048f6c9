// Opening a listening HTTP(S) server: shared by `berth server` and the Kubernetes extender.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

namespace berth {

// "HOST:PORT" into its parts; throws ApiError(400) naming --listen when it is not one.
void SplitListen(const std::string& listen, std::string* host, int* port);
bool Loopback(const std::string& host);
// Plain HTTP, or HTTPS with the PEM certificate and key (both or neither); throws ApiError(400)
// naming --tls-cert/--tls-key when they cannot be loaded.
std::unique_ptr<httplib::Server> MakeHttpServer(const std::string& tls_cert,
                                                const std::string& tls_key);
// Binds `server` to host:port (0: any free port) with SO_REUSEADDR and a full listen backlog;
// returns the port, or -1 when the address is taken or not available.
int BindServer(httplib::Server& server, const std::string& host, int port);

}  // namespace berth
