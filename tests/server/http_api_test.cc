// The API's bounded watches: one user of a token cannot take them all from the others.
#include "server/http_api.h"

#include <gtest/gtest.h>

#include <string>

#include "server/control_plane.h"

namespace berth {
namespace {

int StatusOfTake(WatchSlots& slots, const std::string& user) {
  try {
    slots.Take(user);
    return 0;
  } catch (const ApiError& e) {
    return e.status;
  }
}

TEST(WatchSlotsTest, OneUserHoldsAtMostTheirShareAndTheOthersStillGetWatches) {
  WatchSlots slots;
  for (int i = 0; i < kMaxWatchesPerUser; ++i) ASSERT_EQ(StatusOfTake(slots, "alice"), 0);
  EXPECT_EQ(StatusOfTake(slots, "alice"), 429);
  EXPECT_EQ(StatusOfTake(slots, "bob"), 0);
  slots.Give("alice");  // one of alice's ends: she may take one again
  EXPECT_EQ(StatusOfTake(slots, "alice"), 0);
  EXPECT_EQ(StatusOfTake(slots, "alice"), 429);
}

TEST(WatchSlotsTest, CallersWithoutAUserShareTheWholeAndNoOneGetsPastIt) {
  WatchSlots slots;
  for (int i = 0; i < kMaxWatches - 1; ++i) ASSERT_EQ(StatusOfTake(slots, ""), 0);
  EXPECT_EQ(StatusOfTake(slots, "carol"), 0);
  EXPECT_EQ(StatusOfTake(slots, ""), 503);
  EXPECT_EQ(StatusOfTake(slots, "dave"), 503);
  slots.Give("carol");
  EXPECT_EQ(StatusOfTake(slots, "dave"), 0);
  // A refused take held nothing: after all are given back, every one can be taken again.
  for (int i = 0; i < kMaxWatches - 1; ++i) slots.Give("");
  slots.Give("dave");
  for (int i = 0; i < kMaxWatches; ++i) ASSERT_EQ(StatusOfTake(slots, ""), 0);
}

}  // namespace
}  // namespace berth
