#include "config/config_error.h"

namespace berth {

std::string Quoted(std::string_view text, char quote) {
  constexpr size_t kShown = 60;
  if (text.size() <= kShown + 20) return quote + std::string(text) + quote;
  size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // mid-UTF-8
  return quote + std::string(text.substr(0, cut)) + "..." + quote + " (" +
         std::to_string(text.size()) + " bytes)";
}

}  // namespace berth
