#include "core/fairness.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace berth {
namespace {

FairClaim Claim(double weight, double demand, double guarantee = 0,
                double cap = std::numeric_limits<double>::infinity()) {
  FairClaim c;
  c.weight = weight;
  c.demand = demand;
  c.guarantee = guarantee;
  c.cap = cap;
  return c;
}

void ExpectShares(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "claim " << i;
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(WaterFillTest, HandComputedExample) {
  // Weights 1,1,2 pour 25 per unit of weight: the first claimant stops at its demand of 10 (the
  // others are at 10 and 20); the remaining 60 go 1:2, giving 30 and 60.
  ExpectShares(WaterFill(100, {Claim(1, 10), Claim(1, 60), Claim(2, 80)}), {10, 30, 60});
}

TEST(WaterFillTest, EqualWeightsSplitEvenly) {
  ExpectShares(WaterFill(90, {Claim(1, 100), Claim(1, 100), Claim(1, 100)}), {30, 30, 30});
}

TEST(WaterFillTest, GuaranteesAreHonouredFirst) {
  // 50 is guaranteed to the first; the other 50 is split evenly.
  ExpectShares(WaterFill(100, {Claim(1, 100, 50), Claim(1, 100)}), {75, 25});
  // A heavier weight does not eat into another's guarantee.
  ExpectShares(WaterFill(100, {Claim(1, 100, 60), Claim(9, 100)}), {64, 36});
}

TEST(WaterFillTest, GuaranteeAboveDemandGivesOnlyTheDemand) {
  ExpectShares(WaterFill(100, {Claim(1, 10, 50), Claim(1, 100)}), {10, 90});
}

TEST(WaterFillTest, CapsAreNeverExceeded) {
  ExpectShares(WaterFill(100, {Claim(1, 100, 0, 20), Claim(1, 100)}), {20, 80});
  // A cap below the guarantee wins too.
  ExpectShares(WaterFill(100, {Claim(1, 100, 50, 30), Claim(1, 100)}), {30, 70});
}

TEST(WaterFillTest, DemandBelowTheShareLeavesTheRestToOthers) {
  ExpectShares(WaterFill(100, {Claim(1, 5), Claim(1, 100), Claim(1, 100)}), {5, 47.5, 47.5});
}

TEST(WaterFillTest, CapacityBeyondDemandStaysUnused) {
  const std::vector<double> s = WaterFill(100, {Claim(1, 10), Claim(2, 20)});
  ExpectShares(s, {10, 20});
  ExpectShares(WaterFill(100, {Claim(1, 0), Claim(1, 0)}), {0, 0});
}

TEST(WaterFillTest, GuaranteesBeyondCapacityAreScaledEvenly) {
  // 40 + 80 = 120 guaranteed on 60: every guarantee is halved, nothing is left to pour.
  ExpectShares(WaterFill(60, {Claim(1, 100, 40), Claim(1, 100, 80), Claim(5, 100)}), {20, 40, 0});
  // Guarantees count only up to demand before scaling.
  ExpectShares(WaterFill(60, {Claim(1, 20, 40), Claim(1, 100, 80)}), {12, 48});
}

TEST(WaterFillTest, ZeroWeightGetsOnlyItsGuarantee) {
  ExpectShares(WaterFill(100, {Claim(0, 100, 10), Claim(1, 100)}), {10, 90});
}

TEST(WaterFillTest, NeverHandsOutMoreThanCapacity) {
  const std::vector<FairClaim> claims = {Claim(1, 7, 3), Claim(3, 50, 0, 12), Claim(2.5, 40, 5),
                                         Claim(0.5, 33)};
  for (double capacity : {0.0, 1.0, 10.0, 37.5, 64.0, 500.0}) {
    const std::vector<double> s = WaterFill(capacity, claims);
    EXPECT_LE(Sum(s), capacity + 1e-6);
    for (size_t i = 0; i < claims.size(); ++i) {
      EXPECT_GE(s[i], 0);
      EXPECT_LE(s[i], std::min(claims[i].demand, claims[i].cap) + 1e-6);
    }
    // Work conserving: what is left over means every claim is at its demand or cap.
    if (Sum(s) < capacity - 1e-6) {
      for (size_t i = 0; i < claims.size(); ++i)
        EXPECT_NEAR(s[i], std::min(claims[i].demand, claims[i].cap), 1e-6);
    }
  }
  EXPECT_TRUE(WaterFill(10, {}).empty());
}

TEST(DominantShareTest, LargestFractionOfAnyResource) {
  ResourceVector capacity{8, 100000, 1000};
  EXPECT_DOUBLE_EQ(DominantShare({4, 10000, 100}, capacity), 0.5);   // GPUs dominate
  EXPECT_DOUBLE_EQ(DominantShare({1, 75000, 100}, capacity), 0.75);  // CPU dominates
  EXPECT_DOUBLE_EQ(DominantShare({0, 0, 900}, capacity), 0.9);       // memory dominates
  EXPECT_DOUBLE_EQ(DominantShare({}, capacity), 0);
}

TEST(DominantShareTest, ResourcesWithoutCapacityAreIgnored) {
  EXPECT_DOUBLE_EQ(DominantShare({5, 50, 10}, {0, 100, 0}), 0.5);
  EXPECT_DOUBLE_EQ(DominantShare({5, 50, 10}, {}), 0);
}

}  // namespace
}  // namespace berth
