#include "config/policy_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_test_util.h"

namespace berth {
namespace {

// Expects ParsePolicyYaml(text, "policy.yaml") to fail at the line of `marker`.
::testing::AssertionResult FailsAt(const std::string& text, const std::string& marker,
                                   std::initializer_list<std::string> parts) {
  return ThrowsConfigErrorAtLine([&] { ParsePolicyYaml(text, "policy.yaml"); }, "policy.yaml",
                                 LineOf(text, marker), parts);
}

// The lines of the ConfigError `text` throws, or a failure.
std::vector<std::string> ErrorLines(const std::string& text) {
  try {
    ParsePolicyYaml(text, "policy.yaml");
  } catch (const ConfigError& e) {
    std::vector<std::string> lines;
    std::string message = e.what();
    for (size_t start = 0; start <= message.size();) {
      const size_t end = std::min(message.find('\n', start), message.size());
      lines.push_back(message.substr(start, end - start));
      start = end + 1;
    }
    return lines;
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return {};
}

std::string At(const std::string& text, const std::string& marker) {
  return "policy.yaml:" + std::to_string(LineOf(text, marker)) + ":";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PolicyFileTest, ExampleLoadsAndValidates) {
  const Policy p = LoadPolicyFile(std::string(BERTH_SOURCE_DIR) + "/examples/policy.yaml");
  EXPECT_TRUE(ValidatePolicy(p).empty());
  EXPECT_EQ(p.name, "training-first");
  ASSERT_EQ(p.filters.size(), 6u);
  EXPECT_EQ(p.filters[0].name, "node-health");
  EXPECT_EQ(p.filters[5].name, "gpu-memory-threshold");
  EXPECT_DOUBLE_EQ(p.filters[5].params.at("ratio"), 0.85);
  ASSERT_EQ(p.scores.size(), 6u);
  EXPECT_EQ(p.scores[0].name, "topology-affinity");
  EXPECT_DOUBLE_EQ(p.scores[0].weight, 5);
  EXPECT_DOUBLE_EQ(p.scores[0].params.at("other_rack"), 70);
  EXPECT_EQ(p.scores[2].name, "binpack");
  EXPECT_DOUBLE_EQ(p.scores[2].params.at("gpu"), 3);
  EXPECT_EQ(p.scores[5].name, "load");
  EXPECT_DOUBLE_EQ(p.scores[5].weight, 2);
  EXPECT_EQ(p.priority_classes.at("prod"), 1000);
  EXPECT_EQ(p.priority_classes.at("opportunistic"), -1);
  EXPECT_DOUBLE_EQ(p.qos_weights.at(QosClass::kGuaranteed).gpu, 3);
  EXPECT_DOUBLE_EQ(p.qos_weights.at(QosClass::kBestEffort).gpu, 0.5);
  EXPECT_EQ(p.candidates, 64);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.tie_break, TieBreak::kRandom);
  EXPECT_DOUBLE_EQ(p.reclaim_hysteresis, 0.05);
  EXPECT_DOUBLE_EQ(p.max_backoff_s, 300);
}

TEST(PolicyFileTest, TheBriefsExampleLoads) {
  const Policy p = ParsePolicyYaml(
      "name: my-policy\n"
      "base: berth\n"
      "filters: [node-health, gpu-model, resources-fit, {name: gpu-memory-threshold, params: "
      "{ratio: 0.85}}]\n"
      "scores:\n"
      "  - {name: topology-affinity, weight: 5}\n"
      "  - {name: fgd, weight: 3}\n"
      "  - {name: binpack, weight: 1, params: {gpu: 3, cpu: 1, memory: 1}}\n"
      "priorityClasses: {prod: 1000, default: 100, opportunistic: -1}\n"
      "qosWeights:\n"
      "  guaranteed: {cpu: 1, memory: 1, gpu: 3}\n"
      "  burstable: {cpu: 1, memory: 1, gpu: 1}\n"
      "  best-effort: {cpu: 1, memory: 1, gpu: 0.5}\n"
      "candidates: 64\n"
      "seed: 7\n"
      "agingPerHour: 10\n"
      "agingCap: 100\n"
      "reclaimHysteresis: 0.05\n"
      "retryBackoffSeconds: 10\n"
      "maxBackoffSeconds: 300\n",
      "policy.yaml");
  EXPECT_EQ(p.name, "my-policy");
  EXPECT_EQ(p.filters.size(), 4u);
  ASSERT_EQ(p.scores.size(), 3u);
  EXPECT_EQ(p.scores[1].name, "fgd");
  EXPECT_DOUBLE_EQ(p.scores[1].weight, 3);
  EXPECT_EQ(p.seed, 7u);
}

TEST(PolicyFileTest, BaseIsInheritedFieldByField) {
  Policy fgd;
  ASSERT_TRUE(BuiltinPolicy("fgd", &fgd));
  const Policy p = ParsePolicyYaml("name: fgd-tuned\nbase: fgd\nseed: 9\n", "policy.yaml");
  EXPECT_EQ(p.name, "fgd-tuned");  // the file's name, not the base's
  EXPECT_EQ(p.seed, 9u);
  ASSERT_EQ(p.scores.size(), 1u);  // everything else is fgd's
  EXPECT_EQ(p.scores[0].name, "fgd");
  EXPECT_EQ(p.filters.size(), fgd.filters.size());
  EXPECT_EQ(p.candidates, fgd.candidates);
  EXPECT_EQ(p.priority_classes, fgd.priority_classes);

  // A field given replaces the base's whole (lists and tables are not merged).
  const Policy q = ParsePolicyYaml(
      "name: q\nbase: berth\nscores: [spread]\npriorityClasses: {high: 5}\n"
      "qosWeights: {guaranteed: {gpu: 2}}\n",
      "policy.yaml");
  ASSERT_EQ(q.scores.size(), 1u);
  EXPECT_EQ(q.scores[0].name, "spread");
  EXPECT_DOUBLE_EQ(q.scores[0].weight, 1);
  EXPECT_EQ(q.priority_classes, (std::map<std::string, int>{{"high", 5}}));
  ASSERT_EQ(q.qos_weights.size(), 1u);
  EXPECT_DOUBLE_EQ(q.qos_weights.at(QosClass::kGuaranteed).gpu, 2);
  EXPECT_DOUBLE_EQ(q.qos_weights.at(QosClass::kGuaranteed).cpu, 1);  // QosWeights' default
}

TEST(PolicyFileTest, TieBreak) {
  EXPECT_EQ(ParsePolicyYaml("name: p\ntieBreak: first\n", "policy.yaml").tie_break,
            TieBreak::kFirst);
  EXPECT_EQ(ParsePolicyYaml("name: p\nbase: fgd\ntieBreak: random\n", "policy.yaml").tie_break,
            TieBreak::kRandom);
  Policy fgd;
  ASSERT_TRUE(BuiltinPolicy("fgd", &fgd));
  EXPECT_EQ(ParsePolicyYaml("name: p\nbase: fgd\n", "policy.yaml").tie_break, fgd.tie_break);
  EXPECT_TRUE(FailsAt("name: p\ntieBreak: last\n", "last",
                      {"tieBreak", "unknown value \"last\"", "known values: first, random"}));
}

TEST(PolicyFileTest, WithoutBaseTheDefaultsAreBerths) {
  Policy berth;
  ASSERT_TRUE(BuiltinPolicy("berth", &berth));
  const Policy p = ParsePolicyYaml("name: mine\n", "policy.yaml");
  EXPECT_EQ(p.name, "mine");
  ASSERT_EQ(p.scores.size(), berth.scores.size());
  for (size_t i = 0; i < p.scores.size(); ++i) {
    EXPECT_EQ(p.scores[i].name, berth.scores[i].name);
    EXPECT_EQ(p.scores[i].weight, berth.scores[i].weight);
  }
  EXPECT_EQ(p.candidates, berth.candidates);
  EXPECT_EQ(p.tie_break, berth.tie_break);
  EXPECT_EQ(p.aging_cap, berth.aging_cap);
}

TEST(PolicyFileTest, ParseErrors) {
  EXPECT_TRUE(FailsAt("name: \"\\e[31mred\"\n", "name", {"name", "a control character"}));
  // Wrong type.
  const std::string type = "name: p\ncandidates: many\n";
  EXPECT_TRUE(FailsAt(type, "candidates", {"candidates", "expected an integer", "\"many\""}));
  const std::string weight = "name: p\nscores:\n  - {name: fgd, weight: heavy}\n";
  EXPECT_TRUE(FailsAt(weight, "heavy", {"scores[0].weight", "expected a number"}));
  const std::string list = "name: p\nfilters: node-health\n";
  EXPECT_TRUE(FailsAt(list, "filters", {"filters", "expected a list"}));
  // Unknown fields, top level and in entries.
  const std::string unknown = "name: p\nseeds: 4\n";
  EXPECT_TRUE(FailsAt(unknown, "seeds", {"unknown field \"seeds\"", "known fields: agingCap"}));
  const std::string filter_weight = "name: p\nfilters:\n  - {name: gpu-model, weight: 2}\n";
  EXPECT_TRUE(FailsAt(filter_weight, "{name: gpu-model",
                      {"filters[0]", "unknown field \"weight\"", "known fields: name, params"}));
  // QoS classes.
  const std::string qos = "name: p\nqosWeights:\n  gold: {gpu: 1}\n";
  EXPECT_TRUE(FailsAt(qos, "gold", {"qosWeights", "unknown QoS class \"gold\"", "best-effort"}));
  const std::string qos_field = "name: p\nqosWeights:\n  burstable: {gpus: 1}\n";
  EXPECT_TRUE(FailsAt(qos_field, "burstable", {"qosWeights.burstable", "unknown field \"gpus\""}));
  const std::string twice = "name: p\nqosWeights:\n  best-effort: {}\n  besteffort: {}\n";
  EXPECT_TRUE(FailsAt(twice, "besteffort", {"\"best-effort\" is given twice"}));
  // The base and the name.
  const std::string base = "name: p\nbase: kube\n";
  EXPECT_TRUE(FailsAt(base, "kube", {"base", "unknown built-in policy \"kube\"", "fgd"}));
  EXPECT_TRUE(FailsAt("seed: 1\n", "seed", {"missing required field \"name\""}));
  EXPECT_TRUE(ThrowsConfigError([] { ParsePolicyYaml("name: [p\n", "policy.yaml"); },
                                "policy.yaml:", {"YAML syntax error"}));
  EXPECT_TRUE(ThrowsConfigError([] { ParsePolicyYaml("", "policy.yaml"); },
                                "policy.yaml:1:1: ", {"no YAML document"}));
  EXPECT_TRUE(ThrowsConfigError([] { LoadPolicyFile("/nonexistent/p.yaml"); },
                                "/nonexistent/p.yaml: ", {"cannot read"}));
}

TEST(PolicyFileTest, ValidationErrorsPointAtTheirEntry) {
  const std::string plugin = "name: p\nscores:\n  - fgd\n  - {name: tetris, weight: 2}\n";
  EXPECT_TRUE(FailsAt(plugin, "tetris", {"scores[1]", "unknown score plugin", "known: "}));
  const std::string filter = "name: p\nfilters: [node-health, fgd]\n";
  EXPECT_TRUE(FailsAt(filter, "fgd", {"filters[1]", "unknown filter plugin"}));
  const std::string zero = "name: p\nscores:\n  - fgd\n  - name: binpack\n    weight: 0\n";
  EXPECT_TRUE(FailsAt(zero, "weight: 0", {"scores[1].weight", "must be > 0"}));
  const std::string negative = "name: p\nscores:\n  - {name: fgd, weight: -3}\n";
  EXPECT_TRUE(FailsAt(negative, "weight: -3", {"scores[0].weight", "must be > 0"}));
  const std::string dup = "name: p\nscores:\n  - fgd\n  - load\n  - fgd\n";
  EXPECT_TRUE(ThrowsConfigError([&] { ParsePolicyYaml(dup, "policy.yaml"); }, "policy.yaml:5:5: ",
                                {"scores[2]", "plugin \"fgd\" is listed twice"}));
  const std::string param =
      "name: p\nscores:\n  - name: binpack\n    params:\n      gpu: 3\n      disk: 1\n";
  EXPECT_TRUE(FailsAt(param, "disk",
                      {"scores[0]", "unknown parameter \"disk\"", "known: gpu, cpu, memory"}));
  const std::string ratio =
      "name: p\nfilters:\n  - {name: gpu-memory-threshold, params: "
      "{ratio: 1.5}}\n";
  EXPECT_TRUE(FailsAt(ratio, "ratio", {"filters[0]", "\"ratio\" must be in (0, 1]"}));
  const std::string hysteresis = "name: p\nreclaimHysteresis: 1.5\n";
  EXPECT_TRUE(FailsAt(hysteresis, "reclaimHysteresis", {"reclaimHysteresis", "[0, 1)"}));
  const std::string candidates = "name: p\ncandidates: -1\n";
  EXPECT_TRUE(
      FailsAt(candidates, "candidates", {"candidates", "expected an integer from 0 to 1000000"}));
  EXPECT_TRUE(FailsAt("name: p\npriorityClasses: {prod: 99999999999}\n", "prod",
                      {"priorityClasses.prod", "from -1000000000 to 1000000000"}));
  EXPECT_TRUE(FailsAt("name: p\nseed: 99999999999999999999\n", "seed",
                      {"seed: expected an integer from 0 to 1000000000000000000"}));
  const std::string qos = "name: p\nqosWeights:\n  guaranteed: {cpu: 0, memory: 0, gpu: 0}\n";
  EXPECT_TRUE(FailsAt(qos, "guaranteed", {"qosWeights.guaranteed", "not all 0"}));
  const std::string name = "name: \"\"\n";
  EXPECT_TRUE(FailsAt(name, "name", {"name: expected a name, got nothing"}));
  // An inherited maxBackoffSeconds (300) below the file's retryBackoffSeconds: blamed on the
  // field the file does give.
  const std::string backoff = "name: p\nretryBackoffSeconds: 600\n";
  EXPECT_TRUE(FailsAt(backoff, "retryBackoffSeconds",
                      {"maxBackoffSeconds", "must be >= retryBackoffSeconds"}));
}

TEST(PolicyFileTest, EveryErrorIsListedInFileOrder) {
  const std::string text =
      "name: p\n"
      "filters:\n"
      "  - node-health\n"
      "  - {name: gpu-model, weight: 2}\n"  // parse error: filters have no weight
      "scores:\n"
      "  - {name: fgd, weight: 0}\n"  // weight 0
      "  - {name: tetris}\n"          // unknown plugin
      "  - {name: binpack, params: {disk: 1}}\n"
      "  - fgd\n"  // listed twice
      "qosWeights:\n"
      "  gold: {gpu: 1}\n"  // unknown QoS class
      "candidates: lots\n"  // wrong type
      "reclaimHysteresis: 1.5\n"
      "agingCap: -1\n"
      "colour: blue\n";  // unknown field
  const std::vector<std::string> lines = ErrorLines(text);
  ASSERT_EQ(lines.size(), 10u) << ::testing::PrintToString(lines);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"{name: gpu-model", "unknown field \"weight\""},
      {"{name: fgd, weight: 0}", "scores[0].weight: must be > 0"},
      {"tetris", "scores[1]: "},
      {"disk", "unknown parameter \"disk\""},
      {"  - fgd", "scores[3]: plugin \"fgd\" is listed twice"},
      {"gold", "unknown QoS class \"gold\""},
      {"lots", "candidates: expected an integer"},
      {"reclaimHysteresis", "reclaimHysteresis: must be in [0, 1)"},
      {"agingCap", "agingCap: must be from 0 to 1e9"},
      {"colour", "unknown field \"colour\""},
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(lines[i].rfind(At(text, expected[i].first), 0), 0u) << lines[i];
    EXPECT_TRUE(Contains(lines[i], expected[i].second)) << lines[i];
  }
}

