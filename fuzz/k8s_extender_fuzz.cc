// kube-scheduler's extender (src/k8s/extender.h) over what the API server and kube-scheduler
// send it, step by step. The input is a list of sections (InputSections), each one step:
//
//   == nodes          a JSON list of Node objects, as after a list (SetNodes)
//   == node           one Node, a watch event (NodeChanged)
//   == node-deleted   a node's name (NodeDeleted)
//   == pod            one Pod, or a JSON list of them (PodChanged)
//   == pod-deleted    one Pod (PodDeleted)
//   == podgroup       one PodGroup (PodGroupChanged)
//   == resync         (Resync: adopts bound pods)
//   == filter, == prioritize, == preempt, == bind   a verb's request body
//   == api            "fail" or "ok": how the API server answers bindings and deletions
//
// Any JSON may be refused, but only as the server refuses it: Filter and Bind never throw,
// Prioritize and Preempt throw std::invalid_argument. After every step the extender's books must
// agree with its engine (CheckConsistency), and the filter's answer must be JSON that passes
// only nodes of its request. Seeds: fuzz/seeds/k8s_extender/.
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "core/policy.h"
#include "fuzz_input.h"
#include "k8s/extender.h"
#include "k8s/json_fields.h"

namespace {

using nlohmann::json;

class FuzzApi : public berth::KubeActions {
 public:
  std::string Bind(const std::string&, const std::string&, const std::string&,
                   const std::map<std::string, std::string>&) override {
    return failing ? "the API server is down" : "";
  }
  std::string DeletePod(const std::string&, const std::string&, double) override {
    return failing ? "the API server is down" : "";
  }
  bool failing = false;
};

// object[key] with the key matched case-insensitively, as kube-scheduler's args are read.
const json* Key(const json& object, const std::string& key) {
  if (!object.is_object()) return nullptr;
  for (const auto& [name, value] : object.items())
    if (name.size() == key.size() &&
        std::equal(name.begin(), name.end(), key.begin(),
                   [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
      return &value;
  return nullptr;
}

// The node names a request or an answer carries: NodeNames, or Nodes.items[].metadata.name.
std::set<std::string> NodeNames(const json& message) {
  std::set<std::string> names;
  if (const json* list = Key(message, "NodeNames"); list != nullptr && list->is_array())
    for (const json& name : *list)
      if (name.is_string()) names.insert(name.get<std::string>());
  const json* nodes = Key(message, "Nodes");
  const json* items = nodes == nullptr ? nullptr : Key(*nodes, "items");
  if (items != nullptr && items->is_array())
    for (const json& node : *items)
      if (const json* meta = Key(node, "metadata"); meta != nullptr)
        if (const json* name = Key(*meta, "name"); name != nullptr && name->is_string())
          names.insert(name->get<std::string>());
  return names;
}

void CheckFilter(const json& request, const std::string& answer_text) {
  const json answer = json::parse(answer_text, nullptr, false);
  if (answer.is_discarded()) berth::Finding("the filter's answer is not JSON: " + answer_text);
  const std::set<std::string> asked = NodeNames(request);
  for (const std::string& name : NodeNames(answer))
    if (!asked.contains(name))
      berth::Finding("the filter passed node " + name + ", which was not in its request");
}

void Step(berth::Extender& extender, FuzzApi& api, const std::string& step,
          const std::string& text) {
  if (step == "resync") extender.Resync();
  if (step == "api") api.failing = text.starts_with("fail");
  if (step == "node-deleted") extender.NodeDeleted(text);
  // The rest carry JSON, refused as the server refuses it: not JSON, or nested too deep.
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !berth::JsonDepthAtMost(body, berth::kMaxKubeObjectDepth)) return;
  if (step == "nodes")
    extender.SetNodes(body.is_array() ? body.get<std::vector<json>>() : std::vector<json>{body});
  if (step == "node") extender.NodeChanged(body);
  if (step == "pod") {
    if (!body.is_array()) extender.PodChanged(body);
    for (const json& pod : body.is_array() ? body : json::array()) extender.PodChanged(pod);
  }
  if (step == "pod-deleted") extender.PodDeleted(body);
  if (step == "podgroup") extender.PodGroupChanged(body);
  if (step == "filter") CheckFilter(body, extender.Filter(body));
  if (step == "bind") extender.Bind(body).dump(-1, ' ', false, json::error_handler_t::replace);
  try {
    if (step == "prioritize") static_cast<void>(json::parse(extender.Prioritize(body)));
    if (step == "preempt")
      extender.Preempt(body).dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::invalid_argument&) {
    // A malformed request, answered 400 with the reason.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const berth::Policy policy = [] {
    berth::Policy p;
    if (!berth::BuiltinPolicy("berth", &p)) berth::Finding("no built-in policy \"berth\"");
    return p;
  }();
  FuzzApi api;
  double now = 1e9;
  berth::ExtenderOptions options;
  options.policy = policy;
  options.queues = {{"default", 1, -1, {}}, {"research", 2, -1, {}}};
  options.clock = [&now] { return now; };
  berth::Extender extender(std::move(options), &api);
  for (const auto& [step, text] : berth::InputSections(data, size)) {
    now += 1;
    Step(extender, api, step, text);
    if (const std::string broken = extender.CheckConsistency(); !broken.empty())
      berth::Finding("after step \"" + step + "\": " + broken);
  }
  return 0;
}
