// Text from the input (queue, policy and file names) put into HTML or SVG: escaped, so that a
// name is shown as written and never read as markup.
#pragma once

#include <string>
#include <string_view>

namespace berth {

// `text` with & < > " ' as entities: safe between tags and inside quoted attributes.
std::string EscapeMarkup(std::string_view text);

}  // namespace berth
