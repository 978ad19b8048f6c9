#include "fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace berth {

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
