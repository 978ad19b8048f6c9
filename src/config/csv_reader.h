// Reads a CSV trace or node list row by row, with errors that name FILE:LINE and the column:
// "traces/x.csv:12: column 'gpu': expected an integer from 0 to 64, got 'x'".
//
// Plain comma-separated fields (the traces berth reads have no quoting); a trailing '\r' (CRLF
// line ends) and a leading byte order mark are ignored, empty lines are skipped, and the text
// must be UTF-8. Throws ConfigError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/limits.h"

namespace berth {

class CsvReader {
 public:
  // Reads `path` and checks that its header starts with `required` columns, in order.
  CsvReader(const std::string& path, const std::vector<std::string>& required);

  // Moves to the next data row; false at the end.
  bool Next();

  const std::vector<std::string>& header() const { return header_; }
  size_t field_count() const { return fields_.size(); }
  std::string_view field(size_t column) const;  // "" when the row is shorter
  int64_t Int(size_t column, int64_t min, int64_t max) const;
  // At most the bound in force; above it, the message names the bound's --limit.
  int64_t Int(size_t column, int64_t min, int64_t limits::Limits::*bound) const;
  // The text of `column` as a name (of a node, pod, model, user): no control character, at
  // most the name-length bound, and not empty when `required`.
  std::string Name(size_t column, bool required = true) const;
  // The same checks for `name`, a part of `column` (one model of a |-separated list).
  void CheckName(size_t column, std::string_view name) const;
  // A finite number from `min` to `max` ("nan", "inf" and overflows are refused).
  double Number(size_t column, double min, double max) const;
  int line() const { return line_; }  // of the current row, 1-based
  // "PATH:LINE: " for messages about the current row.
  std::string where() const;
  // Throws unless the row has exactly `count` fields.
  void ExpectFields(size_t count) const;
  // Throws "PATH:LINE: column 'NAME': expected EXPECTED, got 'FIELD'HINT".
  [[noreturn]] void Fail(size_t column, const std::string& expected,
                         const std::string& hint = "") const;

 private:
  std::string path_;
  std::string text_;
  std::vector<std::string> header_;
  size_t offset_ = 0;
  int line_ = 0;
  std::vector<std::string_view> fields_;
};

}  // namespace berth
