// --limit NAME=VALUE: the bounds of config/limits.h, raised or lowered for one run.
#include <charconv>
#include <cmath>
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

namespace {

// "" when `text` is a decimal integer from min to max (CLI11's own conversion takes "0x10" and
// " 7"), else why not; `raise` follows a value past max.
std::string CheckInteger(const std::string& text, int64_t min, int64_t max,
                         const std::string& raise) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return "Value " + text + " is not an integer";
  if (value < min || value > max)
    return "Value " + text + " not in range " + std::to_string(min) + " to " + std::to_string(max) +
           (value > max ? raise : "");
  return "";
}

}  // namespace

CLI::Validator UpToLimit(int64_t min, int64_t limits::Limits::*bound) {
  return CLI::Validator(
      [min, bound](std::string& text) {
        return CheckInteger(text, min, limits::Get().*bound, limits::RaiseHint(bound));
      },
      "INT");
}

CLI::Validator IntegerIn(int64_t min, int64_t max) {
  return CLI::Validator([min, max](std::string& text) { return CheckInteger(text, min, max, ""); },
                        "INT");
}

CLI::Validator DecimalNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) return "";
        return "Value " + text + " is not a decimal number (like 0.5 or 1e3)";
      },
      "FLOAT");
}

CLI::Validator NumberIn(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          return "Value " + text + " is not a decimal number (like 0.5 or 1e3)";
        // from_chars reads "nan" and "inf" too, which pass any comparison or fail it.
        if (std::isfinite(value) && value >= min && value <= max) return "";
        return "Value " + text + " is not from " + NumberText(min) + " to " + NumberText(max);
      },
      "FLOAT in [" + NumberText(min) + " - " + NumberText(max) + "]");
}

std::string NumberText(double value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return std::string(text, ec == std::errc() ? end : text);
}

CLI::Validator NonEmptyPath() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "an empty path; name a file, or leave the option out for the default"
                            : "";
      },
      "PATH");
}

}  // namespace berth
