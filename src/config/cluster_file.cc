#include "config/cluster_file.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "config/cluster_size.h"
#include "config/config_error.h"
#include "config/file_text.h"
#include "config/flat_node.h"
#include "config/yaml_reader.h"
#include "core/mig.h"

namespace berth {
namespace {

using limits::Limits;

template <typename Map>
std::vector<std::string> Keys(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

bool ParseCpuId(std::string_view text, int* cpu) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *cpu);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty() && *cpu >= 0 &&
         *cpu <= limits::Get().cpu_id;
}

// Appends the CPU ids of a Linux cpulist such as "0-63,128-191"; false when malformed. Stops
// early, true, once it holds more ids than there are distinct ones: the caller finds one twice
// (so that "0-65535,0-65535,..." costs no more than one range).
bool ParseCpuList(std::string_view text, std::vector<int>* cpus) {
  if (text.empty()) return true;
  const auto most = static_cast<size_t>(limits::Get().cpu_id) + 1;
  while (true) {
    if (cpus->size() > most) return true;
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const size_t dash = item.find('-');
    int first = 0;
    if (!ParseCpuId(item.substr(0, dash), &first)) return false;
    int last = first;
    if (dash != std::string_view::npos && !ParseCpuId(item.substr(dash + 1), &last)) return false;
    if (last < first) return false;
    for (int cpu = first; cpu <= last; ++cpu) cpus->push_back(cpu);
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

// "54Gi", "512Mi", "2Ti" or a plain number of MiB (Kubernetes quantities, as HiveD writes
// them); -1 when malformed.
int64_t ParseMiB(const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || value < 0) return -1;
  const std::string unit(end, text.data() + text.size());
  const int64_t scale = unit.empty() || unit == "Mi" ? 1
                        : unit == "Gi"               ? 1024
                        : unit == "Ti"               ? 1024 * 1024
                                                     : 0;
  int64_t mib = 0;
  if (scale == 0 || __builtin_mul_overflow(value, scale, &mib)) return -1;
  return mib;
}

Gpu MakeGpu(const std::string& model, int pcie_switch) {
  Gpu gpu;
  gpu.model = model;
  gpu.pcie_switch = pcie_switch;
  return gpu;
}

// A GPU listed by index under a switch, held until every switch of the shape is read.
struct ListedGpu {
  std::string model;
  int pcie_switch = 0;
  std::string where;  // "sockets[0].switches[1]", for the two-switches error
};

// One entry of cellTypes with what its chain down to the GPU implies.
struct CellTypeInfo {
  CellTypeSpec spec;
  YAML::Node node;                // the key, for its line
  std::string chain;              // "A -> B -> K80", for messages
  std::string leaf;               // the GPU model at the bottom of the chain
  int leaf_count = 0;             // GPUs in one cell
  bool has_node_level = false;    // this type or one below it is isNodeLevel
  bool above_node_level = false;  // a type strictly below it is isNodeLevel
};

// Per-GPU resources of a leaf cell type (skuTypes), for nodes created from cells.
struct Sku {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};

class ClusterFileParser {
 public:
  explicit ClusterFileParser(const std::string& source) : r_(source) {}

  Cluster Parse(const std::string& text);

 private:
  void ParseModel(const YAML::Node& node, const std::string& path);
  std::vector<MigProfile> ParseMigProfiles(const YAML::Node& node, const std::string& path,
                                           const std::string& model);
  MigProfile ParseMigProfile(const YAML::Node& node, const std::string& path);
  // The name in `node`, which must be a declared GPU model.
  std::string ModelName(const YAML::Node& node, const std::string& path) const;

  Node ParseShape(const YAML::Node& node, const std::string& path);
  void ParseSockets(const YAML::Node& sockets, const std::string& path,
                    const std::string& default_model, Node* shape);
  std::vector<int> ParseCpus(const YAML::Node& node, const std::string& path);
  void ParseShapeMig(const YAML::Node& node, const std::string& path, Node* shape);

  void ParseRack(const YAML::Node& node, const std::string& path);
  void ParseNodes(const YAML::Node& list, const std::string& path, const std::string& rack,
                  const std::string& zone);

  void ParseExplicitCells(const YAML::Node& root);
  void ParseCellTypes(const YAML::Node& node);
  void ParseSkuTypes(const YAML::Node& node);
  PhysicalCellSpec ParseCell(const YAML::Node& node, const std::string& path,
                             const std::string& type, const std::string& default_address);
  void BuildCell(PhysicalCellSpec* cell, const YAML::Node* children, const YAML::Node& at,
                 const std::string& path);
  void BindNode(const std::string& name, const CellTypeInfo& type, const YAML::Node& at,
                const std::string& path);
  // Adds `count` copies of `node` named by `name_of(k)`, once the cluster's bounds allow them;
  // a name given before is an error at `at`.
  void AddNodes(Node node, int64_t count, const std::function<std::string(int64_t)>& name_of,
                const YAML::Node& at, const std::string& path);

  YamlReader r_;
  Cluster cluster_;
  std::map<std::string, Node> shapes_;  // a node of each shape, without name, rack or labels
  std::vector<CellTypeInfo> cell_types_;
  std::map<std::string, size_t> cell_type_index_;
  std::map<std::string, Sku> skus_;
  std::map<std::string, std::string> bound_nodes_;  // node name -> path of its cell
  ClusterSize size_;
  struct NodeOrigin {
    size_t index;
    std::string where;  // "FILE:LINE: PATH" of the entry that declared it
  };
  std::map<std::string, NodeOrigin> node_origins_;
  std::map<std::string, std::string> model_origins_, rack_origins_;  // name -> "FILE:LINE"
};

Cluster ClusterFileParser::Parse(const std::string& text) {
  const YAML::Node root = r_.Parse(text);
  r_.CheckFields(root, "",
                 {"name", "gpuModels", "nodeShapes", "racks", "nodes", "skuTypes", "cellTypes",
                  "physicalCells"});
  cluster_.name = r_.Name(r_.Required(root, "", "name"), "name");
  if (const YAML::Node models = root["gpuModels"]) {
    r_.Sequence(models, "gpuModels");
    for (size_t i = 0; i < models.size(); ++i) ParseModel(models[i], IndexPath("gpuModels", i));
  }
  if (const YAML::Node shapes = root["nodeShapes"]) {
    for (const YamlEntry& entry : r_.Entries(shapes, "nodeShapes"))
      shapes_[entry.key] = ParseShape(entry.value, FieldPath("nodeShapes", entry.key));
  }
  if (const YAML::Node racks = root["racks"]) {
    r_.Sequence(racks, "racks");
    for (size_t i = 0; i < racks.size(); ++i) ParseRack(racks[i], IndexPath("racks", i));
  }
  if (const YAML::Node nodes = root["nodes"]) ParseNodes(nodes, "nodes", "", "");
  ParseExplicitCells(root);
  if (cluster_.gpu_count() == 0) {
    // The nodes' GPUs come from their shapes (or cells): point at where the nodes are listed.
    std::string key;
    for (const char* k : {"physicalCells", "nodes", "racks"})
      if (key.empty() && root[k]) key = k;
    r_.Fail(key.empty() ? root : root[key], key,
            "no node has GPUs; give a node shape GPUs (switches: [GPUs per PCIe switch] under a "
            "socket) and declare a node of that shape");
  }
  const std::string error = ValidateCluster(cluster_);
  if (!error.empty()) throw ConfigError(r_.source() + ": " + error);
  return std::move(cluster_);
}

void ClusterFileParser::ParseModel(const YAML::Node& node, const std::string& path) {
  r_.CheckFields(node, path, {"name", "memoryMiB", "mig"});
  GpuModel model;
  const YAML::Node name = r_.Required(node, path, "name");
  model.name = r_.Name(name, FieldPath(path, "name"));
  const auto [first, fresh] = model_origins_.emplace(model.name, r_.Where(name));
  if (!fresh)
    r_.Fail(name, FieldPath(path, "name"),
            "model " + Quoted(model.name) + " is already declared at " + first->second +
                "; give each model once");
  model.memory_mib = r_.Int(r_.Required(node, path, "memoryMiB"), FieldPath(path, "memoryMiB"), 0,
                            &Limits::node_memory_mib);
  if (const YAML::Node mig = node["mig"])
    model.mig_profiles = ParseMigProfiles(mig, FieldPath(path, "mig"), model.name);
  cluster_.models.push_back(std::move(model));
}

std::vector<MigProfile> ClusterFileParser::ParseMigProfiles(const YAML::Node& node,
                                                            const std::string& path,
                                                            const std::string& model) {
  if (node.IsScalar()) {
    if (node.Scalar() != "builtin")
      r_.Fail(node, path,
              "expected \"builtin\" or a list of MIG profiles, got " + Quoted(node.Scalar()));
    std::vector<MigProfile> profiles = BuiltinMigProfiles(model);
    if (profiles.empty())
      r_.Fail(node, path,
              "berth has no built-in MIG profiles for " + Quoted(model) +
                  " (it has A100-40GB, A100-80GB, H100-80GB, H100-NVL, H200); name the model "
                  "after one of those or list its profiles");
    return profiles;
  }
  r_.Sequence(node, path);
  if (node.size() == 0 || node.size() > static_cast<size_t>(kMaxMigProfiles))
    r_.Fail(node, path,
            "expected 1 to " + std::to_string(kMaxMigProfiles) + " MIG profiles, got " +
                std::to_string(node.size()));
  std::vector<MigProfile> profiles;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string item_path = IndexPath(path, i);
    profiles.push_back(ParseMigProfile(node[i], item_path));
    if (FindMigProfile(profiles, profiles.back().name) != static_cast<int>(i))
      r_.Fail(node[i], item_path, "profile " + Quoted(profiles.back().name) + " is listed twice");
  }
  return profiles;
}

MigProfile ClusterFileParser::ParseMigProfile(const YAML::Node& node, const std::string& path) {
  r_.CheckFields(node, path,
                 {"name", "computeSlices", "memorySlots", "starts", "maxInstances", "memoryMiB"});
  MigProfile profile;
  profile.name = r_.Name(r_.Required(node, path, "name"), FieldPath(path, "name"));
  profile.compute_slices =
      static_cast<int>(r_.Int(r_.Required(node, path, "computeSlices"),
                              FieldPath(path, "computeSlices"), 1, kMigComputeSlices));
  const YAML::Node slots = r_.Required(node, path, "memorySlots");
  profile.memory_slots =
      static_cast<int>(r_.Int(slots, FieldPath(path, "memorySlots"), 1, kMigMemorySlots));
  if (kMigMemorySlots % profile.memory_slots != 0)
    r_.Fail(slots, FieldPath(path, "memorySlots"), "expected 1, 2, 4 or 8 memory slots");
  const std::string starts_path = FieldPath(path, "starts");
  const YAML::Node starts = r_.Sequence(r_.Required(node, path, "starts"), starts_path);
  if (starts.size() == 0) r_.Fail(starts, starts_path, "expected at least one allowed start");
  // A start past this would run the instance beyond the last memory slot.
  const int last_start = kMigMemorySlots - profile.memory_slots;
  for (size_t i = 0; i < starts.size(); ++i)
    profile.starts.push_back(
        static_cast<int>(r_.Int(starts[i], IndexPath(starts_path, i), 0, last_start)));
  profile.max_instances =
      static_cast<int>(r_.Int(r_.Required(node, path, "maxInstances"),
                              FieldPath(path, "maxInstances"), 1, kMigComputeSlices));
  profile.memory_mib = r_.Int(r_.Required(node, path, "memoryMiB"), FieldPath(path, "memoryMiB"), 0,
                              &Limits::node_memory_mib);
  return profile;
}

std::string ClusterFileParser::ModelName(const YAML::Node& node, const std::string& path) const {
  const std::string name = r_.String(node, path);
  if (cluster_.FindModel(name)) return name;
  std::vector<std::string> declared;
  for (const GpuModel& model : cluster_.models) declared.push_back(model.name);
  r_.Fail(node, path,
          "unknown GPU model " + Quoted(name) + "; declare it under gpuModels" +
              (declared.empty() ? "" : " (declared: " + Join(declared) + ")"));
}

Node ClusterFileParser::ParseShape(const YAML::Node& node, const std::string& path) {
  r_.CheckFields(node, path, {"gpuModel", "cpuMilli", "memoryMiB", "nvlink", "mig", "sockets"});
  std::string default_model;
  if (const YAML::Node model = node["gpuModel"])
    default_model = ModelName(model, FieldPath(path, "gpuModel"));
  Node shape;
  ParseSockets(r_.Required(node, path, "sockets"), FieldPath(path, "sockets"), default_model,
               &shape);
  // CPU ids are unique within a node and at most the cpu-id bound, so their count cannot
  // overflow (ClusterSize checks the node's milli-CPUs against their bound).
  if (const YAML::Node cpu = node["cpuMilli"]) {
    shape.cpu_milli = r_.Int(cpu, FieldPath(path, "cpuMilli"), 0, &Limits::node_cpu_milli);
  } else {
    for (const Socket& socket : shape.sockets)
      shape.cpu_milli += 1000 * static_cast<int64_t>(socket.cpus.size());
  }
  if (const YAML::Node memory = node["memoryMiB"]) {
    shape.memory_mib = r_.Int(memory, FieldPath(path, "memoryMiB"), 0, &Limits::node_memory_mib);
  } else {
    for (const Socket& socket : shape.sockets)
      if (__builtin_add_overflow(shape.memory_mib, socket.memory_mib, &shape.memory_mib) ||
          shape.memory_mib > limits::Get().node_memory_mib)
        r_.Fail(node["sockets"], FieldPath(path, "sockets"),
                "the sockets' memoryMiB add up to " +
                    limits::OverLimit(&Limits::node_memory_mib, "MiB a node") + "; lower them");
  }
  if (const YAML::Node nvlink = node["nvlink"]) {
    const std::string nvlink_path = FieldPath(path, "nvlink");
    const std::string value = r_.String(nvlink, nvlink_path);
    if (value == "nvswitch") {
      for (Gpu& gpu : shape.gpus) gpu.nvlink_domain = 0;
    } else if (value != "none") {
      r_.Fail(nvlink, nvlink_path,
              "unknown value " + Quoted(value) + "; known values: none, nvswitch");
    }
  }
  if (const YAML::Node mig = node["mig"]) ParseShapeMig(mig, FieldPath(path, "mig"), &shape);
  return shape;
}

void ClusterFileParser::ParseSockets(const YAML::Node& sockets, const std::string& path,
                                     const std::string& default_model, Node* shape) {
  r_.Sequence(sockets, path);
  if (sockets.size() == 0) r_.Fail(sockets, path, "expected at least one socket");
  if (sockets.size() > static_cast<size_t>(limits::Get().sockets_per_node))
    r_.Fail(sockets, path,
            std::to_string(sockets.size()) + " sockets, " +
                limits::OverLimit(&Limits::sockets_per_node, "sockets a node"));
  // A shape gives GPU counts (indices in declaration order) or explicit index lists, not both.
  enum class Form { kUnset, kCounts, kLists } form = Form::kUnset;
  std::map<int64_t, ListedGpu> listed;
  std::map<int, size_t> cpu_socket;
  for (size_t s = 0; s < sockets.size(); ++s) {
    const YAML::Node socket_node = sockets[s];
    const std::string socket_path = IndexPath(path, s);
    r_.CheckFields(socket_node, socket_path, {"cpus", "memoryMiB", "switches"});
    Socket socket;
    if (const YAML::Node cpus = socket_node["cpus"]) {
      const std::string cpus_path = FieldPath(socket_path, "cpus");
      socket.cpus = ParseCpus(cpus, cpus_path);
      for (int cpu : socket.cpus) {
        const auto [it, fresh] = cpu_socket.emplace(cpu, s);
        if (fresh) continue;
        r_.Fail(cpus, cpus_path,
                "CPU " + std::to_string(cpu) +
                    (it->second == s ? " is listed twice"
                                     : " is also in sockets[" + std::to_string(it->second) +
                                           "]; each CPU belongs to one socket"));
      }
    }
    if (const YAML::Node memory = socket_node["memoryMiB"])
      socket.memory_mib =
          r_.Int(memory, FieldPath(socket_path, "memoryMiB"), 0, &Limits::node_memory_mib);
    shape->sockets.push_back(std::move(socket));
    const YAML::Node switches = socket_node["switches"];
    if (!switches) continue;
    const std::string switches_path = FieldPath(socket_path, "switches");
    r_.Sequence(switches, switches_path);
    for (size_t j = 0; j < switches.size(); ++j) {
      const YAML::Node entry = switches[j];
      const std::string entry_path = IndexPath(switches_path, j);
      const int pcie_switch = static_cast<int>(shape->switches.size());
      shape->switches.push_back(PcieSwitch{.socket = static_cast<int>(s)});
      // An int entry is the GPU count itself; a map has it under "gpus". (Never assign to a
      // YAML::Node: that rewrites the document node it refers to.)
      const bool is_map = entry.IsMap();
      if (is_map) r_.CheckFields(entry, entry_path, {"gpus", "model"});
      const YAML::Node gpus = is_map ? r_.Required(entry, entry_path, "gpus") : entry;
      const std::string gpus_path = is_map ? FieldPath(entry_path, "gpus") : entry_path;
      std::string model = default_model;
      if (is_map && entry["model"])
        model = ModelName(entry["model"], FieldPath(entry_path, "model"));
      if (model.empty())
        r_.Fail(entry, entry_path,
                "no GPU model: set gpuModel on the shape or model on this switch");
      const Form entry_form = gpus.IsSequence() ? Form::kLists : Form::kCounts;
      if (form != Form::kUnset && form != entry_form)
        r_.Fail(entry, entry_path,
                "mixes GPU counts and GPU index lists in one shape; use one form for all its "
                "switches");
      form = entry_form;
      if (form == Form::kCounts) {
        const int64_t count = r_.Int(gpus, gpus_path, 1, &Limits::gpus_per_node);
        if (static_cast<int64_t>(shape->gpus.size()) + count > limits::Get().gpus_per_node)
          r_.Fail(gpus, gpus_path,
                  "the shape's switches hold " +
                      limits::OverLimit(&Limits::gpus_per_node, "GPUs a node"));
        for (int64_t g = 0; g < count; ++g) shape->gpus.push_back(MakeGpu(model, pcie_switch));
        continue;
      }
      const std::string where =
          "sockets[" + std::to_string(s) + "].switches[" + std::to_string(j) + "]";
      for (size_t g = 0; g < gpus.size(); ++g) {
        const std::string gpu_path = IndexPath(gpus_path, g);
        const int64_t index = r_.Int(gpus[g], gpu_path, 0, limits::Get().gpus_per_node - 1);
        const auto [it, fresh] = listed.emplace(index, ListedGpu{model, pcie_switch, where});
        if (!fresh)
          r_.Fail(gpus[g], gpu_path,
                  "GPU " + std::to_string(index) + " is under two switches, " + it->second.where +
                      " and " + where + "; list each GPU under one switch");
      }
    }
  }
  int64_t expected = 0;
  for (const auto& [index, gpu] : listed) {
    if (index != expected)
      r_.Fail(sockets, path,
              "GPU " + std::to_string(expected) +
                  " is missing: the switches' gpus lists must name each index from 0 to " +
                  std::to_string(listed.size() - 1) + " exactly once");
    shape->gpus.push_back(MakeGpu(gpu.model, gpu.pcie_switch));
    ++expected;
  }
}

std::vector<int> ClusterFileParser::ParseCpus(const YAML::Node& node, const std::string& path) {
  std::vector<int> cpus;
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      cpus.push_back(static_cast<int>(r_.Int(node[i], IndexPath(path, i), 0, &Limits::cpu_id)));
    return cpus;
  }
  const std::string text = r_.String(node, path);
  if (!ParseCpuList(text, &cpus))
    r_.Fail(node, path,
            "bad cpulist " + Quoted(text) + ": expected CPU ids (0-" +
                std::to_string(limits::Get().cpu_id) +
                ") and ranges separated by commas, e.g. \"0-63,128-191\", or a list of ids");
  return cpus;
}

