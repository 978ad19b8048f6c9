// Typed access to a YAML document that reports every mistake against the operator's file.
//
// Each accessor returns the value or throws ConfigError "SOURCE:LINE:COLUMN: PATH: what is wrong",
// with LINE and COLUMN 1-based (as compilers print them) and PATH naming the field as in
// "nodeShapes.dgx-a100.sockets[0].cpus". Shared by the YAML loaders of src/config; not used outside
// it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "config/limits.h"

namespace berth {

// The items with `separator` between them: "a, b, c".
std::string Join(const std::vector<std::string>& items, const std::string& separator = ", ");

// `path` extended by a map key or a sequence index.
std::string FieldPath(const std::string& path, const std::string& key);
std::string IndexPath(const std::string& path, size_t index);

struct YamlEntry {
  std::string key;
  YAML::Node key_node;  // carries the key's line
  YAML::Node value;
};

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }

  // Parses a whole document; a syntax error becomes a ConfigError at its line. The text must be
  // UTF-8 and hold one document within the yaml-depth and yaml-nodes bounds (limits.h).
  YAML::Node Parse(const std::string& text) const;

  // Throws a ConfigError at the line and column of `at` (none when `at` has no position).
  [[noreturn]] void Fail(const YAML::Node& at, const std::string& path,
                         const std::string& what) const;

  // Checks that `node` is a map whose keys are unique and all in `known`.
  void CheckFields(const YAML::Node& node, const std::string& path,
                   std::vector<std::string> known) const;
  // The entries of a map with free-form keys (names), in document order; keys must be unique,
  // and names no longer than the name-length bound unless `keys_are_names` is false (a map of
  // fields, whose keys CheckFields compares with the format's own).
  std::vector<YamlEntry> Entries(const YAML::Node& node, const std::string& path,
                                 bool keys_are_names = true) const;
  // `node` itself, after checking that it is a sequence (a map).
  const YAML::Node& Sequence(const YAML::Node& node, const std::string& path) const;
  const YAML::Node& Map(const YAML::Node& node, const std::string& path) const;
  // map[key]; a missing key, or a `map` that is none, is an error at the map's line.
  YAML::Node Required(const YAML::Node& map, const std::string& path, const char* key) const;

  std::string String(const YAML::Node& node, const std::string& path) const;
  // A non-empty string of at most name-length characters (limits.h).
  std::string Name(const YAML::Node& node, const std::string& path) const;
  // "SOURCE:LINE:COLUMN" of `node`, for messages made after parsing.
  std::string Where(const YAML::Node& node) const;
  int64_t Int(const YAML::Node& node, const std::string& path,
              int64_t min = std::numeric_limits<int64_t>::min(),
              int64_t max = std::numeric_limits<int64_t>::max()) const;
  // At most the bound in force; above it, the message names the bound's --limit.
  int64_t Int(const YAML::Node& node, const std::string& path, int64_t min,
              int64_t limits::Limits::*bound) const;
  double NonNegativeNumber(const YAML::Node& node, const std::string& path) const;
  // Any finite number, negative too (for fields whose range is checked elsewhere).
  double Number(const YAML::Node& node, const std::string& path) const;
  // YAML 1.1's reading, as yaml-cpp's: yes/no/on/off and their quoted forms too.
  bool Bool(const YAML::Node& node, const std::string& path) const;
  // Only true or false (YAML 1.2's core: also True, TRUE, False, FALSE), unquoted: what JSON
  // means by a boolean, so that the string "no" is never read as false.
  bool StrictBool(const YAML::Node& node, const std::string& path) const;

 private:
  std::string source_;
};

}  // namespace berth
