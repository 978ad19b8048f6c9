#include "config/yaml_reader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/config_error.h"
#include "config/file_text.h"
#include "config/limits.h"

namespace berth {
namespace {

// What the operator wrote instead of what was expected, for messages.
std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  return Quoted(node.Scalar());
}

[[noreturn]] void Throw(const std::string& source, const YAML::Mark& mark, const std::string& path,
                        const std::string& what) {
  std::string message = source;
  if (!mark.is_null())
    message += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  message += ": ";
  if (!path.empty()) message += path + ": ";
  throw ConfigError(message + what);
}

// A quoted scalar ("1", '1'): text, which a number field does not take, so that JSON's
// {"gpus": "1"} is refused as JSON readers would refuse it.
bool QuotedScalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "!"; }

// What a number field got instead, and the fix when it is only the quotes.
std::string NotANumber(const YAML::Node& node) {
  return QuotedScalar(node) ? "the string " + Describe(node) + "; write it without quotes"
                            : Describe(node);
}

// A scalar that is a whole finite number ("3", "-0.5", "1e3"; not ".inf" or "3 GiB", nor "3"
// quoted).
bool ParseNumber(const YAML::Node& node, double* value) {
  if (!node.IsScalar() || QuotedScalar(node)) return false;
  const std::string& text = node.Scalar();
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty() &&
         std::isfinite(*value);
}

// Fails when `node` nests deeper than the yaml-depth bound or, counting each alias as a copy
// of what it names, holds more than yaml-nodes nodes; `*visited` counts the nodes seen so far.
void CheckSize(const std::string& source, const YAML::Node& node, int depth, int64_t* visited) {
  if (++*visited > limits::Get().yaml_nodes)
    Throw(source, node.Mark(), "",
          "the document, with its aliases expanded, has " +
              limits::OverLimit(&limits::Limits::yaml_nodes, "YAML nodes") +
              "; write fewer aliases of large entries");
  if (depth > limits::Get().yaml_depth)
    Throw(source, node.Mark(), "",
          "nested " + limits::OverLimit(&limits::Limits::yaml_depth, "levels deep"));
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) CheckSize(source, item, depth + 1, visited);
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      CheckSize(source, kv.first, depth + 1, visited);
      CheckSize(source, kv.second, depth + 1, visited);
    }
  }
}

// Where the last document seen starts, and how many nodes were read, alias expansion aside.
// It reads before any node tree is built, so that the nodes bound stops a large document
// before yaml-cpp builds it. yaml-cpp 0.7's LoadAll loops forever, allocating, on some
// malformed input such as "," (yaml-cpp issue 1040): documents are counted with this, one
// HandleNextDocument call at a time, instead.
class DocumentStart : public YAML::EventHandler {
 public:
  DocumentStart(const std::string& source, const std::string& text)
      : source_(source), text_(text) {}
  YAML::Mark mark = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& at) override { mark = at; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& at, YAML::anchor_t) override { Count(at); }
  void OnAlias(const YAML::Mark& at, YAML::anchor_t) override { Count(at); }
  void OnScalar(const YAML::Mark& at, const std::string& tag, YAML::anchor_t,
                const std::string&) override {
    Count(at);
    CheckTag(at, tag);
    // yaml-cpp ends a quoted scalar that is never closed at the end of the file, taking every
    // line after it into the value; the error would surface later as something else.
    if (at.pos >= 0 && static_cast<size_t>(at.pos) < text_.size() && !QuoteCloses(at.pos))
      Throw(source_, at, "",
            std::string("the quoted value that starts here has no closing ") + text_[at.pos] +
                "; close it");
  }
  void OnSequenceStart(const YAML::Mark& at, const std::string& tag, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(at);
    CheckTag(at, tag);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& at, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(at);
    CheckTag(at, tag);
  }
  void OnMapEnd() override {}

 private:
  void Count(const YAML::Mark& at) {
    if (++nodes_ > limits::Get().yaml_nodes)
      Throw(source_, at, "",
            "the document has " + limits::OverLimit(&limits::Limits::yaml_nodes, "YAML nodes"));
  }
  // yaml-cpp keeps a tag but reads the value as if it had none ("!!null 8" is 8), so a tag
  // would silently mean nothing. "?" and "!" are its marks for an untagged plain and quoted value.
  void CheckTag(const YAML::Mark& at, const std::string& tag) const {
    if (!tag.empty() && tag != "?" && tag != "!")
      Throw(source_, at, "",
            "a YAML tag (" + Quoted(tag) +
                "); berth reads no tags, remove it (quote the value "
                "to make it a string)");
  }
  // Whether the quote at `pos` (if one is there) is closed before the end of the text.
  bool QuoteCloses(size_t pos) const {
    const char quote = text_[pos];
    if (quote != '"' && quote != '\'') return true;  // a plain or block scalar
    for (size_t i = pos + 1; i < text_.size(); ++i) {
      if (quote == '"' && text_[i] == '\\') {
        ++i;  // an escape: the next character is part of the value
      } else if (text_[i] == quote) {
        if (quote == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;  // '' is a quote inside a single-quoted value
          continue;
        }
        return true;
      }
    }
    return false;
  }

  const std::string& source_;
  const std::string& text_;
  int64_t nodes_ = 0;
};
}  // namespace

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::string FieldPath(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string IndexPath(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

namespace {

// JSON writes a character past U+FFFF as two escapes of its UTF-16 halves (backslash u d83d,
// backslash u de80: what Python's json.dumps does by default), which yaml-cpp refuses; YAML's
// own 8-digit escape (backslash U 0001f680) reads the same. Only in a text that is JSON, where a
// backslash is always an escape inside a string (in YAML a plain scalar may hold one).
// Positions after such a pair, on its line, move back 2 columns.
std::string JoinedSurrogateEscapes(std::string text) {
  if (text.find("\\u") == std::string::npos || !nlohmann::json::accept(text)) return text;
  const auto hex = [&](size_t at, unsigned* value) {
    if (at + 4 > text.size()) return false;
    *value = 0;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + 4, *value, 16);
    return ec == std::errc() && end == text.data() + at + 4;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned high = 0, low = 0;
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'u' && hex(i + 2, &high) &&
        high >= 0xD800 && high <= 0xDBFF && i + 11 < text.size() && text[i + 6] == '\\' &&
        text[i + 7] == 'u' && hex(i + 8, &low) && low >= 0xDC00 && low <= 0xDFFF) {
      char escape[16];
      std::snprintf(escape, sizeof escape, "\\U%08x",
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00));
      out += escape;
      i += 11;
      continue;
    }
    out += text[i];
    if (text[i] == '\\' && i + 1 < text.size()) out += text[++i];  // "\\" is no escape's start
  }
  return out;
}

}  // namespace

