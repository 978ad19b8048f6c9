#include "core/mig.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace berth {
namespace {

std::vector<std::string> Names(const std::vector<MigProfile>& profiles) {
  std::vector<std::string> names;
  for (const MigProfile& p : profiles) names.push_back(p.name);
  return names;
}

int Profile(const std::vector<MigProfile>& profiles, const std::string& name) {
  const int p = FindMigProfile(profiles, name);
  EXPECT_GE(p, 0) << "no profile " << name;
  return p;
}

// True when nothing more of any profile fits anywhere on the GPU.
bool Full(const MigLayout& gpu, const std::vector<MigProfile>& profiles) {
  for (size_t p = 0; p < profiles.size(); ++p)
    for (int start = 0; start < kMigMemorySlots; ++start)
      if (gpu.CanPlaceAt(profiles, static_cast<int>(p), start)) return false;
  return true;
}

// Places (profile, start) entries one by one on an empty GPU; fails at the first that does not
// fit. Returns the resulting layout in `out`.
::testing::AssertionResult PlacesAll(const std::vector<MigProfile>& profiles,
                                     const std::vector<std::pair<std::string, int>>& entries,
                                     MigLayout* out) {
  MigLayout gpu;
  for (const auto& [name, start] : entries) {
    const int p = FindMigProfile(profiles, name);
    if (p < 0) return ::testing::AssertionFailure() << "unknown profile " << name;
    if (!gpu.CanPlaceAt(profiles, p, start))
      return ::testing::AssertionFailure() << name << "@" << start << " refused";
    gpu.Place(profiles, p, start);
  }
  *out = gpu;
  return ::testing::AssertionSuccess();
}

TEST(MigProfilesTest, A100Tables) {
  const std::vector<std::string> a100_40 = {"1g.5gb",  "1g.5gb+me", "1g.10gb", "2g.10gb",
                                            "3g.20gb", "4g.20gb",   "7g.40gb"};
  const std::vector<std::string> a100_80 = {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
                                            "3g.40gb", "4g.40gb",    "7g.80gb"};
  EXPECT_EQ(Names(BuiltinMigProfiles("A100-40GB")), a100_40);
  EXPECT_EQ(Names(BuiltinMigProfiles("A100-SXM4-40GB")), a100_40);
  EXPECT_EQ(Names(BuiltinMigProfiles("A100-80GB")), a100_80);
  EXPECT_EQ(Names(BuiltinMigProfiles("A100-SXM4-80GB")), a100_80);
  EXPECT_EQ(Names(BuiltinMigProfiles("a100 80gb")), a100_80);
  EXPECT_EQ(Names(BuiltinMigProfiles("A100-PCIE-80GB")), a100_80);
  // NVML mock memory sizes (reference-specs 4.1).
  const std::vector<MigProfile> t = BuiltinMigProfiles("A100-SXM4-80GB");
  EXPECT_EQ(t[Profile(t, "1g.10gb")].memory_mib, 9856);
  EXPECT_EQ(t[Profile(t, "2g.20gb")].memory_mib, 19968);
  EXPECT_EQ(t[Profile(t, "3g.40gb")].memory_mib, 40192);
  EXPECT_EQ(t[Profile(t, "7g.80gb")].memory_mib, 80384);
  const std::vector<MigProfile> s = BuiltinMigProfiles("A100-40GB");
  EXPECT_EQ(s[Profile(s, "1g.5gb")].memory_mib, 4864);
  EXPECT_EQ(s[Profile(s, "7g.40gb")].memory_mib, 40192);
}

TEST(MigProfilesTest, HopperTables) {
  const std::vector<std::string> h100 = {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
                                         "3g.40gb", "4g.40gb",    "7g.80gb"};
  EXPECT_EQ(Names(BuiltinMigProfiles("H100-80GB")), h100);
  EXPECT_EQ(Names(BuiltinMigProfiles("H100-SXM5-80GB")), h100);
  EXPECT_EQ(Names(BuiltinMigProfiles("H100-PCIE")), h100);
  const std::vector<MigProfile> h = BuiltinMigProfiles("H100-80GB");
  EXPECT_EQ(h[Profile(h, "1g.10gb")].memory_mib, 9984);
  EXPECT_EQ(h[Profile(h, "7g.80gb")].memory_mib, 81152);

  const std::vector<std::string> h200 = {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb",
                                         "3g.71gb", "4g.71gb",    "7g.141gb"};
  EXPECT_EQ(Names(BuiltinMigProfiles("H200")), h200);
  EXPECT_EQ(Names(BuiltinMigProfiles("NVIDIA H200")), h200);
  const std::vector<MigProfile> g = BuiltinMigProfiles("H200");
  EXPECT_EQ(g[Profile(g, "1g.18gb")].memory_mib, 16384);
  EXPECT_EQ(g[Profile(g, "3g.71gb")].memory_mib, 71424);
  EXPECT_EQ(g[Profile(g, "7g.141gb")].memory_mib, 143360);

  const std::vector<std::string> nvl = {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb",
                                        "3g.47gb", "4g.47gb",    "7g.94gb"};
  EXPECT_EQ(Names(BuiltinMigProfiles("H100-NVL")), nvl);
}

// A table against what the driver listed on a real GPU (`nvidia-smi mig -lgip`, driver
// 580.159.04): each profile's name, instance count and memory, in GiB as nvidia-smi prints it.
void ExpectTheTableOfARealGpu(const std::string& capture, const std::string& model) {
  std::ifstream in(std::string(BERTH_SOURCE_DIR) + "/tests/data/agent/" + capture);
  ASSERT_TRUE(in) << "the capture is missing";
  const std::vector<MigProfile> table = BuiltinMigProfiles(model);
  std::set<std::string> listed;
  const std::regex row(R"(\|\s+0\s+MIG (\S+)\s+\d+\s+(\d+)/(\d+)\s+([0-9.]+)\s)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const int p = FindMigProfile(table, m[1]);
    ASSERT_GE(p, 0) << m[1];
    EXPECT_EQ(table[p].max_instances, std::stoi(m[3])) << m[1];
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.2f", table[p].memory_mib / 1024.0);
    EXPECT_EQ(gib, m[4].str()) << m[1];
    listed.insert(m[1]);
  }
  EXPECT_EQ(listed.size(), table.size());
}

TEST(MigProfilesTest, TheH200TableIsWhatARealH200Lists) {
  ExpectTheTableOfARealGpu("h200-vm/mig-lgip.txt", "NVIDIA H200");
}

TEST(MigProfilesTest, TheH100TableIsWhatARealH100Lists) {
  ExpectTheTableOfARealGpu("h100-vm/mig-lgip.txt", "NVIDIA H100 80GB HBM3");
}

TEST(MigProfilesTest, UnknownModelsHaveNoTable) {
  EXPECT_TRUE(BuiltinMigProfiles("T4").empty());
  EXPECT_TRUE(BuiltinMigProfiles("L40S").empty());
  EXPECT_TRUE(BuiltinMigProfiles("").empty());
}

TEST(MigProfilesTest, PlacementsAndLimitsMatchLgipp) {
  // {<allowed starts>}:<size> and the max instances of reference-specs 4.1/4.2, the same for every
  // model.
  struct Expected {
    int compute, slots, max;
    std::vector<int> starts;
  };
  const std::vector<Expected> expected = {{1, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
                                          {1, 1, 1, {0, 1, 2, 3, 4, 5, 6}},
                                          {1, 2, 4, {0, 2, 4, 6}},
                                          {2, 2, 3, {0, 2, 4}},
                                          {3, 4, 2, {0, 4}},
                                          {4, 4, 1, {0}},
                                          {7, 8, 1, {0}}};
  for (const char* model : {"A100-40GB", "A100-80GB", "H100-80GB", "H100-NVL", "H200"}) {
    const std::vector<MigProfile> t = BuiltinMigProfiles(model);
    ASSERT_EQ(t.size(), expected.size()) << model;
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_EQ(t[i].compute_slices, expected[i].compute) << model << " " << t[i].name;
      EXPECT_EQ(t[i].memory_slots, expected[i].slots) << model << " " << t[i].name;
      EXPECT_EQ(t[i].max_instances, expected[i].max) << model << " " << t[i].name;
      EXPECT_EQ(t[i].starts, expected[i].starts) << model << " " << t[i].name;
    }
  }
}

TEST(MigProfilesTest, FindMigProfile) {
  const std::vector<MigProfile> t = BuiltinMigProfiles("A100-80GB");
  EXPECT_EQ(FindMigProfile(t, "1g.10gb"), 0);
  EXPECT_EQ(FindMigProfile(t, "1g.10gb+me"), 1);
  EXPECT_EQ(FindMigProfile(t, "7g.80gb"), 6);
  EXPECT_EQ(FindMigProfile(t, "7g.40gb"), -1);  // the 40GB card's name
  EXPECT_EQ(FindMigProfile(t, "3G.40GB"), -1);  // names are exact
}

class MigLayoutTest : public ::testing::Test {
 protected:
  const std::vector<MigProfile> profiles_ = BuiltinMigProfiles("A100-80GB");
  int P(const std::string& name) const { return Profile(profiles_, name); }
};

TEST_F(MigLayoutTest, ValidFullLayoutsFit) {
  const std::vector<std::vector<std::pair<std::string, int>>> layouts = {
      {{"1g.10gb", 0},
       {"1g.10gb", 1},
       {"1g.10gb", 2},
       {"1g.10gb", 3},
       {"1g.10gb", 4},
       {"1g.10gb", 5},
       {"1g.10gb", 6}},
      {{"3g.40gb", 0}, {"3g.40gb", 4}},
      {{"4g.40gb", 0}, {"3g.40gb", 4}},
      {{"4g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}},
      {{"3g.40gb", 4}, {"2g.20gb", 0}, {"1g.10gb", 2}, {"1g.10gb", 3}},
      {{"2g.20gb", 0}, {"2g.20gb", 2}, {"2g.20gb", 4}, {"1g.10gb", 6}},
      {{"1g.20gb", 0}, {"1g.20gb", 2}, {"1g.20gb", 4}, {"1g.20gb", 6}},
      {{"7g.80gb", 0}},
  };
  for (const auto& layout : layouts) {
    MigLayout gpu;
    ASSERT_TRUE(PlacesAll(profiles_, layout, &gpu)) << "layout starting " << layout[0].first;
    EXPECT_LE(gpu.used_compute(), kMigComputeSlices);
    EXPECT_TRUE(Full(gpu, profiles_)) << "layout starting " << layout[0].first;
  }
}

TEST_F(MigLayoutTest, InvalidStartsAreRefused) {
  const MigLayout empty;
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("2g.20gb"), 6));
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("3g.40gb"), 2));
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("4g.40gb"), 4));
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("1g.10gb"), 7));  // nothing 1-slot at slot 7
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("1g.10gb+me"), 7));
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("1g.20gb"), 1));
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("7g.80gb"), 1));
  EXPECT_FALSE(empty.CanPlaceAt(profiles_, P("2g.20gb"), 1));
  // Every allowed start is accepted on an empty GPU.
  for (size_t p = 0; p < profiles_.size(); ++p)
    for (int start : profiles_[p].starts)
      EXPECT_TRUE(empty.CanPlaceAt(profiles_, static_cast<int>(p), start))
          << profiles_[p].name << "@" << start;
}

