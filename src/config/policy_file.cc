#include "config/policy_file.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "config/config_error.h"
#include "config/file_text.h"
#include "config/yaml_reader.h"

namespace berth {
namespace {

constexpr int kMostCandidates = 1'000'000;    // nodes scored per replica (0: every node)
constexpr int kMostPriority = 1'000'000'000;  // as a berth trace's job priority
constexpr int64_t kMostSeed = 1'000'000'000'000'000'000;  // a stated range messages can name

// The top-level fields, sorted (for "known fields: ..." messages).
const std::vector<std::string> kFields = {"agingCap",
                                          "agingPerHour",
                                          "base",
                                          "candidates",
                                          "filters",
                                          "maxBackoffSeconds",
                                          "maxReservations",
                                          "name",
                                          "priorityClasses",
                                          "qosWeights",
                                          "reclaimHysteresis",
                                          "reserveAfterSeconds",
                                          "retryBackoffSeconds",
                                          "scores",
                                          "seed",
                                          "tieBreak"};

// A validation message whose field was never written in the file may still be caused by one
// that was: maxBackoffSeconds inherited from the base is too small for the file's
// retryBackoffSeconds.
const std::map<std::string, std::string> kRelatedField = {
    {"maxBackoffSeconds", "retryBackoffSeconds"}};

struct Problem {
  // 1-based line and column; INT_MAX when the file has no place for it (sorts last).
  std::pair<int, int> at;
  std::string text;
};

// The ValidatePolicy field a message is about: its text up to the first ": ".
std::string MessageField(const std::string& message) {
  const size_t colon = message.find(": ");
  return colon == std::string::npos ? "" : message.substr(0, colon);
}

// True when `path` is `prefix` or a field inside it ("scores[2].weight" inside "scores[2]").
bool Within(const std::string& path, const std::string& prefix) {
  if (path.rfind(prefix, 0) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

class PolicyParser {
 public:
  explicit PolicyParser(const std::string& source) : r_(source) {}

  Policy Parse(const std::string& text) {
    const YAML::Node root = r_.Parse(text);
    if (!root.IsMap())
      r_.Fail(root, "",
              "expected a map with fields " + Join(kFields) + ", got " +
                  (root.IsSequence() ? "a list"
                   : root.IsScalar() ? "\"" + root.Scalar() + "\""
                                     : std::string("nothing")));
    const std::vector<YamlEntry> entries = r_.Entries(root, "");

    // The base first: every other field overrides it.
    Policy policy;
    BuiltinPolicy("berth", &policy);
    if (const YAML::Node base = root["base"]) {
      Try("base", [&] {
        const std::string name = r_.String(base, "base");
        Note("base", base);
        if (!BuiltinPolicy(name, &policy))
          r_.Fail(base, "base",
                  "unknown built-in policy \"" + name +
                      "\"; built-in policies: " + Join(BuiltinPolicyNames()));
      });
    }
    Try("name", [&] {
      const YAML::Node name = r_.Required(root, "", "name");
      policy.name = r_.Name(name, "name");
      Note("name", name);
    });

    for (const YamlEntry& e : entries) {
      const std::string& key = e.key;
      const YAML::Node& v = e.value;
      if (key == "name" || key == "base") continue;
      if (std::find(kFields.begin(), kFields.end(), key) == kFields.end()) {
        Try(key, [&] {
          r_.Fail(e.key_node, "", "unknown field \"" + key + "\"; known fields: " + Join(kFields));
        });
        continue;
      }
      Note(key, v);
      if (key == "filters") {
        ParsePlugins(v, key, false, &policy.filters);
      } else if (key == "scores") {
        ParsePlugins(v, key, true, &policy.scores);
      } else if (key == "priorityClasses") {
        ParsePriorityClasses(v, &policy.priority_classes);
      } else if (key == "qosWeights") {
        ParseQosWeights(v, &policy.qos_weights);
      } else if (key == "candidates") {
        Try(key, [&] { policy.candidates = IntIn(v, key, 0, kMostCandidates); });
      } else if (key == "maxReservations") {
        Try(key, [&] { policy.max_reservations = IntIn(v, key, 0, 1000); });
      } else if (key == "seed") {
        Try(key, [&] { policy.seed = static_cast<uint64_t>(r_.Int(v, key, 0, kMostSeed)); });
      } else if (key == "tieBreak") {
        Try(key, [&] {
          const std::string value = r_.String(v, key);
          if (value == "random")
            policy.tie_break = TieBreak::kRandom;
          else if (value == "first")
            policy.tie_break = TieBreak::kFirst;
          else
            r_.Fail(v, key, "unknown value \"" + value + "\"; known values: first, random");
        });
      } else {
        double* knob = key == "agingPerHour"          ? &policy.aging_per_hour
                       : key == "agingCap"            ? &policy.aging_cap
                       : key == "reclaimHysteresis"   ? &policy.reclaim_hysteresis
                       : key == "retryBackoffSeconds" ? &policy.retry_backoff_s
                       : key == "reserveAfterSeconds" ? &policy.reserve_after_s
                                                      : &policy.max_backoff_s;
        Try(key, [&] { *knob = r_.Number(v, key); });
      }
    }

    for (const std::string& message : ValidatePolicy(policy)) AddValidationProblem(message);
    if (problems_.empty()) return policy;
    std::stable_sort(problems_.begin(), problems_.end(),
                     [](const Problem& a, const Problem& b) { return a.at < b.at; });
    // Every problem at once saves round trips, but a file of thousands is one mistake repeated.
    constexpr size_t kShown = 20;
    std::string all;
    for (size_t i = 0; i < problems_.size() && i < kShown; ++i)
      all += (all.empty() ? "" : "\n") + problems_[i].text;
    if (problems_.size() > kShown)
      all += "\n... and " + std::to_string(problems_.size() - kShown) + " more problems";
    throw ConfigError(all);
  }

 private:
  // Runs `parse`; a ConfigError it throws is kept as a problem and `path` is marked failed, so
  // that ValidatePolicy's complaints about what the failed field left behind are not reported.
  template <typename Parse>
  bool Try(const std::string& path, Parse&& parse) {
    try {
      parse();
      return true;
    } catch (const ConfigError& e) {
      problems_.push_back({PlaceIn(e.what()), e.what()});
      failed_.push_back(path);
      return false;
    }
  }

  // The line and column of a message of this source ("SOURCE:LINE:COLUMN: ..."), INT_MAX
  // when it has none.
  std::pair<int, int> PlaceIn(const std::string& message) const {
    constexpr std::pair<int, int> kNowhere{INT_MAX, INT_MAX};
    const std::string prefix = r_.source() + ":";
    if (message.rfind(prefix, 0) != 0) return kNowhere;
    const char* digits = message.c_str() + prefix.size();
    char* end = nullptr;
    const long line = std::strtol(digits, &end, 10);
    if (end == digits || *end != ':' || line <= 0 || line > INT_MAX) return kNowhere;
    digits = end + 1;
    const long column = std::strtol(digits, &end, 10);
    if (end == digits || *end != ':' || column <= 0 || column > INT_MAX)
      return {static_cast<int>(line), INT_MAX};
    return {static_cast<int>(line), static_cast<int>(column)};
  }

  // An integer in the range the field takes, stated in the message when it is not.
  int IntIn(const YAML::Node& node, const std::string& path, int min, int max) const {
    return static_cast<int>(r_.Int(node, path, min, max));
  }

  // Remembers where the node that holds ValidatePolicy's field `path` is.
  void Note(const std::string& path, const YAML::Node& node) {
    if (node.IsDefined() && !node.Mark().is_null()) marks_[path] = node;
  }

  // "filters: [a, {name: b, params: {x: 1}}]" into `out`, entry by entry. An entry that cannot
  // be read keeps its place as a nameless placeholder, so that ValidatePolicy's indices are the
  // file's.
  void ParsePlugins(const YAML::Node& node, const std::string& path, bool scores,
                    std::vector<PluginConfig>* out) {
    if (!Try(path, [&] { r_.Sequence(node, path); })) return;
    std::vector<PluginConfig> plugins;
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item = IndexPath(path, i);
      PluginConfig config;
      Try(item, [&] { config = ParsePlugin(node[i], item, scores); });
      plugins.push_back(std::move(config));
    }
    *out = std::move(plugins);
  }

  PluginConfig ParsePlugin(const YAML::Node& node, const std::string& path, bool scores) {
    PluginConfig config;
    Note(path, node);
    if (node.IsScalar()) {  // the short form: the name alone
      config.name = node.Scalar();
      return config;
    }
    if (!node.IsMap())
      r_.Fail(node, path,
              std::string("expected a plugin name or a map with fields name, ") +
                  (scores ? "weight, " : "") + "params");
    if (scores)
      r_.CheckFields(node, path, {"name", "weight", "params"});
    else
      r_.CheckFields(node, path, {"name", "params"});
    const YAML::Node name = r_.Required(node, path, "name");
    config.name = r_.String(name, FieldPath(path, "name"));
    Note(FieldPath(path, "name"), name);
    if (const YAML::Node weight = node["weight"]) {
      config.weight = r_.Number(weight, FieldPath(path, "weight"));
      Note(FieldPath(path, "weight"), weight);
    }
    if (const YAML::Node params = node["params"]) {
      const std::string params_path = FieldPath(path, "params");
      Note(params_path, params);
      for (const YamlEntry& p : r_.Entries(params, params_path)) {
        const std::string param_path = FieldPath(params_path, p.key);
        config.params[p.key] = r_.Number(p.value, param_path);
        Note(param_path, p.key_node);
      }
    }
    return config;
  }

  void ParsePriorityClasses(const YAML::Node& node, std::map<std::string, int>* out) {
    const std::string path = "priorityClasses";
    std::vector<YamlEntry> entries;
    if (!Try(path, [&] { entries = r_.Entries(node, path); })) return;
    std::map<std::string, int> classes;
    for (const YamlEntry& e : entries) {
      const std::string entry_path = FieldPath(path, e.key);
      Try(entry_path, [&] {
        classes[e.key] = IntIn(e.value, entry_path, -kMostPriority, kMostPriority);
        Note(entry_path, e.key_node);
      });
    }
    *out = std::move(classes);
  }

  void ParseQosWeights(const YAML::Node& node, std::map<QosClass, QosWeights>* out) {
    const std::string path = "qosWeights";
    std::vector<YamlEntry> entries;
    if (!Try(path, [&] { entries = r_.Entries(node, path); })) return;
    std::map<QosClass, QosWeights> table;
    for (const YamlEntry& e : entries) {
      Try(FieldPath(path, e.key), [&] {
        QosClass qos;
        if (!ParseQos(e.key, &qos))
          r_.Fail(e.key_node, path,
                  "unknown QoS class \"" + e.key +
                      "\"; known classes: guaranteed, burstable, best-effort");
        // ValidatePolicy names the class as QosName does ("besteffort" is "best-effort").
        const std::string class_path = FieldPath(path, QosName(qos));
        if (table.count(qos))
          r_.Fail(e.key_node, path,
                  "QoS class \"" + std::string(QosName(qos)) + "\" is given twice; give it once");
        r_.CheckFields(e.value, class_path, {"cpu", "memory", "gpu"});
        QosWeights w;
        for (const YamlEntry& res : r_.Entries(e.value, class_path)) {
          const std::string resource_path = FieldPath(class_path, res.key);
          (res.key == "cpu"      ? w.cpu
           : res.key == "memory" ? w.memory
                                 : w.gpu) = r_.Number(res.value, resource_path);
          Note(resource_path, res.value);
        }
        Note(class_path, e.key_node);
        table[qos] = w;
      });
    }
    *out = std::move(table);
  }

  // One ValidatePolicy message, at the line of the entry it names where the file has one.
  void AddValidationProblem(const std::string& message) {
    const std::string field = MessageField(message);
    for (const std::string& failed : failed_)
      if (Within(field, failed)) return;  // already reported as unreadable
    if (auto it = kRelatedField.find(field); it != kRelatedField.end())
      for (const std::string& failed : failed_)
        if (Within(it->second, failed)) return;

    const YAML::Node* at = nullptr;
    // A plugin's bad parameter: the place of that parameter.
    const size_t quote = message.find("parameter \"");
    if (quote != std::string::npos) {
      const size_t start = quote + 11, end = message.find('"', start);
      if (end != std::string::npos) {
        auto it = marks_.find(field + ".params." + message.substr(start, end - start));
        if (it != marks_.end()) at = &it->second;
      }
    }
    // Else the field itself, or the closest entry holding it ("scores[2].weight" -> "scores[2]").
    for (std::string path = field; at == nullptr && !path.empty();) {
      if (auto it = marks_.find(path); it != marks_.end()) {
        at = &it->second;
        break;
      }
      const size_t cut = path.find_last_of(".[");
      path = cut == std::string::npos ? "" : path.substr(0, cut);
    }
    if (at == nullptr)
      if (auto it = kRelatedField.find(field); it != kRelatedField.end())
        if (auto m = marks_.find(it->second); m != marks_.end()) at = &m->second;
    const std::string where = at == nullptr ? r_.source() : r_.Where(*at);
    problems_.push_back({PlaceIn(where + ": "), where + ": " + message});
  }

  YamlReader r_;
  std::map<std::string, YAML::Node> marks_;  // ValidatePolicy field -> its node in the file
  std::vector<std::string> failed_;          // fields that could not be read
  std::vector<Problem> problems_;
};

}  // namespace

Policy LoadPolicyFile(const std::string& path) { return ParsePolicyYaml(ReadFileText(path), path); }

Policy ParsePolicyYaml(const std::string& text, const std::string& source_name) {
  return PolicyParser(source_name).Parse(text);
}

}  // namespace berth
