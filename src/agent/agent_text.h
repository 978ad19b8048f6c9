// Small text helpers shared by the node agent's parsers (src/agent): bounded line splitting,
// trimming, strict integers, and reading small files (sysfs, procfs, cgroupfs).
//
// Every parser reports bad input as ConfigError "SOURCE:LINE: what is wrong; how to fix it",
// as the file loaders of src/config do, so the agent's logs read like berth's other errors.
#pragma once

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_error.h"

namespace berth::agent_text {

// Removes ASCII spaces, tabs, carriage returns and line feeds from both ends.
inline std::string_view Trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// The lines of `text` (without '\n'), after checking the bounds: at most `max_bytes` in all,
// `max_lines` lines and `max_line_bytes` per line. A command's or a file's output past them is
// refused whole, since a truncated table would be misread.
inline std::vector<std::string_view> SplitLines(std::string_view text, const std::string& source,
                                                size_t max_bytes, size_t max_lines,
                                                size_t max_line_bytes) {
  if (text.size() > max_bytes)
    throw ConfigError(source + ": " + std::to_string(text.size()) + " bytes, more than the " +
                      std::to_string(max_bytes) + " this reader takes; is it the right input?");
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    if (lines.size() == max_lines)
      throw ConfigError(source + ":" + std::to_string(lines.size() + 1) + ": more than " +
                        std::to_string(max_lines) + " lines; is it the right input?");
    if (line.size() > max_line_bytes)
      throw ConfigError(source + ":" + std::to_string(lines.size() + 1) + ": a line of " +
                        std::to_string(line.size()) + " bytes, more than " +
                        std::to_string(max_line_bytes) + "; is it the right input?");
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// Splits `line` at every `separator` (empty fields kept).
inline std::vector<std::string_view> Split(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  while (true) {
    const size_t at = line.find(separator);
    fields.push_back(line.substr(0, at));
    if (at == std::string_view::npos) return fields;
    line.remove_prefix(at + 1);
  }
}

// The whole of `text` as an integer from `min` to `max`; nullopt otherwise.
inline std::optional<int64_t> ToInt(std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min ||
      value > max)
    return std::nullopt;
  return value;
}

// "SOURCE:LINE: " (LINE 1-based), the head of a message about one line.
inline std::string At(const std::string& source, size_t line) {
  return source + ":" + std::to_string(line) + ": ";
}

// The contents of a small file (sysfs, procfs, cgroupfs: a few KiB), or nullopt when it does
// not exist. Throws ConfigError when it exists but cannot be read or holds more than
// `max_bytes` (sysfs files report a size of 4096 whatever they hold, so the size is counted
// while reading).
inline std::optional<std::string> ReadSmallFile(const std::string& path,
                                                size_t max_bytes = 1 << 20) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": cannot read: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read it");
  std::string text;
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw ConfigError(path + ": more than " + std::to_string(max_bytes) +
                        " bytes; is it the right file?");
  }
  return text;
}

}  // namespace berth::agent_text