TEST_F(MigLayoutTest, OverlapsAreRefused) {
  MigLayout gpu;
  gpu.Place(profiles_, P("3g.40gb"), 0);  // slots 0-3
  EXPECT_EQ(gpu.used_slots(), 0x0f);
  EXPECT_FALSE(gpu.CanPlaceAt(profiles_, P("2g.20gb"), 2));
  EXPECT_FALSE(gpu.CanPlaceAt(profiles_, P("1g.10gb"), 3));
  EXPECT_FALSE(gpu.CanPlaceAt(profiles_, P("4g.40gb"), 0));
  EXPECT_FALSE(gpu.CanPlaceAt(profiles_, P("7g.80gb"), 0));
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("2g.20gb"), 4));
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("3g.40gb"), 4));
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("1g.10gb"), 6));
}

TEST_F(MigLayoutTest, SevenOneSliceInstancesThenNothing) {
  MigLayout gpu;
  for (int start = 0; start < 7; ++start) {
    ASSERT_TRUE(gpu.CanPlaceAt(profiles_, P("1g.10gb"), start));
    gpu.Place(profiles_, P("1g.10gb"), start);
  }
  EXPECT_EQ(gpu.count(P("1g.10gb")), 7);
  EXPECT_EQ(gpu.used_compute(), 7);
  EXPECT_EQ(gpu.used_slots(), 0x7f);
  EXPECT_TRUE(Full(gpu, profiles_));
  EXPECT_EQ(gpu.BestStart(profiles_, P("1g.10gb")), -1);
}