void ClusterFileParser::ParseShapeMig(const YAML::Node& node, const std::string& path,
                                      Node* shape) {
  r_.CheckFields(node, path, {"enabled", "layout"});
  const YAML::Node enabled_node = node["enabled"];
  const bool enabled = enabled_node && r_.Bool(enabled_node, FieldPath(path, "enabled"));
  const YAML::Node layout_node = node["layout"];
  const std::string layout_path = FieldPath(path, "layout");
  std::vector<std::string> layout;
  if (layout_node) {
    r_.Sequence(layout_node, layout_path);
    // A GPU holds at most one instance per compute slice; refuse more before copying the list.
    if (layout_node.size() > static_cast<size_t>(kMigComputeSlices))
      r_.Fail(layout_node, layout_path,
              "expected at most " + std::to_string(kMigComputeSlices) +
                  " MIG instances a GPU, got " + std::to_string(layout_node.size()));
    for (size_t i = 0; i < layout_node.size(); ++i)
      layout.push_back(r_.String(layout_node[i], IndexPath(layout_path, i)));
    if (!enabled) r_.Fail(layout_node, layout_path, "a fixed MIG layout needs enabled: true");
  }
  if (!enabled) return;
  std::set<std::string> checked;
  for (size_t g = 0; g < shape->gpus.size(); ++g) {
    Gpu& gpu = shape->gpus[g];
    gpu.mig_enabled = true;
    gpu.mig_layout = layout;
    if (!checked.insert(gpu.model).second) continue;
    const GpuModel& model = *cluster_.FindModel(gpu.model);  // ModelName checked it
    if (!model.mig_capable())
      r_.Fail(layout_node ? layout_node : enabled_node,
              layout_node ? layout_path : FieldPath(path, "enabled"),
              "GPU " + std::to_string(g) + " is a " + gpu.model +
                  ", which is not MIG-capable; give the model mig: builtin or a profile list "
                  "under gpuModels, or drop MIG from this shape");
    if (layout.empty()) continue;
    std::vector<MigInstance> placed;
    const std::string error = PlaceMigLayout(model.mig_profiles, layout, &placed);
    if (!error.empty()) r_.Fail(layout_node, layout_path, gpu.model + ": " + error);
  }
}

