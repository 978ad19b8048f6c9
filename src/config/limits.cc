#include "config/limits.h"

namespace berth::limits {

std::string OverLimit(int64_t limit, const std::string& things) {
  return "more than the limit of " + std::to_string(limit) + " " + things +
         " (see docs/cluster-file.md, Bounds)";
}

}  // namespace berth::limits
