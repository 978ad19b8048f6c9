// Loads a policy file (YAML; format in docs/policy-file.md): a named scheduling policy that
// starts from a built-in one (`base`, berth when not given) and overrides its plugin lists and
// knobs, each field given replacing the base's value whole.
//
// The file is checked whole before anything is returned: mistakes of form (a wrong type, an
// unknown field, an unknown QoS class) and every problem ValidatePolicy finds are collected and
// thrown as ONE ConfigError that lists them all, one per line, in file order, each
// "FILE:LINE: FIELD: what is wrong" ("FILE: FIELD: ..." for a problem no line of the file
// holds). A caller that keeps its current policy on error thus never applies half a file.
#pragma once

#include <string>

#include "core/policy.h"

namespace berth {

Policy LoadPolicyFile(const std::string& path);

// As LoadPolicyFile, for text already in memory; `source_name` stands for the file in messages.
Policy ParsePolicyYaml(const std::string& text, const std::string& source_name);

}  // namespace berth
