#include "fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace berth {

void RequireWhere(const std::string& name, const std::string& message) {
  // The digits of one ":NUMBER" field from `*at`; false when there are none.
  const auto number = [&](size_t* at) {
    if (*at >= message.size() || message[*at] != ':') return false;
    size_t end = *at + 1;
    while (end < message.size() && message[end] >= '0' && message[end] <= '9') ++end;
    if (end == *at + 1) return false;
    *at = end;
    return true;
  };
  const bool names_file = message.compare(0, name.size(), name) == 0;
  const bool yaml = name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0;
  size_t at = name.size();
  const bool placed = names_file && number(&at) && (!yaml || number(&at)) && at < message.size() &&
                      message[at] == ':';
  if (placed) return;
  std::fprintf(stderr, "berth fuzz: a refusal must start with \"%s:LINE:%s\" (%s): %s\n",
               name.c_str(), yaml ? "COLUMN:" : "",
               names_file ? "no line or column number" : "not the input's name", message.c_str());
  std::abort();
}

std::string InputFile(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("berth-fuzz-input", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::perror("berth fuzz: writing the input file");
    std::abort();
  }
  // A path the loaders open as any file; each open starts at offset 0.
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace berth