// 300,000 bad entries printed 300,000 lines (54 MB): the first 20 say enough.
TEST(PolicyFileTest, ManyErrorsAreCutAfterTwenty) {
  std::string text = "name: p\nscores:\n";
  for (int i = 0; i < 30; ++i) text += "  - {name: tetris" + std::to_string(i) + "}\n";
  const std::vector<std::string> lines = ErrorLines(text);
  ASSERT_EQ(lines.size(), 21u) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Contains(lines[19], "tetris19")) << lines[19];
  EXPECT_EQ(lines[20], "... and 10 more problems");
}

TEST(PolicyFileTest, AnUnreadableEntryIsReportedOnce) {
  // The entry that cannot be read keeps its index (the next entry is still scores[1]) and is
  // not reported again by validation.
  const std::string text =
      "name: p\nscores:\n  - {name: fgd, weight: x}\n  - {name: load, weight: -1}\n";
  const std::vector<std::string> lines = ErrorLines(text);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_TRUE(Contains(lines[0], "policy.yaml:3:25: scores[0].weight: expected a number"));
  EXPECT_TRUE(Contains(lines[1], "policy.yaml:4:26: scores[1].weight: must be > 0"));
  // A knob that cannot be read does not also fail validation on its inherited value.
  const std::vector<std::string> backoff =
      ErrorLines("name: p\nretryBackoffSeconds: soon\nmaxBackoffSeconds: 1\n");
  ASSERT_EQ(backoff.size(), 1u) << ::testing::PrintToString(backoff);
  EXPECT_TRUE(Contains(backoff[0], "policy.yaml:2:22: retryBackoffSeconds: expected a number"));
}

TEST(PolicyFileTest, LoadsFromAFile) {
  const std::string path = WriteTempFile("policy_file_test.yaml", "name: f\nbase: bestfit\n");
  const Policy p = LoadPolicyFile(path);
  EXPECT_EQ(p.name, "f");
  ASSERT_EQ(p.scores.size(), 1u);
  EXPECT_EQ(p.scores[0].name, "bestfit");
  const std::string bad = WriteTempFile("policy_file_bad.yaml", "name: f\nagingCap: -5\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadPolicyFile(bad); }, bad + ":2:11: ", {"agingCap"}));
}

}  // namespace
}  // namespace berth
