#include "agent/host_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace berth {

std::string WhyHostPathIsNotPlain(const std::string& path) {
  std::string prefix;
  size_t at = 0;
  while (at < path.size()) {
    size_t end = path.find('/', at + 1);
    if (end == std::string::npos) end = path.size();
    prefix = path.substr(0, end);
    at = end;
    struct stat st;
    if (::lstat(prefix.c_str(), &st) != 0) return "";  // the rest does not exist yet
    if (!S_ISLNK(st.st_mode)) continue;
    std::vector<char> target(4096);
    const ssize_t n = ::readlink(prefix.c_str(), target.data(), target.size() - 1);
    const std::string to = n > 0 ? std::string(target.data(), static_cast<size_t>(n)) : "?";
    return prefix + " is a symbolic link (to " + to.substr(0, 200) +
           "); berth mounts only host paths without one: mount the directory it leads to, if "
           "the server allows it";
  }
  return "";
}

}  // namespace berth
