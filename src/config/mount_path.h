// Paths of a job's volumes and of the server's --allow-mount prefixes. Both sides are compared
// component-wise after lexical normalization, so that "/data" holds "/data/x" but not
// "/database", and no spelling ("/data//x", "/data/./x") slips past a prefix.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace berth {

constexpr size_t kMaxMountPath = 4096;  // PATH_MAX

// `path` lexically normal ("//" and "/./" collapsed, no trailing "/"), or "" with `*problem`
// saying what keeps it from being a mount path and how to fix it, worded to follow "the path"
// ("is not absolute; ..."). Refused: a relative path; a ".." component (through a symbolic
// link it could climb anywhere, so it is refused, not resolved); a control character; more than
// kMaxMountPath bytes.
std::string NormalMountPath(std::string_view path, std::string* problem);

// Whether the normal path `path` is `prefix` or lies under it.
bool PathUnder(std::string_view path, std::string_view prefix);

}  // namespace berth
