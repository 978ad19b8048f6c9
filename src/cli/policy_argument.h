// A policy named on the command line: a built-in name or a policy file (YAML).
#pragma once

#include <string>
#include <vector>

#include "core/policy.h"

namespace berth {

// A built-in name (BuiltinPolicy), else a policy file (LoadPolicyFile) when the argument is an
// existing file or ends in .yaml / .yml. Throws ConfigError for an unknown name or an invalid
// file (every bad field listed).
Policy LoadPolicyArgument(const std::string& name_or_path);

// The policies of a comma-separated --policy list, each as LoadPolicyArgument; an empty list or
// entry, and two policies of one name (results are keyed by name), throw ConfigError.
std::vector<Policy> LoadPolicyList(const std::string& list);

}  // namespace berth
