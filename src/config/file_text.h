// Reads a whole input file for the loaders of src/config.
#pragma once

#include <cstdint>
#include <string>

namespace berth {

// The file's bytes; ConfigError "PATH: cannot read: REASON" when it cannot be read, and
// "PATH: larger than N bytes" when it holds more than `max_bytes` (read no further).
std::string ReadFileText(const std::string& path, uint64_t max_bytes = UINT64_MAX);

}  // namespace berth
