// What berth's fuzz targets share: the rule that a parser may refuse any input cleanly, and a way
// to hand an input to the loaders that read only files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config_error.h"

namespace berth {

// Runs `load`; a ConfigError is the clean refusal bad input should get, so it passes. Anything
// else that escapes (another exception, a crash, a sanitizer report, a timeout, running out of
// memory) is a finding: libFuzzer stops and saves the input.
template <class Load>
void LoadOrRefuse(Load&& load) {
  try {
    load();
  } catch (const ConfigError&) {
  }
}

// The input as text, for the parsers that take text.
inline std::string InputText(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The path of a file that holds exactly the input, for the loaders that take a path (the CSV
// readers). One in-memory file (memfd), rewritten on every call: no disk, nothing left behind.
std::string InputFile(const uint8_t* data, size_t size);

}  // namespace berth
