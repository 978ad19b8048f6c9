#include "cli/data_dir.h"

#include <filesystem>
#include <system_error>

namespace berth {

std::vector<std::string> DataDirs() {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  std::error_code error;
  // The binary itself, not the current directory: berth may be run from anywhere. Its parent
  // directory is not guessed at: a binary copied to /tmp/x would read whatever /tmp/data holds.
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) dirs.push_back((exe.parent_path() / "data").string());
  dirs.push_back(BERTH_SOURCE_DATA_DIR);
  dirs.push_back(BERTH_INSTALLED_DATA_DIR);
  return dirs;
}

std::string FindDataFile(const std::string& relative) {
  for (const std::string& dir : DataDirs()) {
    const std::string path = dir + "/" + relative;
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return path;
  }
  return "";
}

}  // namespace berth