void ClusterFileParser::ParseRack(const YAML::Node& node, const std::string& path) {
  r_.CheckFields(node, path, {"name", "zone", "nodes"});
  const YAML::Node name_node = r_.Required(node, path, "name");
  const std::string name = r_.Name(name_node, FieldPath(path, "name"));
  const auto [first, fresh] = rack_origins_.emplace(name, r_.Where(name_node));
  if (!fresh)
    r_.Fail(name_node, FieldPath(path, "name"),
            "rack " + Quoted(name) + " is already declared at " + first->second +
                "; give each rack once, with all its nodes");
  std::string zone;
  if (const YAML::Node z = node["zone"]) zone = r_.Name(z, FieldPath(path, "zone"));
  cluster_.racks.push_back(name);
  if (const YAML::Node nodes = node["nodes"])
    ParseNodes(nodes, FieldPath(path, "nodes"), name, zone);
}

void ClusterFileParser::ParseNodes(const YAML::Node& list, const std::string& path,
                                   const std::string& rack, const std::string& zone) {
  r_.Sequence(list, path);
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string entry_path = IndexPath(path, i);
    r_.CheckFields(entry, entry_path, {"name", "namePrefix", "count", "shape", "labels"});
    const YAML::Node shape_node = r_.Required(entry, entry_path, "shape");
    const std::string shape_name = r_.Name(shape_node, FieldPath(entry_path, "shape"));
    const auto shape = shapes_.find(shape_name);
    if (shape == shapes_.end())
      r_.Fail(shape_node, FieldPath(entry_path, "shape"),
              "unknown shape " + Quoted(shape_name) + "; declare it under nodeShapes" +
                  (shapes_.empty() ? "" : " (declared: " + Join(Keys(shapes_)) + ")"));
    Node node = shape->second;
    node.shape = shape_name;
    node.rack = rack;
    const std::string labels_path = FieldPath(entry_path, "labels");
    const YAML::Node labels = entry["labels"];
    if (labels) {
      const std::vector<YamlEntry> entries = r_.Entries(labels, labels_path);
      if (entries.size() > static_cast<size_t>(limits::Get().labels_per_node))
        r_.Fail(labels, labels_path,
                std::to_string(entries.size()) + " labels, " +
                    limits::OverLimit(&Limits::labels_per_node, "labels a node"));
      for (const YamlEntry& label : entries) {
        const std::string label_path = FieldPath(labels_path, label.key);
        const std::string value = r_.String(label.value, label_path);
        if (value.size() > static_cast<size_t>(limits::Get().name_length))
          r_.Fail(label.value, label_path,
                  "a value " + limits::OverLimit(&Limits::name_length, "characters long"));
        node.labels[label.key] = value;
      }
    }
    // The rack's own labels: a node cannot claim another rack or zone than the one it is in.
    for (const auto& [key, value] : {std::pair{"rack", rack}, std::pair{"zone", zone}}) {
      if (value.empty()) continue;
      if (node.labels.count(key))
        r_.Fail(labels, FieldPath(labels_path, key),
                "set from the rack the node is in; remove this label");
      node.labels[key] = value;
    }
    const YAML::Node name = entry["name"];
    const YAML::Node prefix = entry["namePrefix"];
    const YAML::Node count = entry["count"];
    if (name && prefix) r_.Fail(entry, entry_path, "give either name or namePrefix, not both");
    if (name) {
      if (count)
        r_.Fail(count, FieldPath(entry_path, "count"), "count goes with namePrefix, not name");
      const std::string text = r_.Name(name, FieldPath(entry_path, "name"));
      AddNodes(
          std::move(node), 1, [&](int64_t) { return text; }, name, FieldPath(entry_path, "name"));
    } else if (prefix) {
      const std::string text = r_.Name(prefix, FieldPath(entry_path, "namePrefix"));
      const YAML::Node count_node = r_.Required(entry, entry_path, "count");
      const int64_t n = r_.Int(count_node, FieldPath(entry_path, "count"), 1, &Limits::nodes);
      const size_t width = std::to_string(n - 1).size();
      if (text.size() + width > static_cast<size_t>(limits::Get().name_length))
        r_.Fail(prefix, FieldPath(entry_path, "namePrefix"),
                "with " + std::to_string(width) + " digits of count the node names have " +
                    std::to_string(text.size() + width) + " characters, " +
                    limits::OverLimit(&Limits::name_length, "characters") + "; shorten the prefix");
      AddNodes(
          std::move(node), n,
          [&](int64_t k) {
            const std::string digits = std::to_string(k);
            return text + std::string(width - digits.size(), '0') + digits;
          },
          count_node, FieldPath(entry_path, "count"));
    } else {
      r_.Fail(entry, entry_path,
              "missing required field \"name\" (or \"namePrefix\" with \"count\")");
    }
  }
}

