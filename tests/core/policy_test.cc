#include "core/policy.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/plugins/plugin.h"

namespace berth {
namespace {

PluginConfig Plugin(const std::string& name, double weight = 1,
                    std::map<std::string, double> params = {}) {
  PluginConfig c;
  c.name = name;
  c.weight = weight;
  c.params = std::move(params);
  return c;
}

// A valid policy with every filter and six scores (fixed here, so that changes to the built-in
// policies do not move the fields the tests point at).
Policy Base() {
  Policy p;
  p.name = "base";
  for (const char* f : {"node-health", "gpu-model", "resources-fit", "node-selector",
                        "topology-spread", "gpu-memory-threshold"})
    p.filters.push_back(Plugin(f));
  p.scores = {Plugin("topology-affinity", 5), Plugin("fgd", 3),         Plugin("binpack"),
              Plugin("topology-spread"),      Plugin("image-locality"), Plugin("load")};
  p.candidates = 64;
  p.qos_weights = {{QosClass::kGuaranteed, {1, 1, 3}}, {QosClass::kBestEffort, {1, 1, 0.5}}};
  return p;
}

// The single error of `policy`, or a failure.
std::string OnlyError(const Policy& policy) {
  const std::vector<std::string> errors = ValidatePolicy(policy);
  EXPECT_EQ(errors.size(), 1u);
  std::string all;
  for (const std::string& e : errors) all += e + "\n";
  return errors.size() == 1 ? errors[0] : all;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(PolicyTest, TheBaseOfTheseTestsIsValid) {
  const std::vector<std::string> errors = ValidatePolicy(Base());
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(PolicyTest, EveryBuiltinPolicyValidates) {
  const std::vector<std::string> names = BuiltinPolicyNames();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "berth");
  for (const std::string& name : names) {
    Policy p;
    ASSERT_TRUE(BuiltinPolicy(name, &p)) << name;
    EXPECT_EQ(p.name, name);
    EXPECT_FALSE(p.filters.empty()) << name;
    EXPECT_FALSE(p.scores.empty()) << name;
    const std::vector<std::string> errors = ValidatePolicy(p);
    EXPECT_TRUE(errors.empty()) << name << ": " << errors.front();
  }
}

TEST(PolicyTest, OpenbPoliciesScoreWithTheirOwnPlugin) {
  for (const std::string& name : BuiltinPolicyNames()) {
    if (name == "berth") continue;
    Policy p;
    ASSERT_TRUE(BuiltinPolicy(name, &p));
    ASSERT_EQ(p.scores.size(), 1u) << name;
    EXPECT_EQ(p.scores[0].name, name);
  }
}

TEST(PolicyTest, UnknownBuiltinNameIsRefusedAndLeavesTheOutputAlone) {
  Policy p;
  p.name = "mine";
  EXPECT_FALSE(BuiltinPolicy("no-such-policy", &p));
  EXPECT_FALSE(BuiltinPolicy("", &p));
  EXPECT_EQ(p.name, "mine");
}

TEST(PolicyTest, UnknownPluginIsNamedWithTheKnownOnes) {
  Policy p = Base();
  p.filters.push_back(Plugin("no-such-filter"));
  const std::string e = OnlyError(p);
  EXPECT_TRUE(StartsWith(e, "filters[" + std::to_string(p.filters.size() - 1) + "]: ")) << e;
  EXPECT_NE(e.find("no-such-filter"), std::string::npos) << e;
  EXPECT_NE(e.find("node-health"), std::string::npos) << e;  // lists the known filters

  p = Base();
  p.scores[1].name = "no-such-score";
  const std::string s = OnlyError(p);
  EXPECT_TRUE(StartsWith(s, "scores[1]: ")) << s;
  EXPECT_NE(s.find("binpack"), std::string::npos) << s;
  // A score plugin is not a filter.
  p = Base();
  p.filters.push_back(Plugin("binpack"));
  EXPECT_TRUE(StartsWith(OnlyError(p), "filters[")) << OnlyError(p);
}

TEST(PolicyTest, ScoreWeightsMustBePositiveAndBounded) {
  // 1e308 made the weighted sums inf, and every node scored alike.
  for (double weight : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), 1e308, 1e6 + 1}) {
    Policy p = Base();
    p.scores[2].weight = weight;
    EXPECT_TRUE(StartsWith(OnlyError(p), "scores[2].weight: must be > 0 and at most 1e6"))
        << weight;
  }
  Policy top = Base();
  top.scores[2].weight = 1e6;
  EXPECT_TRUE(ValidatePolicy(top).empty());
  top.qos_weights[QosClass::kGuaranteed] = {1e7, 1, 1};
  EXPECT_TRUE(StartsWith(OnlyError(top), "qosWeights.guaranteed: weights must be from 0 to 1e6"))
      << OnlyError(top);
  // Filters carry no weight: theirs is ignored.
  Policy p = Base();
  p.filters[0].weight = 0;
  EXPECT_TRUE(ValidatePolicy(p).empty());
}

TEST(PolicyTest, DuplicatePluginIsNamed) {
  Policy p = Base();
  p.scores.push_back(Plugin("binpack", 2));
  const std::string e = OnlyError(p);
  EXPECT_TRUE(StartsWith(e, "scores[" + std::to_string(p.scores.size() - 1) + "]: ")) << e;
  EXPECT_NE(e.find("binpack"), std::string::npos) << e;
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
  // The same name as a filter and as a score is two plugins, not a duplicate.
  p = Base();
  ASSERT_EQ(p.filters[4].name, "topology-spread");
  ASSERT_EQ(p.scores[3].name, "topology-spread");
  EXPECT_TRUE(ValidatePolicy(p).empty());
}

TEST(PolicyTest, BadPluginParametersAreNamed) {
  Policy p = Base();
  p.filters.back() = Plugin("gpu-memory-threshold", 1, {{"ratio", 1.5}});
  std::string e = OnlyError(p);
  EXPECT_NE(e.find("ratio"), std::string::npos) << e;
  p.filters.back() = Plugin("gpu-memory-threshold", 1, {{"rate", 0.5}});
  e = OnlyError(p);
  EXPECT_NE(e.find("unknown parameter \"rate\""), std::string::npos) << e;
  p.filters.back() = Plugin("gpu-memory-threshold", 1, {{"ratio", 0.5}});
  EXPECT_TRUE(ValidatePolicy(p).empty());
}

TEST(PolicyTest, BadKnobsAreNamed) {
  struct Case {
    void (*change)(Policy*);
    const char* field;
  };
  const Case cases[] = {
      {[](Policy* p) { p->name = ""; }, "name: "},
      {[](Policy* p) { p->candidates = -1; }, "candidates: "},
      {[](Policy* p) { p->aging_per_hour = -1; }, "agingPerHour: "},
      {[](Policy* p) { p->aging_cap = -0.5; }, "agingCap: "},
      {[](Policy* p) { p->reclaim_hysteresis = -0.1; }, "reclaimHysteresis: "},
      {[](Policy* p) { p->reclaim_hysteresis = 1; }, "reclaimHysteresis: "},
      {[](Policy* p) { p->retry_backoff_s = 0; }, "retryBackoffSeconds: "},
      {[](Policy* p) { p->max_backoff_s = 5; }, "maxBackoffSeconds: "},
      {[](Policy* p) {
         p->qos_weights[QosClass::kBurstable] = {0, 0, 0};
       },
       "qosWeights.burstable: "},
      {[](Policy* p) {
         p->qos_weights[QosClass::kBestEffort] = {-1, 1, 1};
       },
       "qosWeights.best-effort: "},
  };
  for (const Case& c : cases) {
    Policy p = Base();
    c.change(&p);
    const std::string e = OnlyError(p);
    EXPECT_TRUE(StartsWith(e, c.field)) << c.field << " -> " << e;
  }
}

TEST(PolicyTest, EveryBadFieldIsReportedAtOnce) {
  Policy p = Base();
  p.filters.push_back(Plugin("no-such-filter"));
  p.scores[0].weight = 0;
  p.candidates = -5;
  p.retry_backoff_s = -1;
  EXPECT_EQ(ValidatePolicy(p).size(), 4u);
}

TEST(PolicyTest, EmptyPluginListsAreValid) {
  Policy p;
  EXPECT_TRUE(ValidatePolicy(p).empty());
}

}  // namespace
}  // namespace berth
