#include "protocol/base64.h"

#include <gtest/gtest.h>

#include <random>

namespace berth {
namespace {

TEST(Base64Test, EncodesAsRfc4648Says) {
  // RFC 4648, section 10.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(Base64Encode(bytes), text);
    EXPECT_EQ(Base64Decode(text), bytes);
  }
}

TEST(Base64Test, AnyBytesRoundTrip) {
  std::mt19937 rng(7);
  for (size_t size = 0; size < 40; ++size) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_EQ(Base64Decode(Base64Encode(bytes)), bytes) << size;
  }
}

TEST(Base64Test, DecodingSkipsLineBreaksAndRefusesOtherCharacters) {
  EXPECT_EQ(Base64Decode("Zm9v\nYmFy\r\n"), "foobar");
  EXPECT_FALSE(Base64Decode("Zm9v!"));
  EXPECT_FALSE(Base64Decode("Zm9v-_"));  // the URL alphabet is another one
  // RFC 4648 as written: whole groups, padding at the end only, no bits left over.
  for (const char* bad : {"a", "aGl", "=a=G=k=", "aGk=a", "Zg===", "Zh=="})
    EXPECT_FALSE(Base64Decode(bad)) << bad;
  EXPECT_EQ(Base64Decode("a G\nk="), "hi");
}

}  // namespace
}  // namespace berth
