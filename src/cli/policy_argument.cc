#include "cli/policy_argument.h"

#include "config/config_error.h"

namespace berth {

Policy LoadPolicyArgument(const std::string& name_or_path) {
  Policy policy;
  if (BuiltinPolicy(name_or_path, &policy)) return policy;
  std::string known;
  for (const std::string& n : BuiltinPolicyNames()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("--policy: unknown policy \"" + name_or_path + "\"; built-in policies: " +
                    known);
}

}  // namespace berth