YAML::Node YamlReader::Parse(const std::string& file_text) const {
  CheckText(file_text, source_);
  // Without the byte order mark, positions in the text are the positions yaml-cpp reports.
  const std::string text = JoinedSurrogateEscapes(std::string(WithoutBom(file_text)));
  // yaml-cpp would take a second one as part of the first key, or of the text after it.
  if (WithoutBom(text).size() != text.size())
    Throw(source_, YAML::Mark(), "",
          "a second byte order mark (bytes EF BB BF); save the file with one at most");
  YAML::Node root;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStart first(source_, text), second(source_, text);
    // A second document would be ignored, unknown fields and all.
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second))
      Throw(source_, second.mark, "",
            second.mark.pos == first.mark.pos
                // No progress: the stuck parser of the bug above, on a stray ',' and the like.
                ? "YAML syntax error: nothing can be read from here; check for a stray , ] or }"
                : "a second YAML document (after \"---\" or \"...\"); berth reads one document a "
                  "file, remove the separator or split the file");
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard, far deeper than ours; its message says only "bad file".
    Throw(source_, e.mark, "",
          "nested " + limits::OverLimit(&limits::Limits::yaml_depth, "levels deep"));
  } catch (const YAML::Exception& e) {
    Throw(source_, e.mark, "", "YAML syntax error: " + e.msg);
  }
  // An empty file (or only comments) has no document and no line to blame but the first.
  if (root.IsNull() && root.Mark().is_null())
    Throw(source_, YAML::Mark(), "", "the file holds no YAML document; expected a map of fields");
  int64_t visited = 0;
  CheckSize(source_, root, 0, &visited);
  return root;
}

void YamlReader::Fail(const YAML::Node& at, const std::string& path,
                      const std::string& what) const {
  // An undefined node (a missing key) has no position of its own.
  Throw(source_, at.IsDefined() ? at.Mark() : YAML::Mark::null_mark(), path, what);
}

void YamlReader::CheckFields(const YAML::Node& node, const std::string& path,
                             std::vector<std::string> names) const {
  std::sort(names.begin(), names.end());
  if (!node.IsMap())
    Fail(node, path, "expected a map with fields " + Join(names) + ", got " + Describe(node));
  for (const YamlEntry& entry : Entries(node, path, false))
    if (!std::binary_search(names.begin(), names.end(), entry.key))
      Fail(entry.key_node, path,
           "unknown field " + Quoted(entry.key) + "; known fields: " + Join(names));
}