void ClusterFileParser::ParseExplicitCells(const YAML::Node& root) {
  if (!root["skuTypes"] && !root["cellTypes"] && !root["physicalCells"]) return;
  for (const char* key : {"cellTypes", "physicalCells"})
    if (!root[key])
      r_.Fail(root, "",
              std::string("missing field \"") + key +
                  "\": an explicit cell hierarchy needs both cellTypes and physicalCells");
  ParseCellTypes(root["cellTypes"]);
  if (const YAML::Node skus = root["skuTypes"]) ParseSkuTypes(skus);
  ExplicitCells cells;
  for (const CellTypeInfo& type : cell_types_) cells.cell_types.push_back(type.spec);
  const YAML::Node list = root["physicalCells"];
  r_.Sequence(list, "physicalCells");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node node = list[i];
    const std::string path = IndexPath("physicalCells", i);
    r_.CheckFields(node, path, {"cellType", "cellAddress", "cellChildren"});
    const YAML::Node type_node = r_.Required(node, path, "cellType");
    const std::string type_path = FieldPath(path, "cellType");
    const std::string type = r_.String(type_node, type_path);
    const auto it = cell_type_index_.find(type);
    if (it == cell_type_index_.end())
      r_.Fail(type_node, type_path,
              "unknown cell type " + Quoted(type) +
                  "; declared cell types: " + Join(Keys(cell_type_index_)));
    if (!cell_types_[it->second].has_node_level)
      r_.Fail(type_node, type_path,
              "the chain " + cell_types_[it->second].chain +
                  " has no node-level type; mark the type whose cells are nodes with "
                  "isNodeLevel: true");
    cells.physical_cells.push_back(ParseCell(node, path, type, type + "-" + std::to_string(i)));
  }
  cluster_.explicit_cells = std::move(cells);
}

