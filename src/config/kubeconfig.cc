#include "config/kubeconfig.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "config/config_error.h"
#include "config/file_text.h"
#include "config/yaml_reader.h"
#include "protocol/base64.h"

namespace berth {
namespace {

std::string TrimLineEnd(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// The entry named `name` of a kubeconfig list (clusters, users, contexts): its inner map.
YAML::Node Named(const YamlReader& reader, const YAML::Node& root, const char* list,
                 const std::string& name) {
  const YAML::Node entries = reader.Required(root, "", list);
  reader.Sequence(entries, list);
  const std::string inner = std::string(list).substr(0, std::string(list).size() - 1);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string path = IndexPath(list, i);
    if (reader.Name(reader.Required(entries[i], path, "name"), FieldPath(path, "name")) == name)
      return reader.Map(reader.Required(entries[i], path, inner.c_str()), FieldPath(path, inner));
  }
  reader.Fail(entries, list, "no entry named \"" + name + "\"; the current context names it");
}

std::string Optional(const YamlReader& reader, const YAML::Node& map, const std::string& path,
                     const char* key) {
  const YAML::Node value = map[key];
  return value ? reader.String(value, FieldPath(path, key)) : "";
}

// The files a kubeconfig names, read as LoadKubeConfig's caller says.
struct NamedFiles {
  const YamlReader& reader;
  std::string dir;  // the kubeconfig's directory, for relative paths
  const std::function<std::string(const std::string&)>& read_file;

  // The path map[key] names ("" when the key is absent), from the kubeconfig's directory.
  std::string Path(const YAML::Node& map, const std::string& path, const char* key) const {
    const std::string file = Optional(reader, map, path, key);
    return file.empty() || file[0] == '/' ? file : dir + file;
  }
  // The file's text; one that cannot be read is refused at the field that names it.
  std::string Text(const YAML::Node& map, const std::string& path, const char* key) const {
    const std::string file = Path(map, path, key);
    if (file.empty()) return "";
    try {
      return read_file(file);
    } catch (const ConfigError& e) {
      reader.Fail(map[key], FieldPath(path, key), e.what());
    }
  }
};

// A bearer token goes into an HTTP header: no control characters, which could end it early.
bool HasControlCharacter(const std::string& token) {
  return std::any_of(token.begin(), token.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}
void CheckToken(const YamlReader& reader, const YAML::Node& at, const std::string& path,
                const std::string& token) {
  if (HasControlCharacter(token))
    reader.Fail(at, path, "the token holds a control character; expected the token alone");
}

}  // namespace

std::string ReadToken(const std::string& path) {
  std::string token = TrimLineEnd(ReadFileText(path));
  if (HasControlCharacter(token))
    throw ConfigError(path + ": the token holds a control character; expected the token alone");
  return token;
}

KubeConfig LoadKubeConfig(const std::string& path,
                          const std::function<std::string(const std::string&)>& read_file) {
  const YamlReader reader(path);
  const size_t slash = path.rfind('/');
  const NamedFiles files{reader, slash == std::string::npos ? "" : path.substr(0, slash + 1),
                         read_file};
  const YAML::Node root = reader.Parse(ReadFileText(path));
  const std::string current =
      reader.Name(reader.Required(root, "", "current-context"), "current-context");
  const YAML::Node context = Named(reader, root, "contexts", current);
  const std::string cluster_name =
      reader.Name(reader.Required(context, "context", "cluster"), "context.cluster");
  const YAML::Node cluster = Named(reader, root, "clusters", cluster_name);
  KubeConfig config;
  config.server = reader.String(reader.Required(cluster, "cluster", "server"), "cluster.server");
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0)
    reader.Fail(cluster["server"], "cluster.server", "expected https://HOST:PORT");
  {
    // A server berth could not even connect to is refused now, not retried forever.
    const std::string rest = config.server.substr(config.server.find("://") + 3);
    const std::string host_port = rest.substr(0, rest.find('/'));
    const size_t colon = host_port.rfind(':');
    const bool bracketed = !host_port.empty() && host_port[0] == '[';
    const std::string port =
        colon == std::string::npos || (bracketed && host_port.find(']') > colon)
            ? ""
            : host_port.substr(colon + 1);
    const bool port_ok =
        port.empty() ||
        (port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos &&
         std::stoi(port) <= 65535);
    if (host_port.empty() || host_port[0] == ':' || !port_ok ||
        (bracketed && host_port.find(']') == std::string::npos))
      reader.Fail(cluster["server"], "cluster.server",
                  "expected https://HOST[:PORT], got \"" + config.server + "\"");
  }
  config.ca_file = files.Path(cluster, "cluster", "certificate-authority");
  files.Text(cluster, "cluster", "certificate-authority");
  if (const YAML::Node data = cluster["certificate-authority-data"]) {
    const std::optional<std::string> pem =
        Base64Decode(reader.String(data, "cluster.certificate-authority-data"));
    if (!pem) reader.Fail(data, "cluster.certificate-authority-data", "expected base64 PEM");
    config.ca_pem = *pem;
    if (config.ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      reader.Fail(data, "cluster.certificate-authority-data",
                  "expected a base64 PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  if (const YAML::Node skip = cluster["insecure-skip-tls-verify"])
    config.insecure = reader.Bool(skip, "cluster.insecure-skip-tls-verify");
  if (const YAML::Node user_name = context["user"]) {
    const YAML::Node user = Named(reader, root, "users", reader.Name(user_name, "context.user"));
    for (const char* plugin : {"exec", "auth-provider", "client-certificate-data"})
      if (user[plugin])
        reader.Fail(user[plugin], FieldPath("user", plugin),
                    "not supported by berth; give the service account's token (user.token or "
                    "user.tokenFile) or client-certificate and client-key files");
    config.token = Optional(reader, user, "user", "token");
    CheckToken(reader, user["token"], "user.token", config.token);
    config.token_file = files.Path(user, "user", "tokenFile");
    if (!config.token_file.empty()) {
      config.token = TrimLineEnd(files.Text(user, "user", "tokenFile"));
      CheckToken(reader, user["tokenFile"], "user.tokenFile", config.token);
    }
    config.cert_file = files.Path(user, "user", "client-certificate");
    config.key_file = files.Path(user, "user", "client-key");
    if (config.cert_file.empty() != config.key_file.empty())
      reader.Fail(user, "user", "give client-certificate and client-key together");
    files.Text(user, "user", "client-certificate");
    files.Text(user, "user", "client-key");
  }
  return config;
}

KubeConfig InClusterKubeConfig(const std::string& root) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0')
    throw ConfigError(
        "--kubeconfig: not given, and not inside a pod ($KUBERNETES_SERVICE_HOST is unset); give "
        "--kubeconfig FILE");
  const std::string dir = root + "/var/run/secrets/kubernetes.io/serviceaccount";
  KubeConfig config;
  const std::string h(host);
  config.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  config.token_file = dir + "/token";
  config.token = ReadToken(config.token_file);
  config.ca_file = dir + "/ca.crt";
  return config;
}

}  // namespace berth
