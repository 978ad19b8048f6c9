#include "config/mount_path.h"

#include "config/file_text.h"

namespace berth {

std::string NormalMountPath(std::string_view path, std::string* problem) {
  problem->clear();
  if (path.size() > kMaxMountPath) {
    *problem = "is " + std::to_string(path.size()) + " bytes, more than the limit of " +
               std::to_string(kMaxMountPath) + "; give a shorter path";
    return "";
  }
  if (const std::string control = NameProblem(path, "the path"); !control.empty()) {
    *problem = "has " + control;
    return "";
  }
  if (path.empty() || path[0] != '/') {
    *problem = "is not absolute; give the full path, from /";
    return "";
  }
  std::string normal;
  for (size_t start = 0; start < path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part == "..") {
      *problem = "has a \"..\" component; name the directory itself, without \"..\"";
      return "";
    }
    if (!part.empty() && part != ".") normal += "/" + std::string(part);
    start = end + 1;
  }
  return normal.empty() ? "/" : normal;
}

bool PathUnder(std::string_view path, std::string_view prefix) {
  if (prefix == "/") return true;
  return path.substr(0, prefix.size()) == prefix &&
         (path.size() == prefix.size() || path[prefix.size()] == '/');
}

}  // namespace berth