TEST_F(MigLayoutTest, MediaExtensionsAtMostOnce) {
  MigLayout gpu;
  gpu.Place(profiles_, P("1g.10gb+me"), 0);
  EXPECT_FALSE(gpu.CanPlaceAt(profiles_, P("1g.10gb+me"), 1));
  EXPECT_EQ(gpu.BestStart(profiles_, P("1g.10gb+me")), -1);
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("1g.10gb"), 1));
  gpu.Remove(profiles_, P("1g.10gb+me"), 0);
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("1g.10gb+me"), 1));
}

TEST_F(MigLayoutTest, ComputeSlicesNeverExceedSeven) {
  // 4g@0 + 2g@4 leaves slots 6 and 7 free but only one compute slice.
  MigLayout gpu;
  ASSERT_TRUE(PlacesAll(profiles_, {{"4g.40gb", 0}, {"2g.20gb", 4}}, &gpu));
  EXPECT_EQ(gpu.used_compute(), 6);
  EXPECT_FALSE(gpu.CanPlaceAt(profiles_, P("2g.20gb"), 6));  // start not allowed anyway
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("1g.20gb"), 6));
  // A custom profile table isolates the compute rule: 1 memory slot, 4 compute slices.
  const std::vector<MigProfile> heavy = {{"4g.1slot", 4, 1, {0, 1, 2, 3, 4, 5, 6, 7}, 7, 1024}};
  MigLayout h;
  h.Place(heavy, 0, 0);
  EXPECT_FALSE(h.CanPlaceAt(heavy, 0, 1));  // 8 compute slices
  EXPECT_EQ(h.BestStart(heavy, 0), -1);
  EXPECT_EQ(h.used_compute(), 4);
}

