// --limit NAME=VALUE: the bounds of config/limits.h, raised or lowered for one run.
#include <charconv>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/limits.h"

namespace berth {

void AddLimitOption(CLI::App& app) {
  // The app's own options are processed after all parsing and before any subcommand's options
  // are checked or its callback runs, so the bounds are set before they are read.
  app.add_option_function<std::vector<std::string>>(
         "--limit", [](const std::vector<std::string>& all) { limits::SetFromFlags(all); },
         "Raise or lower a bound on the input, e.g. --limit nodes=200000 (repeatable; "
         "docs/cluster-file.md, Bounds). Names: " +
             limits::Names())
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
}

CLI::Validator UpToLimit(int64_t min, int64_t limits::Limits::*bound) {
  return CLI::Validator(
      [min, bound](std::string& text) -> std::string {
        const int64_t max = limits::Get().*bound;
        int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          return "Value " + text + " is not an integer";
        if (value < min || value > max)
          return "Value " + text + " not in range " + std::to_string(min) + " to " +
                 std::to_string(max) + (value > max ? limits::RaiseHint(bound) : "");
        return "";
      },
      "INT");
}

}  // namespace berth
