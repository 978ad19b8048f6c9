#include "config/file_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "config/config_error.h"
#include "config/limits.h"

namespace berth {
namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// The length of the well-formed UTF-8 sequence at the start of `s`, or 0 (RFC 3629, table 3-7
// of the Unicode standard: the second byte's range depends on the first).
size_t Utf8Length(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;   // overlong
    if (b0 == 0xED) high = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;   // overlong
    if (b0 == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  return length;
}

}  // namespace

std::string ReadFileText(const std::string& path) {
  const auto max_bytes = static_cast<uint64_t>(limits::Get().file_bytes);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": cannot read: it is a directory; give a file");
  // Opening a named pipe blocks until someone writes to it: opened without blocking, a pipe
  // nobody writes to reads as empty instead of hanging. Reads block again, so that a pipe being
  // written (`--cluster <(make-cluster)`) is read whole.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  std::string error;
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) error = std::strerror(errno);
  char buffer[1 << 16];
  while (error.empty()) {
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) error = std::strerror(errno);
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
    if (text.size() > max_bytes) {
      close(fd);
      throw ConfigError(path + ": " + limits::OverLimit(&limits::Limits::file_bytes, "bytes") +
                        "; split it into smaller files");
    }
  }
  close(fd);
  if (!error.empty()) throw ConfigError(path + ": cannot read: " + error);
  return text;
}

void CheckText(std::string_view text, const std::string& source) {
  size_t line = 1, column = 1;  // column in characters
  const auto refuse = [&](const std::string& what) {
    throw ConfigError(source + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                      what);
  };
  for (size_t i = 0; i < text.size(); ++column) {
    const size_t length = Utf8Length(text.substr(i));
    if (length == 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[i]));
      refuse(std::string("invalid UTF-8 (byte ") + byte + "); save the file as UTF-8");
    }
    if (text[i] == '\0') refuse("a NUL byte; a text file holds none, is this a binary file?");
    if (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))
      refuse(
          "a carriage return without a line feed (old Mac line ends); save the file with LF or "
          "CRLF line ends");
    if (text[i] == '\n') {
      ++line;
      column = 0;
    }
    i += length;
  }
}

std::string NameProblem(std::string_view name, std::string_view what) {
  for (size_t i = 0; i < name.size(); ++i) {
    const auto byte = static_cast<unsigned char>(name[i]);
    if (byte < 0x20 || byte == 0x7F) {
      char text[96];
      std::snprintf(text, sizeof text, "a control character (byte 0x%02X) at byte %zu of ", byte,
                    i + 1);
      return text + std::string(what) + "; remove it";
    }
  }
  return "";
}

std::string FileStem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string stem = slash == std::string::npos ? path : path.substr(slash + 1);
  stem = stem.substr(0, stem.find_last_of('.'));
  for (char& c : stem)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
  return stem;
}

std::string_view WithoutBom(std::string_view text) {
  if (text.substr(0, kBom.size()) == kBom) text.remove_prefix(kBom.size());
  return text;
}

}  // namespace berth
