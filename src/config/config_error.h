// The one exception type of the file adapters in src/config.
//
// Every load error is a ConfigError whose message points at the operator's input and says how
// to fix it: "FILE:LINE: FIELD.PATH: what is wrong; how to fix it". LINE is 1-based; it is left
// out only for whole-file checks (e.g. the cluster's cross-node invariants).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace berth {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Input quoted in a message, between `quote`s, cut after its first 60 bytes (at a character
// boundary) with its length when longer: an error names the bad value without echoing
// megabytes of it.
std::string Quoted(std::string_view text, char quote = '"');

}  // namespace berth
