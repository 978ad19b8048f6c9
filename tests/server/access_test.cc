#include "server/access.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "server/control_plane.h"

namespace berth {
namespace {

int Status(const AccessControl& access, const std::string& header) {
  try {
    access.Authenticate(header);
  } catch (const ApiError& e) {
    return e.status;
  }
  return 200;
}

TEST(AccessTest, Sha256IsTheStandardOne) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(AccessTest, NewTokensAreLongAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string token = NewToken();
    EXPECT_EQ(token.size(), 6u + 64u);
    EXPECT_EQ(token.rfind("berth_", 0), 0u);
    EXPECT_TRUE(seen.insert(token).second);
  }
}

TEST(AccessTest, ATokenNamesItsCaller) {
  const std::string token = NewToken();
  const AccessControl access({{Sha256Hex(token), "alice", {"research"}, false, false}});
  ASSERT_TRUE(access.enabled());
  const Caller alice = access.Authenticate("Bearer " + token);
  EXPECT_EQ(alice.user, "alice");
  EXPECT_FALSE(alice.admin);
  EXPECT_TRUE(alice.MayUseQueue("research"));
  EXPECT_FALSE(alice.MayUseQueue("other"));
  EXPECT_TRUE(alice.MayTouch("alice"));
  EXPECT_FALSE(alice.MayTouch("bob"));
  EXPECT_EQ(Status(access, ""), 401);
  EXPECT_EQ(Status(access, token), 401);  // no scheme
  EXPECT_EQ(Status(access, "Bearer " + token + "x"), 401);
  EXPECT_EQ(Status(access, "Bearer " + Sha256Hex(token)), 401);  // the hash is not the token
}

TEST(AccessTest, WithoutTokensEveryCallerIsAnAdmin) {
  const AccessControl open({});
  EXPECT_FALSE(open.enabled());
  const Caller anyone = open.Authenticate("");
  EXPECT_TRUE(anyone.admin);
  EXPECT_TRUE(anyone.MayUseQueue("any"));
  EXPECT_TRUE(anyone.MayTouch("bob"));
}

}  // namespace
}  // namespace berth