void ClusterFileParser::ParseCellTypes(const YAML::Node& node) {
  for (const YamlEntry& entry : r_.Entries(node, "cellTypes")) {
    const std::string path = FieldPath("cellTypes", entry.key);
    r_.CheckFields(entry.value, path, {"childCellType", "childCellNumber", "isNodeLevel"});
    if (cluster_.FindModel(entry.key))
      r_.Fail(entry.key_node, path,
              Quoted(entry.key) +
                  " is a GPU model; a GPU model is a leaf cell type and needs no cellTypes entry");
    CellTypeInfo type;
    type.node = entry.key_node;
    type.spec.name = entry.key;
    type.spec.child_type = r_.String(r_.Required(entry.value, path, "childCellType"),
                                     FieldPath(path, "childCellType"));
    type.spec.child_count =
        static_cast<int>(r_.Int(r_.Required(entry.value, path, "childCellNumber"),
                                FieldPath(path, "childCellNumber"), 1, &Limits::gpus));
    if (const YAML::Node level = entry.value["isNodeLevel"])
      type.spec.is_node_level = r_.Bool(level, FieldPath(path, "isNodeLevel"));
    cell_type_index_[entry.key] = cell_types_.size();
    cell_types_.push_back(std::move(type));
  }
  // Walk each type's chain down to its GPU model: cycles, node levels, size.
  for (CellTypeInfo& type : cell_types_) {
    const std::string path = FieldPath("cellTypes", type.spec.name);
    std::vector<std::string> chain = {type.spec.name};
    std::vector<std::string> node_levels;
    int64_t leaves = 1;
    for (auto it = cell_type_index_.find(chain.back()); it != cell_type_index_.end();
         it = cell_type_index_.find(chain.back())) {
      const CellTypeSpec& spec = cell_types_[it->second].spec;
      if (spec.is_node_level) node_levels.push_back(spec.name);
      const auto loop = std::find(chain.begin(), chain.end(), spec.child_type);
      if (loop != chain.end()) {
        const CellTypeInfo& first = cell_types_[cell_type_index_.at(*loop)];
        r_.Fail(
            first.node, FieldPath("cellTypes", *loop),
            "cycle among cell types: " + Join(std::vector<std::string>(loop, chain.end()), " -> ") +
                " -> " + *loop + "; every chain must end at a GPU model");
      }
      leaves *= spec.child_count;  // both factors are at most the gpus bound: no overflow
      if (leaves > limits::Get().gpus)
        r_.Fail(type.node, path,
                "one cell holds " + limits::OverLimit(&Limits::gpus, "GPUs") +
                    "; check the childCellNumber values");
      chain.push_back(spec.child_type);
      // Checked per step, so that walking every type's chain stays cheap.
      if (chain.size() > static_cast<size_t>(limits::Get().cell_levels))
        r_.Fail(type.node, path,
                "the chain " + Join(chain, " -> ") + "... has " +
                    limits::OverLimit(&Limits::cell_levels, "levels"));
    }
    type.chain = Join(chain, " -> ");
    if (node_levels.size() > 1)
      r_.Fail(type.node, path,
              "the chain " + type.chain + " has " + std::to_string(node_levels.size()) +
                  " node-level types (" + Join(node_levels) +
                  "); mark exactly one type of a chain isNodeLevel: true");
    if (type.spec.is_node_level && leaves > limits::Get().gpus_per_node)
      r_.Fail(type.node, path,
              "a node-level cell of " + limits::OverLimit(&Limits::gpus_per_node, "GPUs a node"));
    type.leaf = chain.back();
    type.leaf_count = static_cast<int>(leaves);
    type.has_node_level = !node_levels.empty();
    type.above_node_level = type.has_node_level && !type.spec.is_node_level;
    if (!cluster_.FindModel(type.leaf)) cluster_.models.push_back({type.leaf, 0, {}});
  }
}

