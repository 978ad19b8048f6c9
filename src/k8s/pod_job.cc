#include "k8s/pod_job.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>

#include "core/cell_tree.h"
#include "k8s/json_fields.h"

namespace berth {
namespace {

using nlohmann::json;

constexpr size_t kMaxText = 253;  // a DNS subdomain: the longest name Kubernetes gives anything
constexpr size_t kMaxSelectorLabels = 64;
constexpr double kMaxExact = 9007199254740992.0;  // 2^53

// A string member, "" when absent; false when present and not a string or too long.
bool Text(const json& object, const char* key, std::string* out) {
  out->clear();
  const json* value = Field(object, key);
  if (value == nullptr) return true;
  if (!value->is_string() || value->get_ref<const std::string&>().size() > kMaxText) return false;
  *out = value->get<std::string>();
  return true;
}

bool Fail(std::string* why, const std::string& text) {
  *why = text;
  return false;
}

// A quantity member of a resource list (a string, or a number as some clients send).
bool QuantityText(const json& value, std::string* text) {
  if (value.is_string()) {
    *text = value.get<std::string>();
    return text->size() <= 64;
  }
  if (value.is_number()) {
    *text = value.dump();
    return true;
  }
  return false;
}

bool AddResources(const json& container, const std::string& where, bool init,
                  std::map<std::string, double>* total, std::string* why) {
  const json* resources = Field(container, "resources");
  if (resources == nullptr) return true;
  std::map<std::string, double> mine;
  // Requests say what scheduling needs; extended resources (GPUs) may be given as limits only.
  for (const char* list : {"limits", "requests"}) {
    const json* entries = Field(*resources, list);
    if (entries == nullptr) continue;
    if (!entries->is_object() || entries->size() > 64)
      return Fail(why, where + ".resources." + list + ": expected a map of at most 64 resources");
    for (const auto& [name, value] : entries->items()) {
      std::string text;
      int64_t amount = 0;
      const bool memory = name == "memory";
      const double scale = name == "cpu" ? 1000 : 1;
      if (!QuantityText(value, &text) ||
          !(memory ? ParseQuantityMib(text, &amount) : ParseQuantity(text, scale, &amount)))
        return Fail(why, where + ".resources." + list + "." + name +
                             ": expected a quantity such as 2, 500m or 4Gi");
      mine[name] = static_cast<double>(amount);  // requests, read second, win
    }
  }
  for (const auto& [name, amount] : mine) {
    double& slot = (*total)[name];
    slot = init ? std::max(slot, amount) : slot + amount;
  }
  return true;
}

bool ReadAnnotations(const json& meta, std::map<std::string, std::string>* out, std::string* why) {
  const json* annotations = Field(meta, "annotations");
  if (annotations == nullptr) return true;
  if (!annotations->is_object())
    return Fail(why, "metadata.annotations: expected a map of strings");
  for (const auto& [key, value] : annotations->items()) {
    if (key.rfind("berth.io/", 0) != 0) continue;  // others' annotations may be any size
    if (!value.is_string() || value.get_ref<const std::string&>().size() > 4096)
      return Fail(why, "metadata.annotations." + key + ": expected a string of at most 4096 bytes");
    (*out)[key] = value.get<std::string>();
  }
  return true;
}

bool AnnotationInt(const std::map<std::string, std::string>& annotations, const std::string& key,
                   int64_t lowest, int64_t highest, int64_t* value, std::string* why) {
  const auto it = annotations.find(key);
  if (it == annotations.end()) return true;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0 || parsed < lowest || parsed > highest)
    return Fail(why, "metadata.annotations." + key + ": expected a whole number from " +
                         std::to_string(lowest) + " to " + std::to_string(highest) + ", got \"" +
                         it->second + "\"");
  *value = parsed;
  return true;
}

bool AnnotationLevel(const std::map<std::string, std::string>& annotations, const std::string& key,
                     std::optional<Level>* level, std::string* why) {
  const auto it = annotations.find(key);
  if (it == annotations.end()) return true;
  Level parsed;
  if (!ParseLevel(it->second, &parsed))
    return Fail(why, "metadata.annotations." + key +
                         ": expected gpu, switch, socket, node, rack or any, got \"" + it->second +
                         "\"");
  *level = parsed;
  return true;
}

}  // namespace

