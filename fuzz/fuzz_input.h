// What berth's fuzz targets share: the rule that a parser may refuse any input cleanly, and a way
// to hand an input to the loaders that read only files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/config_error.h"

namespace berth {

// Requires a refusal's message to start with "NAME:LINE:" (LINE digits), NAME being the input's
// name as given to the parser, and with "NAME:LINE:COLUMN:" when NAME ends in ".yaml" (YAML
// messages carry the column; CSV ones do not); otherwise prints the message with the rule it breaks
// and aborts, which libFuzzer reports as a finding.
void RequireWhere(const std::string& name, const std::string& message);

// Runs `load`, which parses an input named `name`. A ConfigError is the clean refusal bad input
// should get, so it passes, but only if it says where (issue 10: every refusal names the file,
// the line and the field), which RequireWhere checks. Anything else that escapes (another
// exception, a crash, a sanitizer report, a timeout, running out of memory) is a finding:
// libFuzzer stops and saves the input.
template <class Load>
void LoadOrRefuse(const std::string& name, Load&& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    RequireWhere(name, e.what());
  }
}

// The input as text, for the parsers that take text.
inline std::string InputText(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The path of a file that holds exactly the input, for the loaders that take a path (the CSV
// readers). One in-memory file (memfd), rewritten on every call: no disk, nothing left behind.
std::string InputFile(const uint8_t* data, size_t size);

// The input as named sections, in order: each a line "== NAME" followed by its contents up to the
// next such line. Text before the first one is ignored.
std::vector<std::pair<std::string, std::string>> InputSections(const uint8_t* data, size_t size);

// The root of a directory tree that holds the input's files, for the readers of /sys and
// cgroupfs trees: each section (InputSections) is a file, named by a relative PATH of letters,
// digits and . _ , - / (no ".."); sections with other names are ignored. The tree is rebuilt on
// every call (under /dev/shm: no disk) and removed at exit.
std::string InputTree(const uint8_t* data, size_t size);

// The contents of the file at `path` ("" when it cannot be read), e.g. one of an InputTree.
std::string FileContents(const std::string& path);

// A finding that is no crash (a broken promise of the code under test): prints `what` and
// aborts, which libFuzzer reports with the input.
[[noreturn]] void Finding(const std::string& what);

}  // namespace berth
