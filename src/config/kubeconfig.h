// Where the Kubernetes API server is and how to be let in: a kubeconfig file's current context
// (its cluster's server and CA, its user's token or client certificate), or the in-cluster
// service account. Only what berth uses is read; exec and auth-provider plugins are refused
// with the fix (a service-account token).
#pragma once

#include <functional>
#include <string>

#include "config/file_text.h"

namespace berth {

struct KubeConfig {
  std::string server;  // https://HOST:PORT (or http:// for a local stand-in)
  std::string token;
  // Set: the token is read from this file at every call, since a service account's token is
  // rotated in place (bound tokens expire within hours).
  std::string token_file;
  std::string ca_file, ca_pem;      // the server's CA: a file, or PEM text from *-data
  std::string cert_file, key_file;  // a client certificate
  bool insecure = false;            // insecure-skip-tls-verify
};

// A token file's text without its line end; throws ConfigError when it cannot be read or holds
// a control character (it goes into an HTTP header).
std::string ReadToken(const std::string& path);
// Throws ConfigError naming the file, line and field. The files it names (CA, token, client
// certificate and key) are read with `read_file` to check them, relative paths from the
// kubeconfig's own directory, as kubectl does; the fuzz target passes a reader that opens none.
KubeConfig LoadKubeConfig(
    const std::string& path,
    const std::function<std::string(const std::string&)>& read_file = ReadFileText);
// $KUBERNETES_SERVICE_HOST/_PORT and /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}
// (under `root`, for tests); throws ConfigError when not inside a pod.
KubeConfig InClusterKubeConfig(const std::string& root = "");

}  // namespace berth