bool ParseQuantity(const std::string& text, double scale, int64_t* value) {
  if (text.empty() || text.size() > 64) return false;
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  const std::string suffix(end);
  // Only the decimal forms: strtod's hex, inf and nan are not quantities.
  if (end == text.c_str() || text.find_first_of("xXnN") != std::string::npos) return false;
  static const std::map<std::string, double> kSuffixes = {{"", 1},
                                                          {"m", 1e-3},
                                                          {"k", 1e3},
                                                          {"M", 1e6},
                                                          {"G", 1e9},
                                                          {"T", 1e12},
                                                          {"P", 1e15},
                                                          {"E", 1e18},
                                                          {"Ki", 1024.0},
                                                          {"Mi", 1048576.0},
                                                          {"Gi", 1073741824.0},
                                                          {"Ti", 1099511627776.0},
                                                          {"Pi", 1125899906842624.0},
                                                          {"Ei", 1152921504606846976.0}};
  const auto it = kSuffixes.find(suffix);
  if (it == kSuffixes.end() || !std::isfinite(number) || number < 0) return false;
  const double scaled = std::ceil(number * it->second * scale - 1e-9);
  if (!(scaled >= 0 && scaled <= kMaxExact)) return false;
  *value = static_cast<int64_t>(scaled);
  return true;
}

bool ParseQuantityMib(const std::string& text, int64_t* mib) {
  int64_t bytes = 0;
  if (!ParseQuantity(text, 1, &bytes)) return false;
  *mib = (bytes + 1048575) / 1048576;
  return true;
}

bool ParseTimestamp(const std::string& text, double* seconds) {
  std::tm tm{};
  int consumed = 0;
  if (text.size() < 20 ||
      std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19 || text.back() != 'Z')
    return false;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return false;
  *seconds = static_cast<double>(timegm(&tm));
  return true;
}

