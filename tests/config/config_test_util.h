// Helpers for the tests of the file loaders: checking a ConfigError's message and locating the
// line a test input should be blamed on.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <initializer_list>
#include <string>

#include "config/config_error.h"

namespace berth {

// 1-based line of the first occurrence of `marker` in `text` (which must contain it).
inline int LineOf(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  EXPECT_NE(at, std::string::npos) << "marker not in test input: " << marker;
  return 1 +
         static_cast<int>(std::count(text.begin(), text.begin() + std::min(at, text.size()), '\n'));
}

// Success when `load` throws a ConfigError whose message starts with `prefix` (e.g.
// "bad.yaml:12: ") and contains every one of `parts`.
template <typename Load>
::testing::AssertionResult ThrowsConfigError(Load load, const std::string& prefix,
                                             std::initializer_list<std::string> parts) {
  try {
    load();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    if (message.rfind(prefix, 0) != 0)
      return ::testing::AssertionFailure()
             << "message does not start with \"" << prefix << "\": " << message;
    for (const std::string& part : parts)
      if (message.find(part) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << part << "\": " << message;
    return ::testing::AssertionSuccess() << message;
  }
  return ::testing::AssertionFailure() << "no ConfigError thrown";
}

// Success when `load` throws a ConfigError that starts "SOURCE:LINE:COLUMN: " for this `line`
// (any column: a test's marker finds the line, not always the exact node) and contains every
// one of `parts`. For the YAML formats, whose messages carry a column.
template <typename Load>
::testing::AssertionResult ThrowsConfigErrorAtLine(Load load, const std::string& source, int line,
                                                   std::initializer_list<std::string> parts) {
  const std::string prefix = source + ":" + std::to_string(line) + ":";
  ::testing::AssertionResult result = ThrowsConfigError(load, prefix, parts);
  if (!result) return result;
  const std::string message = result.message();
  size_t end = prefix.size();
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  if (end == prefix.size() || message.compare(end, 2, ": ") != 0)
    return ::testing::AssertionFailure() << "no column after \"" << prefix << "\": " << message;
  return result;
}

// Writes `text` to a fresh file under the test temp directory and returns its path.
inline std::string WriteTempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

}  // namespace berth
