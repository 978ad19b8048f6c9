#include "config/csv_reader.h"

#include <charconv>
#include <cstdio>

#include "config/config_error.h"
#include "config/file_text.h"
#include "config/limits.h"

namespace berth {
namespace {

// The fields of `line`; false when it has more than the csv-columns bound.
bool SplitFields(std::string_view line, std::vector<std::string_view>* out) {
  out->clear();
  const auto most = static_cast<size_t>(limits::Get().csv_columns);
  while (out->size() < most) {
    const size_t at = line.find(',');
    out->push_back(line.substr(0, at));
    if (at == std::string_view::npos) return true;
    line.remove_prefix(at + 1);
  }
  return false;
}

std::string FormatNumber(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.15g", v);
  return buffer;
}

}  // namespace

CsvReader::CsvReader(const std::string& path, const std::vector<std::string>& required)
    : path_(path), text_(ReadFileText(path)) {
  CheckText(text_, path);
  // A byte order mark (spreadsheets write one) is not part of the first column's name.
  offset_ = text_.size() - WithoutBom(text_).size();
  const auto joined = [](const auto& columns) {
    std::string out;
    for (const auto& c : columns) out += (out.empty() ? "" : ",") + std::string(c);
    return out;
  };
  if (!Next())
    throw ConfigError(path + ":1: the file is empty; expected the header " + joined(required));
  for (std::string_view f : fields_) header_.emplace_back(f);
  bool ok = header_.size() >= required.size();
  for (size_t i = 0; ok && i < required.size(); ++i) ok = header_[i] == required[i];
  if (!ok)
    throw ConfigError(where() + "expected a header starting with \"" + joined(required) +
                      "\", got " + Quoted(joined(header_)));
}

bool CsvReader::Next() {
  while (offset_ < text_.size()) {
    const size_t end = text_.find('\n', offset_);
    std::string_view line(text_.data() + offset_,
                          (end == std::string::npos ? text_.size() : end) - offset_);
    offset_ = end == std::string::npos ? text_.size() : end + 1;
    ++line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!SplitFields(line, &fields_))
      throw ConfigError(where() + limits::OverLimit(&limits::Limits::csv_columns, "columns"));
    return true;
  }
  return false;
}

std::string_view CsvReader::field(size_t column) const {
  return column < fields_.size() ? fields_[column] : std::string_view();
}

std::string CsvReader::where() const { return path_ + ":" + std::to_string(line_) + ": "; }

void CsvReader::ExpectFields(size_t count) const {
  if (fields_.size() != count)
    throw ConfigError(where() + "expected " + std::to_string(count) + " columns, got " +
                      std::to_string(fields_.size()));
}

void CsvReader::Fail(size_t column, const std::string& expected, const std::string& hint) const {
  const std::string name = column < header_.size() ? header_[column] : std::to_string(column + 1);
  throw ConfigError(where() + "column " + Quoted(name, '\'') + ": expected " + expected + ", got " +
                    Quoted(field(column), '\'') + hint);
}

int64_t CsvReader::Int(size_t column, int64_t min, int64_t max) const {
  const std::string_view f = field(column);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() || value < min || value > max)
    Fail(column, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return value;
}

int64_t CsvReader::Int(size_t column, int64_t min, int64_t limits::Limits::*bound) const {
  const int64_t max = limits::Get().*bound;
  const std::string_view f = field(column);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
  if (!f.empty() && ec == std::errc() && end == f.data() + f.size() && value > max)
    Fail(column, "an integer from " + std::to_string(min) + " to " + std::to_string(max),
         limits::RaiseHint(bound));
  return Int(column, min, max);
}

std::string CsvReader::Name(size_t column, bool required) const {
  const std::string_view f = field(column);
  if (f.empty() && required) Fail(column, "a name");
  CheckName(column, f);
  return std::string(f);
}

void CsvReader::CheckName(size_t column, std::string_view name) const {
  const std::string header = column < header_.size() ? header_[column] : std::to_string(column + 1);
  const std::string at = where() + "column " + Quoted(header, '\'') + ": ";
  if (const std::string problem = NameProblem(name); !problem.empty())
    throw ConfigError(at + problem);
  if (name.size() > static_cast<size_t>(limits::Get().name_length))
    throw ConfigError(at + "a name " +
                      limits::OverLimit(&limits::Limits::name_length, "characters long"));
}

double CsvReader::Number(size_t column, double min, double max) const {
  const std::string_view f = field(column);
  double value = 0;
  // The range check also refuses "nan" and "inf", which from_chars reads.
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !(value >= min) ||
      !(value <= max))
    Fail(column, "a number from " + FormatNumber(min) + " to " + FormatNumber(max));
  return value;
}

}  // namespace berth