void ClusterFileParser::ParseSkuTypes(const YAML::Node& node) {
  std::set<std::string> leaves;
  for (const CellTypeInfo& type : cell_types_) leaves.insert(type.leaf);
  for (const YamlEntry& entry : r_.Entries(node, "skuTypes")) {
    const std::string path = FieldPath("skuTypes", entry.key);
    if (!leaves.count(entry.key))
      r_.Fail(entry.key_node, path,
              "not a leaf cell type; skuTypes describe the GPU models that cellTypes chains end "
              "at (" +
                  Join(std::vector<std::string>(leaves.begin(), leaves.end())) + ")");
    r_.CheckFields(entry.value, path, {"gpu", "cpu", "memory"});
    if (const YAML::Node gpu = entry.value["gpu"]) {
      if (r_.Int(gpu, FieldPath(path, "gpu"), 0) != 1)
        r_.Fail(gpu, FieldPath(path, "gpu"),
                "a leaf cell is one GPU in berth; use gpu: 1 and give cpu and memory per GPU");
    }
    Sku sku;
    if (const YAML::Node cpu = entry.value["cpu"]) {
      const double cpus = r_.NonNegativeNumber(cpu, FieldPath(path, "cpu"));
      // Compared before rounding: llround of a number past int64 is undefined.
      if (cpus * 1000 > static_cast<double>(limits::Get().node_cpu_milli))
        r_.Fail(cpu, FieldPath(path, "cpu"),
                "CPUs per GPU " + limits::OverLimit(&Limits::node_cpu_milli,
                                                    limits::Get().node_cpu_milli / 1000, "CPUs"));
      sku.cpu_milli = std::llround(1000 * cpus);
    }
    if (const YAML::Node memory = entry.value["memory"]) {
      const std::string memory_path = FieldPath(path, "memory");
      sku.memory_mib = ParseMiB(r_.String(memory, memory_path));
      if (sku.memory_mib < 0 || sku.memory_mib > limits::Get().node_memory_mib)
        r_.Fail(memory, memory_path,
                "expected a memory size such as 54Gi, 512Mi or a plain number of MiB, at most " +
                    std::to_string(limits::Get().node_memory_mib) + " MiB" +
                    limits::RaiseHint(&Limits::node_memory_mib) + ", got " +
                    Quoted(memory.Scalar()));
    }
    skus_[entry.key] = sku;
  }
}

