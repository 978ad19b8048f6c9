#include "server/job_listing.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace berth {
namespace {

using Json = nlohmann::json;

// `text` as a JSON string literal, appended. Plain ASCII, the common case, is copied byte by
// byte (a page lists 10,000 jobs, six strings each); anything else goes through the JSON
// library, which also turns bytes that are not UTF-8 into U+FFFD.
void AppendQuoted(const std::string& text, std::string* out) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    *out += Json(text).dump(-1, ' ', false, Json::error_handler_t::replace);
    return;
  }
  *out += '"';
  *out += text;
  *out += '"';
}

// A number as text: the shortest that reads back the same (std::to_chars), as much faster than
// printf's %.17g as a listing of 100,000 jobs notices.
template <typename Number>
void AppendNumber(Number value, std::string* out) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  out->append(text, ec == std::errc() ? end : text);
}

void AppendCell(const std::string& text, std::string* out) {
  for (const char c : text) {
    if (c == '\t' || c == '\n' || c == '\r' || c == '\\') {
      *out += '\\';
      *out += c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
    } else {
      *out += c;
    }
  }
}

// The job's GPU ids, from its placements' JSON; none when it has no placement.
Json GpuIds(const StoredJob& job) {
  if (job.placements.empty()) return Json::array();
  const Json placements = Json::parse(job.placements, nullptr, false);
  if (!placements.is_object()) return Json::array();
  Json ids = placements.value("gpuIds", Json::array());
  return ids.is_array() ? ids : Json::array();
}

}  // namespace

const char* const kJobListingHeader =
    "id\tname\tqueue\tuser\tstate\treason\texitCode\tsubmitted\tupdated\tgpus\n";

void AppendJobJson(const StoredJob& j, const std::string& reason, std::string* out) {
  *out += "{\"id\":";
  AppendNumber(j.id, out);
  *out += ",\"name\":";
  AppendQuoted(j.name, out);
  *out += ",\"queue\":";
  AppendQuoted(j.queue, out);
  *out += ",\"user\":";
  AppendQuoted(j.user, out);
  *out += ",\"state\":";
  AppendQuoted(j.state, out);
  *out += ",\"reason\":";
  AppendQuoted(reason, out);
  *out += ",\"exitCode\":";
  AppendNumber(j.exit_code, out);
  *out += ",\"submitted\":";
  AppendNumber(j.submitted, out);
  *out += ",\"updated\":";
  AppendNumber(j.updated, out);
  *out += ",\"gpus\":";
  *out += GpuIds(j).dump(-1, ' ', false, Json::error_handler_t::replace);
  *out += '}';
}

void AppendJobLine(const StoredJob& j, const std::string& reason, std::string* out) {
  AppendNumber(j.id, out);
  for (const std::string* text : {&j.name, &j.queue, &j.user, &j.state, &reason}) {
    *out += '\t';
    AppendCell(*text, out);
  }
  *out += '\t';
  AppendNumber(j.exit_code, out);
  *out += '\t';
  AppendNumber(j.submitted, out);
  *out += '\t';
  AppendNumber(j.updated, out);
  *out += '\t';
  bool first = true;
  for (const Json& id : GpuIds(j)) {
    if (!id.is_string()) continue;
    if (!first) *out += ',';
    first = false;
    // A comma inside an id (node names may hold one) is written \, so the list splits right.
    const std::string text = id.get<std::string>();
    for (size_t start = 0; start <= text.size();) {
      const size_t comma = std::min(text.find(',', start), text.size());
      AppendCell(text.substr(start, comma - start), out);
      if (comma < text.size()) *out += "\\,";
      start = comma + 1;
    }
  }
  *out += '\n';
}

bool SplitJobLine(std::string_view line, std::vector<std::string_view>* cells) {
  cells->clear();
  for (size_t start = 0; start <= line.size();) {
    const size_t tab = std::min(line.find('\t', start), line.size());
    cells->push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
  return cells->size() == kJobColumnCount;
}

std::string UnescapedCell(std::string_view cell) {
  std::string out;
  out.reserve(cell.size());
  for (size_t i = 0; i < cell.size(); ++i) {
    if (cell[i] != '\\' || i + 1 == cell.size()) {
      out += cell[i];
      continue;
    }
    const char c = cell[++i];
    out += c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c;
  }
  return out;
}

std::vector<std::string> GpuIdsCell(std::string_view cell) {
  std::vector<std::string> ids;
  size_t start = 0;
  for (size_t i = 0; i < cell.size(); ++i) {
    if (cell[i] == '\\') {
      ++i;  // an escaped byte, a comma included
    } else if (cell[i] == ',') {
      ids.push_back(UnescapedCell(cell.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (start < cell.size()) ids.push_back(UnescapedCell(cell.substr(start)));
  return ids;
}

}  // namespace berth
