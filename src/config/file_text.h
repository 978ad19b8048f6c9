// Reads a whole input file for the loaders of src/config, and checks that text is UTF-8 with LF or
// CRLF line ends.
#pragma once

#include <string>
#include <string_view>

namespace berth {

// The file's bytes; ConfigError "PATH: cannot read: REASON" when it cannot be read or is a
// directory, and "PATH: more than the limit of N bytes ..." when it holds more than the
// file-bytes bound (read no further, so that /dev/zero or a huge file costs nothing).
std::string ReadFileText(const std::string& path);

// Throws ConfigError "SOURCE:LINE:COLUMN: ..." at the first byte of `text` that is not part of a
// well-formed UTF-8 sequence (overlong forms and surrogates included), at a NUL byte, or at a
// carriage return not followed by a line feed (old Mac line ends, which the parsers would read
// as one long line and refuse with a message about something else). LF and CRLF are accepted.
void CheckText(std::string_view text, const std::string& source);

// "" when `name` can name something (a node, a queue, a job): no control character, which
// would break the tables, logs and files it is printed into; else what is wrong with it, which
// calls it `what` ("a control character (byte 0x0A) at byte 3 of the name; remove it").
std::string NameProblem(std::string_view name, std::string_view what = "the name");

// The file's name without its directory and extension, as a cluster named after its file is
// shown: control characters become '?', since the name is printed to terminals.
std::string FileStem(const std::string& path);

// `text` without a leading UTF-8 byte order mark.
std::string_view WithoutBom(std::string_view text);

}  // namespace berth