std::vector<YamlEntry> YamlReader::Entries(const YAML::Node& node, const std::string& path,
                                           bool keys_are_names) const {
  if (!node.IsMap()) Fail(node, path, "expected a map, got " + Describe(node));
  std::vector<YamlEntry> entries;
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) Fail(kv.first, path, "expected a name as the key");
    const std::string& key = kv.first.Scalar();
    if (keys_are_names && key.empty()) Fail(kv.first, path, "expected a name as the key, got \"\"");
    if (const std::string problem = keys_are_names ? NameProblem(key) : ""; !problem.empty())
      Fail(kv.first, path, problem);
    if (keys_are_names && key.size() > static_cast<size_t>(limits::Get().name_length))
      Fail(kv.first, path,
           "a key of " + std::to_string(key.size()) + " characters, " +
               limits::OverLimit(&limits::Limits::name_length, "characters") + "; shorten it");
    // yaml-cpp keeps duplicate keys and lookups see only the first: refuse them.
    if (!seen.insert(key).second) Fail(kv.first, path, "\"" + key + "\" is given twice");
    entries.push_back({key, kv.first, kv.second});
  }
  return entries;
}

const YAML::Node& YamlReader::Sequence(const YAML::Node& node, const std::string& path) const {
  if (!node.IsSequence()) Fail(node, path, "expected a list, got " + Describe(node));
  return node;
}

const YAML::Node& YamlReader::Map(const YAML::Node& node, const std::string& path) const {
  if (!node.IsMap()) Fail(node, path, "expected a map, got " + Describe(node));
  return node;
}

YAML::Node YamlReader::Required(const YAML::Node& map, const std::string& path,
                                const char* key) const {
  YAML::Node value = Map(map, path)[key];
  if (!value) Fail(map, path, std::string("missing required field \"") + key + "\"");
  return value;
}

std::string YamlReader::String(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) Fail(node, path, "expected a string, got " + Describe(node));
  return node.Scalar();
}

std::string YamlReader::Name(const YAML::Node& node, const std::string& path) const {
  std::string name = String(node, path);
  if (name.empty()) Fail(node, path, "expected a name, got nothing");
  if (const std::string problem = NameProblem(name); !problem.empty()) Fail(node, path, problem);
  if (name.size() > static_cast<size_t>(limits::Get().name_length))
    Fail(node, path,
         "a name of " + std::to_string(name.size()) + " characters, " +
             limits::OverLimit(&limits::Limits::name_length, "characters") + "; shorten it");
  return name;
}

std::string YamlReader::Where(const YAML::Node& node) const {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return source_;
  return source_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

int64_t YamlReader::Int(const YAML::Node& node, const std::string& path, int64_t min,
                        int64_t limits::Limits::*bound) const {
  const int64_t max = limits::Get().*bound;
  int64_t value = 0;
  if (node.IsScalar() && !QuotedScalar(node)) {
    const std::string& text = node.Scalar();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty() && value > max)
      Fail(node, path,
           "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
               ", got " + Describe(node) + limits::RaiseHint(bound));
  }
  return Int(node, path, min, max);
}

int64_t YamlReader::Int(const YAML::Node& node, const std::string& path, int64_t min,
                        int64_t max) const {
  int64_t value = 0;
  if (node.IsScalar() && !QuotedScalar(node)) {
    const std::string& text = node.Scalar();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty() && value >= min &&
        value <= max)
      return value;
  }
  std::string range;
  if (max != std::numeric_limits<int64_t>::max())
    range = " from " + std::to_string(min) + " to " + std::to_string(max);
  else if (min != std::numeric_limits<int64_t>::min())
    range = " >= " + std::to_string(min);
  Fail(node, path, "expected an integer" + range + ", got " + NotANumber(node));
}

double YamlReader::NonNegativeNumber(const YAML::Node& node, const std::string& path) const {
  double value = 0;
  if (ParseNumber(node, &value) && value >= 0) return value;
  Fail(node, path, "expected a number >= 0, got " + NotANumber(node));
}

double YamlReader::Number(const YAML::Node& node, const std::string& path) const {
  double value = 0;
  if (ParseNumber(node, &value)) return value;
  Fail(node, path, "expected a number, got " + NotANumber(node));
}

bool YamlReader::StrictBool(const YAML::Node& node, const std::string& path) const {
  if (node.IsScalar() && !QuotedScalar(node)) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  Fail(node, path, "expected true or false, got " + Describe(node));
}

bool YamlReader::Bool(const YAML::Node& node, const std::string& path) const {
  bool value = false;
  if (node.IsScalar() && YAML::convert<bool>::decode(node, value)) return value;
  Fail(node, path, "expected true or false, got " + Describe(node));
}

}  // namespace berth
