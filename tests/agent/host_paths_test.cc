#include "agent/host_paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace berth {
namespace {

namespace fs = std::filesystem;

// Review: a job made a link inside an allowed directory, and a second job mounted the link:
// the host's /etc, read and written from a container.
TEST(HostPathsTest, ALinkAnywhereOnThePathIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("berth-host-paths-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "allowed" / "data");
  fs::create_directory_symlink("/etc", dir / "allowed" / "escape");
  fs::create_directory_symlink(dir / "allowed", dir / "linked-root");
  EXPECT_EQ(WhyHostPathIsNotPlain((dir / "allowed" / "data").string()), "");
  EXPECT_EQ(WhyHostPathIsNotPlain((dir / "allowed" / "not-yet" / "deeper").string()), "");
  const std::string why = WhyHostPathIsNotPlain((dir / "allowed" / "escape").string());
  EXPECT_NE(why.find("escape is a symbolic link (to /etc)"), std::string::npos) << why;
  EXPECT_NE(WhyHostPathIsNotPlain((dir / "allowed" / "escape" / "shadow").string()), "");
  EXPECT_NE(WhyHostPathIsNotPlain((dir / "linked-root" / "data").string()), "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace berth