TEST_F(MigLayoutTest, MaxInstancesIsEnforced) {
  const std::vector<MigProfile> two = {{"1g.x", 1, 1, {0, 1, 2, 3, 4, 5, 6, 7}, 2, 1024}};
  MigLayout gpu;
  gpu.Place(two, 0, 0);
  gpu.Place(two, 0, 1);
  EXPECT_EQ(gpu.count(0), 2);
  EXPECT_FALSE(gpu.CanPlaceAt(two, 0, 2));
  EXPECT_EQ(gpu.BestStart(two, 0), -1);
}

TEST_F(MigLayoutTest, RemoveRestoresTheLayout) {
  MigLayout gpu;
  gpu.Place(profiles_, P("4g.40gb"), 0);
  gpu.Place(profiles_, P("2g.20gb"), 4);
  gpu.Remove(profiles_, P("4g.40gb"), 0);
  EXPECT_EQ(gpu.used_slots(), 0x30);
  EXPECT_EQ(gpu.used_compute(), 2);
  EXPECT_EQ(gpu.count(P("4g.40gb")), 0);
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("4g.40gb"), 0));
  gpu.Remove(profiles_, P("2g.20gb"), 4);
  EXPECT_TRUE(gpu.empty());
  EXPECT_EQ(gpu.used_compute(), 0);
  EXPECT_TRUE(gpu.CanPlaceAt(profiles_, P("7g.80gb"), 0));
}

