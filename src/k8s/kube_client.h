// The Kubernetes API server, as the extender uses it: lists and watches (one JSON event per
// line, resumable from a resourceVersion, 410 Gone when that is too old), bindings and pod
// deletions. Each call opens its own connection, so that watches and writes in several threads
// never share one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/kubeconfig.h"
#include "k8s/extender.h"
#include "k8s/json_fields.h"

namespace httplib {
class Client;
}

namespace berth {

constexpr size_t kMaxWatchLine = 4 << 20;  // one watch event (a pod or node object)

class KubeClient : public KubeActions {
 public:
  explicit KubeClient(KubeConfig config);
  ~KubeClient() override;

  // GET `path` (a list); "" with the items and the list's resourceVersion, or why it failed.
  // `missing_ok`: a 404 (an API group not installed, such as PodGroups) is an empty list.
  std::string List(const std::string& path, std::vector<nlohmann::json>* items,
                   std::string* resource_version, bool missing_ok = false);
  // Watches `path` from `resource_version` for up to timeout_s, calling `on_event(type, object)`
  // for each event and updating `resource_version` as they come (bookmarks too). Returns "" when
  // the stream ended, kExpired when the version is too old (relist), or why it failed. Stops
  // early once `stop` is set and the next event or bookmark arrives.
  static constexpr const char* kExpired = "expired";
  std::string Watch(const std::string& path, std::string* resource_version, int timeout_s,
                    const std::function<void(const std::string&, const nlohmann::json&)>& on_event,
                    const std::atomic<bool>& stop);

  std::string Bind(const std::string& ns, const std::string& name, const std::string& node,
                   const std::map<std::string, std::string>& annotations) override;
  std::string DeletePod(const std::string& ns, const std::string& name,
                        double grace_period_s) override;
  // Sets these annotations on the Node (a merge PATCH: the node's other annotations stay).
  std::string PatchNodeAnnotations(const std::string& node,
                                   const std::map<std::string, std::string>& annotations);

 private:
  std::unique_ptr<httplib::Client> Connect(int read_timeout_s) const;
  KubeConfig config_;
};

// "Status 404 NotFound: pods \"x\" not found" from an API server's error body, or the body's
// start when it is not a Status.
std::string StatusMessage(int code, const std::string& body);

}  // namespace berth
