#include "k8s/node_shape.h"

#include <algorithm>
#include <set>

#include "k8s/json_fields.h"
#include "k8s/pod_job.h"

namespace berth {
namespace {

using nlohmann::json;

constexpr size_t kMaxLabels = 256;
constexpr size_t kMaxLabelText = 1024;
constexpr int64_t kMaxNodeCpus = 4096;

bool Fail(std::string* why, const std::string& text) {
  *why = text;
  return false;
}

// An allocatable quantity, or -1 when absent.
bool Allocatable(const json& object, const char* name, bool mib, int64_t* value, std::string* why) {
  *value = -1;
  const json* status = Field(object, "status");
  const json* list = status == nullptr ? nullptr : Field(*status, "allocatable");
  if (list == nullptr) list = status == nullptr ? nullptr : Field(*status, "capacity");
  const json* entry = list == nullptr ? nullptr : Field(*list, name);
  if (entry == nullptr) return true;
  const std::string text =
      entry->is_number() ? entry->dump() : (entry->is_string() ? entry->get<std::string>() : "");
  const bool ok = mib ? ParseQuantityMib(text, value)
                      : ParseQuantity(text, std::string(name) == "cpu" ? 1000 : 1, value);
  if (!ok)
    return Fail(why, std::string("Node.status.allocatable.") + name +
                         ": expected a quantity such as 64, 500m or 512Gi");
  return true;
}

bool LabelInt(const std::map<std::string, std::string>& labels, const std::string& key,
              int64_t highest, int64_t* value, std::string* why) {
  const auto it = labels.find(key);
  if (it == labels.end()) return true;
  int64_t parsed = 0;
  if (!ParseQuantity(it->second, 1, &parsed) || parsed > highest)
    return Fail(why, "Node.metadata.labels." + key + ": expected a whole number up to " +
                         std::to_string(highest) + ", got \"" + it->second + "\"");
  *value = parsed;
  return true;
}

// The GPUs' UUIDs from berth.io/gpu-uuids, kept only when there is one non-empty UUID of at most
// 128 bytes for each GPU: a partial list would name some GPUs by UUID and others by index.
void NameGpus(const std::string& uuids, K8sNode* node) {
  std::vector<std::string> names;
  size_t start = 0;
  while (!uuids.empty() && start <= uuids.size() && names.size() <= node->node.gpus.size()) {
    const size_t comma = std::min(uuids.find(',', start), uuids.size());
    names.push_back(uuids.substr(start, comma - start));
    start = comma + 1;
  }
  const bool whole = names.size() == node->node.gpus.size() &&
                     std::none_of(names.begin(), names.end(), [](const std::string& name) {
                       return name.empty() || name.size() > 128;
                     });
  if (whole) node->gpu_uuids = std::move(names);
}

}  // namespace

bool ReadK8sNode(const json& object, const Cluster* declared, std::vector<GpuModel>* models,
                 K8sNode* out, std::string* why) {
  *out = K8sNode{};
  Node& node = out->node;
  const json* meta = Field(object, "metadata");
  if (meta == nullptr) return Fail(why, "Node.metadata: missing");
  node.name = FieldText(*meta, "name");
  if (node.name.empty() || node.name.size() > 253)
    return Fail(why, "Node.metadata.name: expected the node's name");
  if (const json* labels = Field(*meta, "labels"); labels != nullptr) {
    if (!labels->is_object() || labels->size() > kMaxLabels)
      return Fail(why, "Node.metadata.labels: expected a map of at most 256 labels");
    for (const auto& [key, value] : labels->items())
      if (value.is_string() && key.size() <= kMaxLabelText &&
          value.get_ref<const std::string&>().size() <= kMaxLabelText)
        node.labels[key] = value.get<std::string>();
  }
  const std::map<std::string, std::string>& labels = node.labels;
  const std::string who = "Node " + node.name + ": ";
  if (const auto it = labels.find("berth.io/rack"); it != labels.end()) {
    node.rack = it->second;
  } else if (const auto zone = labels.find("topology.kubernetes.io/zone"); zone != labels.end()) {
    node.rack = zone->second;
  }
  if (!node.rack.empty()) node.labels["rack"] = node.rack;

  std::string uuids;
  if (const json* annotations = Field(*meta, "annotations"); annotations != nullptr)
    uuids = FieldText(*annotations, "berth.io/gpu-uuids");
  if (const json* spec = Field(object, "spec"); spec != nullptr) {
    const json* cordon = Field(*spec, "unschedulable");
    out->unschedulable = cordon != nullptr && cordon->is_boolean() && cordon->get<bool>();
  }
  if (const json* status = Field(object, "status"); status != nullptr) {
    const json* conditions = Field(*status, "conditions");
    if (conditions != nullptr && conditions->is_array() && conditions->size() <= 64)
      for (const json& condition : *conditions)
        if (FieldText(condition, "type") == "Ready")
          out->ready = FieldText(condition, "status") == "True";
  }

  int64_t cpu_milli = 0, memory_mib = 0, gpus = 0, gpu_memory = 0;
  if (!Allocatable(object, "cpu", false, &cpu_milli, why) ||
      !Allocatable(object, "memory", true, &memory_mib, why) ||
      !Allocatable(object, "nvidia.com/gpu", false, &gpus, why))
    return Fail(why, who + *why);
  if (gpus < 0) {
    gpus = 0;
    if (!LabelInt(labels, "nvidia.com/gpu.count", kMaxGpusPerK8sNode, &gpus, why))
      return Fail(why, who + *why);
  }
  if (gpus > kMaxGpusPerK8sNode)
    return Fail(why, who + "allocatable nvidia.com/gpu: at most " +
                         std::to_string(kMaxGpusPerK8sNode) + " GPUs on one node");
  if (!LabelInt(labels, "nvidia.com/gpu.memory", int64_t{1} << 30, &gpu_memory, why))
    return Fail(why, who + *why);
  node.cpu_milli = std::max<int64_t>(cpu_milli, 0);
  node.memory_mib = std::max<int64_t>(memory_mib, 0);

  const int declared_index = declared == nullptr ? -1 : declared->FindNode(node.name);
  if (declared_index >= 0) {
    // The operator's topology for this node; kube's allocatable CPU and memory still count.
    const Node& shape = declared->nodes[declared_index];
    node.sockets = shape.sockets;
    node.switches = shape.switches;
    node.gpus = shape.gpus;
    node.shape = shape.shape;
    NameGpus(uuids, out);
    for (const Gpu& gpu : node.gpus)
      if (const GpuModel* model = declared->FindModel(gpu.model);
          model != nullptr && std::none_of(models->begin(), models->end(),
                                           [&](const GpuModel& m) { return m.name == gpu.model; }))
        models->push_back(*model);
    return true;
  }

  const int64_t cpus = std::clamp<int64_t>(node.cpu_milli / 1000, 1, kMaxNodeCpus);
  Socket socket;
  for (int c = 0; c < cpus; ++c) socket.cpus.push_back(c);
  socket.memory_mib = node.memory_mib;
  node.sockets.push_back(socket);
  node.switches.push_back(PcieSwitch{0});
  if (gpus == 0) return true;
  std::string product;
  if (const auto it = labels.find("nvidia.com/gpu.product"); it != labels.end())
    product = it->second;
  if (product.rfind("NVIDIA-", 0) == 0) product = product.substr(7);
  if (product.empty()) product = "gpu";
  const auto known = std::find_if(models->begin(), models->end(),
                                  [&](const GpuModel& m) { return m.name == product; });
  if (known == models->end()) {
    GpuModel model;
    model.name = product;
    model.memory_mib = gpu_memory;
    model.mig_profiles = BuiltinMigProfiles(product);
    models->push_back(model);
  } else if (known->memory_mib == 0) {
    known->memory_mib = gpu_memory;
  }
  // MIG as GPU feature discovery exposes it: "single" advertises each MIG device as one
  // nvidia.com/gpu, which berth then places as a whole device; "mixed" advertises only the GPUs
  // out of MIG mode as nvidia.com/gpu, and the rest (the label's count beyond them) are MIG
  // GPUs that berth carves on demand.
  std::string strategy;
  if (const auto it = labels.find("nvidia.com/mig.strategy"); it != labels.end())
    strategy = it->second;
  int64_t whole = gpus;
  if (strategy == "mixed" && !BuiltinMigProfiles(product).empty()) {
    int64_t physical = 0;
    if (!LabelInt(labels, "nvidia.com/gpu.count", kMaxGpusPerK8sNode, &physical, why))
      return Fail(why, who + *why);
    gpus = std::max(gpus, physical);
  }
  const bool nvlink = product.find("SXM") != std::string::npos;
  for (int64_t g = 0; g < gpus; ++g) {
    Gpu gpu;
    gpu.model = product;
    gpu.nvlink_domain = nvlink ? 0 : -1;
    gpu.mig_enabled = g >= whole;
    node.gpus.push_back(gpu);
  }
  NameGpus(uuids, out);
  return true;
}

std::string BuildK8sCluster(const std::map<std::string, K8sNode>& nodes,
                            const std::vector<GpuModel>& models, Cluster* cluster) {
  *cluster = Cluster{};
  cluster->name = "kubernetes";
  cluster->models = models;
  std::set<std::string> racks;
  for (const auto& [name, node] : nodes) {
    cluster->nodes.push_back(node.node);
    if (!node.node.rack.empty() && racks.insert(node.node.rack).second)
      cluster->racks.push_back(node.node.rack);
  }
  // A rack for every node or none: nodes without the label share one.
  if (!racks.empty())
    for (Node& node : cluster->nodes)
      if (node.rack.empty()) {
        node.rack = "unlabelled";
        node.labels["rack"] = node.rack;
        if (racks.insert(node.rack).second) cluster->racks.push_back(node.rack);
      }
  return ValidateCluster(*cluster);
}

}  // namespace berth
