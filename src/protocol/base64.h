// Base64 (RFC 4648, the standard alphabet, padded), for bytes that must travel inside JSON: a
// container's output that is not UTF-8, a kubeconfig's certificate data.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace berth {

std::string Base64Encode(std::string_view bytes);
// None unless `text` is whole groups of four characters of the alphabet, padded with '=' at its
// end only and with no bits left over; spaces and line breaks are skipped.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace berth
