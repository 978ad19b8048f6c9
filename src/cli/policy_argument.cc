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

std::vector<Policy> LoadPolicyList(const std::string& list) {
  std::vector<Policy> policies;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma - start);
    if (name.empty())
      throw ConfigError(
          "--policy: expected policy names separated by commas (e.g. fgd,berth), "
          "got \"" +
          list + "\"");
    policies.push_back(LoadPolicyArgument(name));
    for (size_t i = 0; i + 1 < policies.size(); ++i)
      if (policies[i].name == policies.back().name)
        throw ConfigError("--policy: two policies are named \"" + policies.back().name +
                          "\"; give each policy once");
    if (comma == std::string::npos) return policies;
    start = comma + 1;
  }
}

}  // namespace berth