PhysicalCellSpec ClusterFileParser::ParseCell(const YAML::Node& node, const std::string& path,
                                              const std::string& type,
                                              const std::string& default_address) {
  PhysicalCellSpec cell;
  cell.cell_type = type;
  const YAML::Node address = node["cellAddress"];
  cell.address = address ? r_.Name(address, FieldPath(path, "cellAddress")) : default_address;
  const YAML::Node children = node["cellChildren"];
  BuildCell(&cell, children ? &children : nullptr, node, path);
  return cell;
}

// Binds a node-level cell to its node and fills the children: parsed from `children` when
// listed; else, above node level, generated as "<address>-<i>" so that the list reaches down
// to the nodes. `at` and `path` locate errors of generated cells at their nearest listed one.
void ClusterFileParser::BuildCell(PhysicalCellSpec* cell, const YAML::Node* children,
                                  const YAML::Node& at, const std::string& path) {
  const auto it = cell_type_index_.find(cell->cell_type);
  if (it == cell_type_index_.end()) {
    if (children)
      r_.Fail(*children, FieldPath(path, "cellChildren"),
              "a " + cell->cell_type + " cell is one GPU and has no children");
    return;
  }
  const CellTypeInfo& type = cell_types_[it->second];
  if (type.spec.is_node_level) BindNode(cell->address, type, at, path);
  const int count = type.spec.child_count;
  if (children) {
    const std::string children_path = FieldPath(path, "cellChildren");
    r_.Sequence(*children, children_path);
    if (children->size() != static_cast<size_t>(count))
      r_.Fail(*children, children_path,
              "expected " + std::to_string(count) + " children (childCellNumber of " +
                  type.spec.name + "), got " + std::to_string(children->size()));
    for (int k = 0; k < count; ++k) {
      const YAML::Node child = (*children)[k];
      const std::string child_path = IndexPath(children_path, k);
      r_.CheckFields(child, child_path, {"cellAddress", "cellChildren"});
      cell->children.push_back(ParseCell(child, child_path, type.spec.child_type,
                                         cell->address + "-" + std::to_string(k)));
    }
  } else if (type.above_node_level) {
    for (int k = 0; k < count; ++k) {
      PhysicalCellSpec child;
      child.cell_type = type.spec.child_type;
      child.address = cell->address + "-" + std::to_string(k);
      BuildCell(&child, nullptr, at, path);
      cell->children.push_back(std::move(child));
    }
  }
}