TEST_F(MigLayoutTest, BestStartKeepsLargeProfilesPossible) {
  MigLayout gpu;
  const int one = gpu.BestStart(profiles_, P("1g.10gb"));
  ASSERT_GE(one, 0);
  gpu.Place(profiles_, P("1g.10gb"), one);
  EXPECT_GE(one, 4) << "a 1g in slots 0-3 blocks the 4g";
  EXPECT_EQ(gpu.BestStart(profiles_, P("4g.40gb")), 0);
  // Greedy requests in the order 1g, 4g, 2g still reach the full layout 4g@0 + 2g@4 + 1g@6.
  gpu.Place(profiles_, P("4g.40gb"), 0);
  const int two = gpu.BestStart(profiles_, P("2g.20gb"));
  ASSERT_GE(two, 0);
  gpu.Place(profiles_, P("2g.20gb"), two);
  EXPECT_EQ(gpu.used_compute(), 7);
}

TEST_F(MigLayoutTest, BestStartFillsAGpuWithSevenOneSlices) {
  MigLayout gpu;
  for (int i = 0; i < 7; ++i) {
    const int start = gpu.BestStart(profiles_, P("1g.10gb"));
    ASSERT_GE(start, 0) << "instance " << i;
    gpu.Place(profiles_, P("1g.10gb"), start);
  }
  EXPECT_EQ(gpu.BestStart(profiles_, P("1g.10gb")), -1);
  EXPECT_EQ(gpu.used_slots(), 0x7f);
}

TEST_F(MigLayoutTest, BestStartOnAFullOrBlockedGpu) {
  MigLayout gpu;
  gpu.Place(profiles_, P("7g.80gb"), 0);
  for (size_t p = 0; p < profiles_.size(); ++p)
    EXPECT_EQ(gpu.BestStart(profiles_, static_cast<int>(p)), -1) << profiles_[p].name;
}

TEST(PlaceMigLayoutTest, TwoHalves) {
  const std::vector<MigProfile> t = BuiltinMigProfiles("A100-80GB");
  std::vector<MigInstance> placed;
  ASSERT_EQ(PlaceMigLayout(t, {"3g.40gb", "3g.40gb"}, &placed), "");
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].profile, FindMigProfile(t, "3g.40gb"));
  EXPECT_EQ(placed[1].profile, FindMigProfile(t, "3g.40gb"));
  EXPECT_NE(placed[0].start, placed[1].start);
  EXPECT_EQ(placed[0].start + placed[1].start, 4);  // 0 and 4
}

TEST(PlaceMigLayoutTest, TwoFourSlicesDoNotFit) {
  const std::vector<MigProfile> t = BuiltinMigProfiles("A100-80GB");
  std::vector<MigInstance> placed;
  const std::string error = PlaceMigLayout(t, {"4g.40gb", "4g.40gb"}, &placed);
  EXPECT_NE(error.find("\"4g.40gb\""), std::string::npos) << error;
  EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
}

TEST(PlaceMigLayoutTest, UnknownProfileNamesTheKnownOnes) {
  const std::vector<MigProfile> t = BuiltinMigProfiles("H100-80GB");
  std::vector<MigInstance> placed;
  const std::string error = PlaceMigLayout(t, {"3g.40gb", "5g.50gb"}, &placed);
  EXPECT_NE(error.find("unknown MIG profile \"5g.50gb\""), std::string::npos) << error;
  EXPECT_NE(error.find("1g.10gb, 1g.10gb+me"), std::string::npos) << error;
  EXPECT_NE(error.find("7g.80gb"), std::string::npos) << error;
}

