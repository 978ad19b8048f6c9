#include "config/tokens_file.h"

#include <gtest/gtest.h>

#include <string>

#include "config_test_util.h"

namespace berth {
namespace {

const std::string kHash(64, 'a');

::testing::AssertionResult FailsAt(const std::string& text, const std::string& marker,
                                   std::initializer_list<std::string> parts) {
  return ThrowsConfigErrorAtLine([&] { ParseTokensYaml(text, "tokens.yaml"); }, "tokens.yaml",
                                 LineOf(text, marker), parts);
}

TEST(TokensFileTest, UsersAdminsAndAgents) {
  const std::vector<TokenEntry> tokens = ParseTokensYaml(
      "tokens:\n"
      "  - {sha256: " +
          kHash +
          ", user: alice, queues: [research, dev]}\n"
          "  - {sha256: " +
          std::string(64, 'b') +
          ", user: root, admin: true}\n"
          "  - {sha256: " +
          std::string(64, 'c') + ", user: node-1, kind: agent}\n",
      "tokens.yaml");
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0].user, "alice");
  EXPECT_EQ(tokens[0].queues, (std::vector<std::string>{"research", "dev"}));
  EXPECT_FALSE(tokens[0].admin);
  EXPECT_TRUE(tokens[1].admin);
  EXPECT_TRUE(tokens[2].agent);
  EXPECT_FALSE(tokens[2].admin);
}

TEST(TokensFileTest, MistakesAreNamedAtTheirLine) {
  EXPECT_TRUE(FailsAt("tokens:\n  - {sha256: berth_abc, user: a}\n", "berth_abc",
                      {"tokens[0].sha256: expected the token's SHA-256", "not the token itself"}));
  EXPECT_TRUE(FailsAt(
      "tokens:\n  - {sha256: " + kHash + ", user: a}\n  - {sha256: " + kHash + ", user: b}\n",
      "user: b", {"tokens[1].sha256: the same token is listed twice"}));
  EXPECT_TRUE(FailsAt("tokens:\n  - {sha256: " + kHash + "}\n", "sha256", {"user"}));
  EXPECT_TRUE(FailsAt("tokens:\n  - {sha256: " + kHash + ", user: a, kind: robot}\n", "kind",
                      {"tokens[0].kind: expected user or agent"}));
  EXPECT_TRUE(FailsAt("tokens:\n  - {sha256: " + kHash + ", user: a, kind: agent, admin: true}\n",
                      "kind", {"an agent token cannot be an admin"}));
  EXPECT_TRUE(FailsAt("tokens:\n  - {sha256: " + kHash + ", user: a, password: x}\n", "password",
                      {"password"}));
  EXPECT_TRUE(FailsAt("tokens:\n  - {sha256: " + kHash + ", user: \"a\\tb\"}\n", "user",
                      {"tokens[0].user"}));
  // An empty list would let every caller in as an admin (review).
  EXPECT_TRUE(FailsAt("tokens: []\n", "tokens", {"tokens: the list is empty", "--tokens"}));
}

}  // namespace
}  // namespace berth
