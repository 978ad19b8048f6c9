#include "protocol/base64.h"

namespace berth {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t value = 0;
    for (size_t k = 0; k < 3; ++k)
      value = (value << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k)
      out.push_back(k <= n ? kAlphabet[(value >> (18 - 6 * k)) & 63] : '=');
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  int bits = 0;
  uint32_t value = 0;
  size_t symbols = 0, padding = 0;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == ' ') continue;
    ++symbols;
    if (c == '=') {
      ++padding;
      continue;
    }
    const size_t index = kAlphabet.find(c);
    if (index == std::string_view::npos || padding > 0) return std::nullopt;
    value = ((value << 6) | static_cast<uint32_t>(index)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((value >> bits) & 0xff));
    }
  }
  // Whole groups of four, padded at the end only, and no bits left over.
  if (symbols % 4 != 0 || padding > 2 || (value & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace berth
