#include "config/file_text.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/config_error.h"

namespace berth {

std::string ReadFileText(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw ConfigError(path + ": larger than " + std::to_string(max_bytes) +
                        " bytes; split it into smaller files");
  }
  if (in.bad()) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  return text;
}

}  // namespace berth