bool ReadPod(const json& object, Pod* pod, std::string* why) {
  *pod = Pod{};
  if (!object.is_object()) return Fail(why, "Pod: expected a v1.Pod object");
  const json* meta = Field(object, "metadata");
  if (meta == nullptr || !meta->is_object()) return Fail(why, "Pod.metadata: missing");
  if (!Text(*meta, "uid", &pod->uid) || pod->uid.empty())
    return Fail(why, "Pod.metadata.uid: expected the pod's UID (a string)");
  if (!Text(*meta, "name", &pod->name) || pod->name.empty())
    return Fail(why, "Pod.metadata.name: expected the pod's name (a string)");
  if (!Text(*meta, "namespace", &pod->ns))
    return Fail(why, "Pod.metadata.namespace: expected a string");
  if (pod->ns.empty()) pod->ns = "default";
  pod->terminating = Field(*meta, "deletionTimestamp") != nullptr;
  std::string created;
  if (Text(*meta, "creationTimestamp", &created) && !created.empty())
    ParseTimestamp(created, &pod->created);

  std::map<std::string, std::string> annotations;
  if (!ReadAnnotations(*meta, &annotations, why)) return false;
  const json empty = json::object();
  const json* spec = Field(object, "spec");
  if (spec == nullptr) spec = &empty;
  if (!spec->is_object()) return Fail(why, "Pod.spec: expected an object");
  if (!Text(*spec, "nodeName", &pod->node))
    return Fail(why, "Pod.spec.nodeName: expected a string");
  if (const json* status = Field(object, "status"); status != nullptr)
    Text(*status, "phase", &pod->phase);

  // Containers' needs add up; init containers run one at a time before them, so the pod needs
  // the larger of the sum and its largest init container.
  std::map<std::string, double> need;
  for (const char* list : {"containers", "initContainers"}) {
    const json* containers = Field(*spec, list);
    if (containers == nullptr) continue;
    if (!containers->is_array() || containers->size() > kMaxContainers)
      return Fail(why, std::string("Pod.spec.") + list + ": expected a list of at most " +
                           std::to_string(kMaxContainers) + " containers");
    const bool init = std::string(list) == "initContainers";
    std::map<std::string, double> part;
    for (size_t i = 0; i < containers->size(); ++i)
      if (!AddResources((*containers)[i],
                        std::string("Pod.spec.") + list + "[" + std::to_string(i) + "]", init,
                        &part, why))
        return false;
    for (const auto& [name, amount] : part)
      need[name] = init ? std::max(need[name], amount) : need[name] + amount;
  }

  JobSpec& job = pod->spec;
  job.name = pod->ns + "/" + pod->name;
  job.user = pod->ns;  // users share fairly by namespace within a queue
  job.queue = "default";
  if (const auto it = annotations.find("berth.io/queue"); it != annotations.end())
    job.queue = it->second;
  int64_t priority = kDefaultPodPriority;
  if (!AnnotationInt(annotations, "berth.io/priority", -1000000000, 1000000000, &priority, why))
    return false;
  job.priority = static_cast<int>(priority);
  if (const json* grace = Field(*spec, "terminationGracePeriodSeconds");
      grace != nullptr && grace->is_number() && grace->get<double>() >= 0)
    job.grace_period_s = std::min(grace->get<double>(), 86400.0);

  TaskGroup group;
  group.name = pod->name;
  Demand& demand = group.demand;
  demand.cpu_milli = static_cast<int64_t>(need["cpu"]);
  demand.memory_mib = static_cast<int64_t>(need["memory"]);
  int64_t gpus = 0, share = 0;
  if (const auto it = need.find("nvidia.com/gpu"); it != need.end())
    gpus = static_cast<int64_t>(it->second);
  if (!AnnotationInt(annotations, "berth.io/gpu-share", 1, 1000, &share, why)) return false;
  for (const auto& [name, amount] : need) {
    const std::string prefix = "nvidia.com/mig-";
    if (name.rfind(prefix, 0) != 0 || amount == 0) continue;
    if (amount != 1 || !demand.mig_profile.empty())
      return Fail(why, "Pod.spec.containers[].resources: " + name +
                           ": berth gives a pod one MIG instance; ask for 1 of one profile "
                           "(use a gang for more)");
    demand.mig_profile = name.substr(prefix.size());
  }
  // A share comes with a device for kubelet and berth's device plugin to hand over (berth
  // chooses which GPU): one seat of the share resource, or nvidia.com/gpu: 1.
  if (const auto it = need.find(kGpuShareResource); it != need.end() && it->second > 0) {
    if (it->second != 1 || share == 0)
      return Fail(why, std::string("Pod.spec.containers[].resources: ") + kGpuShareResource +
                           ": ask for 1 (one seat on a shared GPU), with the annotation " +
                           kGpuShareResource + " giving the thousandths of the GPU, 1 to 1000");
    if (gpus > 0)
      return Fail(
          why, std::string("Pod: ask for ") + kGpuShareResource + " or nvidia.com/gpu, not both");
  }
  if (share > 0 && gpus == 1) gpus = 0;
  if (int(gpus > 0) + int(share > 0) + int(!demand.mig_profile.empty()) > 1)
    return Fail(why,
                "Pod: ask for one of nvidia.com/gpu, an nvidia.com/mig-* instance or the "
                "berth.io/gpu-share annotation (with at most nvidia.com/gpu: 1), not several");
  if (gpus > 1024) return Fail(why, "Pod: nvidia.com/gpu: at most 1024 GPUs in one pod");
  if (gpus > 0) SetGpuDemand(static_cast<int>(gpus), 1000, &demand);
  if (share > 0) SetGpuDemand(1, static_cast<int>(share), &demand);
  pod->wants_gpus = gpus > 0 || share > 0 || !demand.mig_profile.empty();
  if (const auto it = annotations.find("berth.io/gpu-model"); it != annotations.end())
    demand.models = {it->second};
  if (!AnnotationLevel(annotations, "berth.io/affinity", &demand.affinity, why)) return false;
  if (!AnnotationLevel(annotations, "berth.io/gang-affinity", &job.gang_affinity, why))
    return false;
  if (const json* selector = Field(*spec, "nodeSelector"); selector != nullptr) {
    if (!selector->is_object() || selector->size() > kMaxSelectorLabels)
      return Fail(why, "Pod.spec.nodeSelector: expected a map of at most 64 labels");
    for (const auto& [key, value] : selector->items())
      if (value.is_string()) group.node_selector[key] = value.get<std::string>();
  }
  job.groups.push_back(std::move(group));

  // The gang: berth.io/gang (with its size), or a PodGroup's label (its size from the PodGroup).
  if (const auto it = annotations.find("berth.io/gang"); it != annotations.end()) {
    int64_t size = 0;
    if (annotations.count("berth.io/gang-size") == 0)
      return Fail(why, "metadata.annotations.berth.io/gang-size: a pod of gang \"" + it->second +
                           "\" needs the gang's size too");
    if (!AnnotationInt(annotations, "berth.io/gang-size", 1, kMaxGangSize, &size, why))
      return false;
    pod->gang = pod->ns + "/" + it->second;
    pod->gang_size = static_cast<int>(size);
  } else if (const json* labels = Field(*meta, "labels"); labels != nullptr) {
    std::string group_name;
    if (Text(*labels, kPodGroupLabel, &group_name) && !group_name.empty())
      pod->gang = pod->ns + "/" + group_name;
  }
  if (const auto it = annotations.find(kGpuIdsAnnotation); it != annotations.end())
    pod->gpu_ids = it->second;
  if (const auto it = annotations.find(kPlacementAnnotation); it != annotations.end())
    pod->placement = it->second;
  if (const auto it = annotations.find(kBorrowedAnnotation); it != annotations.end())
    pod->borrowed = it->second == "true";
  return true;
}

}  // namespace berth