// A node-level cell's address names its node: a declared node (which must hold exactly the
// cell's GPUs) or, when none has that name, a flat node created from the cell and skuTypes.
void ClusterFileParser::BindNode(const std::string& name, const CellTypeInfo& type,
                                 const YAML::Node& at, const std::string& path) {
  const auto [bound, fresh] = bound_nodes_.emplace(name, path);
  if (!fresh)
    r_.Fail(at, path,
            "node " + Quoted(name) + " is already the cell at " + bound->second +
                "; each node is one node-level cell");
  const auto origin = node_origins_.find(name);
  if (origin == node_origins_.end()) {
    const Sku sku = skus_.count(type.leaf) ? skus_.at(type.leaf) : Sku{};
    int64_t cpu_milli = 0, memory_mib = 0;
    if (__builtin_mul_overflow(sku.cpu_milli, type.leaf_count, &cpu_milli) ||
        __builtin_mul_overflow(sku.memory_mib, type.leaf_count, &memory_mib))
      r_.Fail(at, path,
              "skuTypes." + type.leaf + " times the " + std::to_string(type.leaf_count) +
                  " GPUs of a " + type.spec.name + " cell overflows; lower cpu or memory");
    AddNodes(
        MakeFlatNode(name, cpu_milli, memory_mib, type.leaf_count, type.leaf), 1,
        [&](int64_t) { return name; }, at, path);
    return;
  }
  const Node& node = cluster_.nodes[origin->second.index];
  const std::string holds = "a " + type.spec.name + " cell holds " +
                            std::to_string(type.leaf_count) + " " + type.leaf + " GPUs";
  if (node.gpus.size() != static_cast<size_t>(type.leaf_count))
    r_.Fail(
        at, path,
        "node " + Quoted(name) + " has " + std::to_string(node.gpus.size()) + " GPUs but " + holds);
  for (size_t g = 0; g < node.gpus.size(); ++g)
    if (node.gpus[g].model != type.leaf)
      r_.Fail(at, path,
              "node " + Quoted(name) + " GPU " + std::to_string(g) + " is a " + node.gpus[g].model +
                  " but " + holds);
}

void ClusterFileParser::AddNodes(Node node, int64_t count,
                                 const std::function<std::string(int64_t)>& name_of,
                                 const YAML::Node& at, const std::string& path) {
  const std::string too_big = size_.Add(node, count);
  if (!too_big.empty()) r_.Fail(at, path, "the cluster would have " + too_big);
  for (int64_t k = 0; k < count; ++k) {
    node.name = name_of(k);
    const auto [first, fresh] = node_origins_.emplace(
        node.name, NodeOrigin{cluster_.nodes.size(), r_.Where(at) + ": " + path});
    if (!fresh)
      r_.Fail(at, path,
              "node " + Quoted(node.name) + " is already declared at " + first->second.where +
                  "; node names must be unique");
    cluster_.nodes.push_back(node);
  }
}

}  // namespace

Cluster LoadClusterFile(const std::string& path) {
  return ParseClusterYaml(ReadFileText(path), path);
}

Cluster ParseClusterYaml(const std::string& text, const std::string& source_name) {
  return ClusterFileParser(source_name).Parse(text);
}

}  // namespace berth
