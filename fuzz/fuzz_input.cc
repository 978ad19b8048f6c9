#include "fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

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

std::vector<std::pair<std::string, std::string>> InputSections(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> sections;
  // Each "== NAME" line starts a section; it runs to the start of the next such line.
  size_t at = text.substr(0, 3) == "== " ? 0 : text.find("\n== ");
  while (at != std::string_view::npos) {
    if (text[at] == '\n') ++at;
    const size_t eol = text.find('\n', at);
    const std::string_view name =
        text.substr(at + 3, eol == std::string_view::npos ? eol : eol - at - 3);
    const size_t start = eol == std::string_view::npos ? text.size() : eol + 1;
    const size_t next = text.find("\n== ", start - 1);
    const size_t end = next == std::string_view::npos ? text.size() : next + 1;
    sections.emplace_back(name, text.substr(start, end - start));
    at = next;
  }
  return sections;
}

std::string InputTree(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const std::string root = "/dev/shm/berth-fuzz-tree-" + std::to_string(getpid());
  // Gone when the fuzzer exits (a crash leaves it, with the input that made it).
  static const bool removed_at_exit = std::atexit([] {
                                        std::error_code ec;
                                        fs::remove_all(root, ec);
                                      }) == 0;
  (void)removed_at_exit;
  fs::remove_all(root);
  fs::create_directories(root);
  const auto safe = [](const std::string& path) {
    return !path.empty() && path.front() != '/' && path.find("..") == std::string::npos &&
           path.find_first_not_of(
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               "0123456789._,-/") == std::string::npos;
  };
  for (const auto& [path, contents] : InputSections(data, size)) {
    if (!safe(path)) continue;
    const fs::path file = fs::path(root) / path;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    std::ofstream(file, std::ios::binary)
        .write(contents.data(), static_cast<std::streamsize>(contents.size()));
  }
  return root;
}

std::string FileContents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void Finding(const std::string& what) {
  std::fprintf(stderr, "berth fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace berth