TEST(PlaceMigLayoutTest, LargerProfilesArePlacedFirst) {
  // Written smallest first; the 3g must go to slot 4 for the two 1g to fit (as on
  // examples/h100-mig.yaml's fixed node).
  const std::vector<MigProfile> t = BuiltinMigProfiles("H100-80GB");
  std::vector<MigInstance> placed;
  ASSERT_EQ(PlaceMigLayout(t, {"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"}, &placed), "");
  ASSERT_EQ(placed.size(), 4u);
  MigLayout gpu;
  for (const MigInstance& inst : placed) {
    ASSERT_TRUE(gpu.CanPlaceAt(t, inst.profile, inst.start));
    gpu.Place(t, inst.profile, inst.start);
    if (inst.profile == FindMigProfile(t, "3g.40gb")) {
      EXPECT_EQ(inst.start, 4);
    }
  }
  EXPECT_EQ(gpu.used_compute(), 7);
  EXPECT_EQ(gpu.used_slots(), 0xff);
}

TEST(PlaceMigLayoutTest, PinnedStarts) {
  const std::vector<MigProfile> t = BuiltinMigProfiles("A100-80GB");
  std::vector<MigInstance> placed;
  ASSERT_EQ(PlaceMigLayout(t, {"2g.20gb@2", "3g.40gb@4"}, &placed), "");
  ASSERT_EQ(placed.size(), 2u);
  std::set<std::pair<int, int>> got;
  for (const MigInstance& inst : placed) got.insert({inst.profile, inst.start});
  EXPECT_EQ(got, (std::set<std::pair<int, int>>{{FindMigProfile(t, "2g.20gb"), 2},
                                                {FindMigProfile(t, "3g.40gb"), 4}}));
  // A pinned entry is placed before unpinned larger ones: the 3g then has only slot 4 left.
  ASSERT_EQ(PlaceMigLayout(t, {"3g.40gb", "1g.10gb@1"}, &placed), "");
  EXPECT_EQ(placed[0].start, 1);
  EXPECT_EQ(placed[1].start, 4);

  std::string error = PlaceMigLayout(t, {"3g.40gb@2"}, &placed);
  EXPECT_NE(error.find("\"3g.40gb@2\""), std::string::npos) << error;
  error = PlaceMigLayout(t, {"3g.40gb@x"}, &placed);
  EXPECT_NE(error.find("slot 0-7"), std::string::npos) << error;
  error = PlaceMigLayout(t, {"3g.40gb@12"}, &placed);
  EXPECT_NE(error.find("slot 0-7"), std::string::npos) << error;
  // Two pinned entries on the same slot: the second one placed is named.
  error = PlaceMigLayout(t, {"1g.10gb@0", "2g.20gb@0"}, &placed);
  EXPECT_NE(error.find("@0\" does not fit"), std::string::npos) << error;
}

TEST(PlaceMigLayoutTest, LimitsApplyToLayouts) {
  const std::vector<MigProfile> t = BuiltinMigProfiles("A100-80GB");
  std::vector<MigInstance> placed;
  EXPECT_EQ(PlaceMigLayout(t, std::vector<std::string>(7, "1g.10gb"), &placed), "");
  EXPECT_EQ(placed.size(), 7u);
  EXPECT_NE(PlaceMigLayout(t, std::vector<std::string>(8, "1g.10gb"), &placed), "");
  EXPECT_NE(PlaceMigLayout(t, {"1g.10gb+me", "1g.10gb+me"}, &placed), "");
  EXPECT_NE(PlaceMigLayout(t, {"7g.80gb", "1g.10gb"}, &placed), "");
  EXPECT_EQ(PlaceMigLayout(t, {}, &placed), "");
  EXPECT_TRUE(placed.empty());
}

}  // namespace
}  // namespace berth
