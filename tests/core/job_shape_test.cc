#include "core/job_shape.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

// A failure says that every job of its class at least as large, of no higher priority, fails
// too; and since which state version, so that a job marked failed is tried again once anything
// changed after the failure, not only after the version it was marked at.
TEST(FailedShapesTest, ALargerJobOfNoHigherPriorityIsDominatedAsOfTheEarliestFailure) {
  FailedShapes failed;
  failed.Add(3, {2, 1, 4000, 100}, 50, /*as_of=*/7);
  uint64_t as_of = 0;
  EXPECT_TRUE(failed.Dominated(3, {4, 1, 4000, 100}, 50, &as_of));
  EXPECT_EQ(as_of, 7u);
  EXPECT_FALSE(failed.Dominated(3, {1, 1, 4000, 100}, 50)) << "smaller";
  EXPECT_FALSE(failed.Dominated(3, {4, 1, 2000, 100}, 50)) << "smaller in one dimension";
  EXPECT_FALSE(failed.Dominated(3, {4, 1, 4000, 100}, 51)) << "higher priority";
  EXPECT_FALSE(failed.Dominated(4, {4, 1, 4000, 100}, 50)) << "another class";
  // A second failure covering it as of a later version: the earliest still answers.
  failed.Add(3, {3, 1, 1000, 100}, 60, /*as_of=*/9);
  EXPECT_TRUE(failed.Dominated(3, {4, 1, 4000, 100}, 50, &as_of));
  EXPECT_EQ(as_of, 7u);
  EXPECT_TRUE(failed.Dominated(3, {4, 1, 1000, 100}, 55, &as_of));
  EXPECT_EQ(as_of, 9u);
  // A smaller failure replaces the ones it covers, with its own version.
  failed.Add(3, {1, 1, 1000, 100}, 60, /*as_of=*/11);
  EXPECT_TRUE(failed.Dominated(3, {4, 1, 4000, 100}, 50, &as_of));
  EXPECT_EQ(as_of, 11u);
  failed.Clear();
  EXPECT_FALSE(failed.Dominated(3, {4, 1, 4000, 100}, 50));
}

}  // namespace
}  // namespace berth
