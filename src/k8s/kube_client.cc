#include "k8s/kube_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cmath>

#include "config/config_error.h"

namespace berth {
namespace {

using nlohmann::json;

std::string Escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// The CA certificates of PEM text, for a client to verify the server with.
X509_STORE* StoreOf(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_STORE* store = X509_STORE_new();
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
  }
  BIO_free(bio);
  return store;
}

}  // namespace

std::string StatusMessage(int code, const std::string& body) {
  const json status = json::parse(body, nullptr, false);
  std::string text = "HTTP " + std::to_string(code);
  if (FieldText(status, "kind") == "Status")
    return text + " " + FieldText(status, "reason") + ": " + FieldText(status, "message");
  return text + ": " + body.substr(0, 200);
}

KubeClient::KubeClient(KubeConfig config) : config_(std::move(config)) {}
KubeClient::~KubeClient() = default;

std::unique_ptr<httplib::Client> KubeClient::Connect(int read_timeout_s) const {
  auto client =
      config_.cert_file.empty()
          ? std::make_unique<httplib::Client>(config_.server)
          : std::make_unique<httplib::Client>(config_.server, config_.cert_file, config_.key_file);
  client->set_connection_timeout(5);
  client->set_read_timeout(read_timeout_s);
  client->set_write_timeout(10);
  client->set_tcp_nodelay(true);
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    try {
      token = ReadToken(config_.token_file);
    } catch (const ConfigError&) {
      // A file being replaced: the token read before still serves.
    }
  }
  if (!token.empty()) client->set_bearer_token_auth(token);
  if (config_.server.rfind("https://", 0) == 0) {
    client->enable_server_certificate_verification(!config_.insecure);
    if (!config_.ca_pem.empty()) client->set_ca_cert_store(StoreOf(config_.ca_pem));
    if (!config_.ca_file.empty()) client->set_ca_cert_path(config_.ca_file);
  }
  return client;
}

std::string KubeClient::List(const std::string& path, std::vector<json>* items,
                             std::string* resource_version, bool missing_ok) {
  items->clear();
  auto client = Connect(60);
  const auto res = client->Get(path);
  if (!res) return "GET " + path + ": " + httplib::to_string(res.error());
  if (res->status == 404 && missing_ok) return "";
  if (res->status != 200) return "GET " + path + ": " + StatusMessage(res->status, res->body);
  json list = json::parse(res->body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return "GET " + path + ": the answer is not a list";
  for (json& item : list["items"]) items->push_back(std::move(item));
  *resource_version = MetadataText(list, "resourceVersion");
  return "";
}

std::string KubeClient::Watch(const std::string& path, std::string* resource_version, int timeout_s,
                              const std::function<void(const std::string&, const json&)>& on_event,
                              const std::atomic<bool>& stop) {
  auto client = Connect(timeout_s + 30);
  const std::string url =
      path + (path.find('?') == std::string::npos ? "?" : "&") +
      "watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout_s) +
      "&resourceVersion=" + Escape(*resource_version);
  std::string buffer, problem;
  const auto res = client->Get(url, [&](const char* data, size_t length) {
    buffer.append(data, length);
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      const json event = json::parse(buffer.substr(0, newline), nullptr, false);
      buffer.erase(0, newline + 1);
      if (!event.is_object() || !event.contains("object")) continue;
      const std::string type = FieldText(event, "type");
      const json& object = event["object"];
      if (type == "ERROR") {
        const json* code =
            object.is_object() && object.contains("code") ? &object["code"] : nullptr;
        const int status = code != nullptr && code->is_number_integer() ? code->get<int>() : 0;
        problem = status == 410 ? kExpired : StatusMessage(status, object.dump());
        return false;
      }
      const std::string version = MetadataText(object, "resourceVersion");
      if (!version.empty()) *resource_version = version;
      if (type != "BOOKMARK") on_event(type, object);
    }
    if (buffer.size() > kMaxWatchLine) {
      problem = "a watch event of more than " + std::to_string(kMaxWatchLine) + " bytes";
      return false;
    }
    return !stop;
  });
  if (!problem.empty()) return problem;
  if (stop) return "";
  if (!res) return "watch " + path + ": " + httplib::to_string(res.error());
  if (res->status == 410) return kExpired;
  if (res->status != 200) return "watch " + path + ": " + StatusMessage(res->status, res->body);
  return "";
}

std::string KubeClient::Bind(const std::string& ns, const std::string& name,
                             const std::string& node,
                             const std::map<std::string, std::string>& annotations) {
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  // The Binding's annotations are written onto the pod in the same update as its node.
  if (!annotations.empty()) binding["metadata"]["annotations"] = annotations;
  auto client = Connect(10);
  const std::string path =
      "/api/v1/namespaces/" + Escape(ns) + "/pods/" + Escape(name) + "/binding";
  const auto res = client->Post(path, binding.dump(), "application/json");
  if (!res) return "bind " + ns + "/" + name + ": " + httplib::to_string(res.error());
  if (res->status != 201 && res->status != 200)
    return "bind " + ns + "/" + name + ": " + StatusMessage(res->status, res->body);
  return "";
}

std::string KubeClient::DeletePod(const std::string& ns, const std::string& name,
                                  double grace_period_s) {
  auto client = Connect(10);
  const json options = {{"apiVersion", "v1"},
                        {"kind", "DeleteOptions"},
                        {"gracePeriodSeconds", static_cast<int64_t>(std::ceil(grace_period_s))}};
  const auto res = client->Delete("/api/v1/namespaces/" + Escape(ns) + "/pods/" + Escape(name),
                                  options.dump(), "application/json");
  if (!res) return "delete " + ns + "/" + name + ": " + httplib::to_string(res.error());
  if (res->status != 200 && res->status != 202 && res->status != 404)
    return "delete " + ns + "/" + name + ": " + StatusMessage(res->status, res->body);
  return "";
}

std::string KubeClient::PatchNodeAnnotations(
    const std::string& node, const std::map<std::string, std::string>& annotations) {
  const json patch = {{"metadata", {{"annotations", annotations}}}};
  auto client = Connect(10);
  const auto res =
      client->Patch("/api/v1/nodes/" + Escape(node), patch.dump(), "application/merge-patch+json");
  if (!res) return "patch node " + node + ": " + httplib::to_string(res.error());
  if (res->status != 200)
    return "patch node " + node + ": " + StatusMessage(res->status, res->body);
  return "";
}

}  // namespace berth
