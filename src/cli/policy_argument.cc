#include "cli/policy_argument.h"

#include <filesystem>
#include <system_error>

#include "config/config_error.h"
#include "config/policy_file.h"

namespace berth {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Policy LoadPolicyArgument(const std::string& name_or_path) {
  Policy policy;
  if (BuiltinPolicy(name_or_path, &policy)) return policy;
  // Not a built-in name: a policy file when it exists or looks like one (a missing .yaml file
  // then reports that it cannot be read rather than that the name is unknown).
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec) || EndsWith(name_or_path, ".yaml") ||
      EndsWith(name_or_path, ".yml"))
    return LoadPolicyFile(name_or_path);
  std::string known;
  for (const std::string& n : BuiltinPolicyNames()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("--policy: unknown policy \"" + name_or_path +
                    "\"; built-in policies: " + known + "; or give a policy file (.yaml)");
}

}  // namespace berth
