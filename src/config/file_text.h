// Reads a whole input file for the loaders of src/config.
#pragma once

#include <string>

namespace berth {

// The file's bytes; ConfigError "PATH: cannot read: REASON" when it cannot be read.
std::string ReadFileText(const std::string& path);

}  // namespace berth
