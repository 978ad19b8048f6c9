#include "config/file_text.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/config_error.h"

namespace berth {

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  return text.str();
}

}  // namespace berth
