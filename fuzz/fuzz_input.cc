#include "fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace berth {

void RequireWhere(const std::string& name, const std::string& message) {
  size_t end = name.size() + 1;  // past "NAME:"
  while (end < message.size() && message[end] >= '0' && message[end] <= '9') ++end;
  const bool names_file = message.compare(0, name.size(), name) == 0 &&
                          message.size() > name.size() && message[name.size()] == ':';
  if (names_file && end > name.size() + 1 && end < message.size() && message[end] == ':') return;
  std::fprintf(stderr, "berth fuzz: a refusal must start with \"%s:LINE:\" (%s): %s\n",
               name.c_str(), names_file ? "no line number" : "not the input's name",
               message.c_str());
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
