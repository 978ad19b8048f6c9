#include "protocol/log_frames.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace berth {
namespace {

using Frames = std::vector<std::pair<bool, std::string>>;  // stderr?, payload

// Reads `bytes` fed `step` bytes at a time.
Frames Read(const std::string& bytes, size_t step, bool* ok = nullptr) {
  Frames out;
  FrameReader reader([&](bool err, const char* data, size_t size) {
    out.emplace_back(err, std::string(data, size));
  });
  bool all_ok = true;
  for (size_t at = 0; at < bytes.size(); at += step)
    all_ok = reader.Add(bytes.data() + at, std::min(step, bytes.size() - at)) && all_ok;
  if (ok != nullptr) *ok = all_ok;
  return out;
}

TEST(LogFramesTest, StretchesOfEachStreamBecomeFramesWithDockersHeader) {
  const std::string text = "out1\nerr1\nerr2\nout2\n";
  const std::string frames = MultiplexedFrames(text, {{5, 15}});
  ASSERT_EQ(frames.size(), text.size() + 3 * 8);
  EXPECT_EQ(frames.substr(0, 8), std::string("\x01\0\0\0\0\0\0\x05", 8));
  EXPECT_EQ(frames.substr(13, 8), std::string("\x02\0\0\0\0\0\0\x0a", 8));
  const Frames expected = {{false, "out1\n"}, {true, "err1\nerr2\n"}, {false, "out2\n"}};
  for (size_t step : {size_t{1}, size_t{3}, size_t{8}, frames.size()}) {
    bool ok = false;
    EXPECT_EQ(Read(frames, step, &ok), expected) << "step " << step;
    EXPECT_TRUE(ok);
  }
}

TEST(LogFramesTest, SpansAtTheEdgesAndOutsideTheTextAreTrimmed) {
  EXPECT_EQ(Read(MultiplexedFrames("ab", {}), 1), (Frames{{false, "ab"}}));
  EXPECT_EQ(Read(MultiplexedFrames("ab", {{0, 2}}), 1), (Frames{{true, "ab"}}));
  EXPECT_EQ(Read(MultiplexedFrames("abc", {{0, 1}, {1, 2}, {5, 9}}), 1),
            (Frames{{true, "a"}, {true, "b"}, {false, "c"}}));
  EXPECT_EQ(Read(MultiplexedFrames("abc", {{2, 99}}), 1), (Frames{{false, "ab"}, {true, "c"}}));
  EXPECT_EQ(MultiplexedFrames("", {{0, 4}}), "");
}

TEST(LogFramesTest, ABadHeaderStopsTheReader) {
  bool ok = true;
  EXPECT_TRUE(Read(std::string("\x07\0\0\0\0\0\0\x01x", 9), 9, &ok).empty());
  EXPECT_FALSE(ok);
  EXPECT_TRUE(Read(std::string("\x01\x01\0\0\0\0\0\x01x", 9), 9, &ok).empty());
  EXPECT_FALSE(ok);
  // A frame not yet whole is held, not given.
  const std::string cut_short = std::string("\x01\0\0\0\0\0\0\x05", 8) + "abc";
  EXPECT_TRUE(Read(cut_short, 11, &ok).empty());
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace berth
