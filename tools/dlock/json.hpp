// Output of the dlock tool: strings that stay valid JSON, and plain lines
// that stay one line, whatever bytes a lock name or an owner holds.
#pragma once

#include <string>
#include <string_view>

namespace dlock::cli {

// A quoted JSON string. Valid UTF-8 passes through; quotes, backslashes and
// control characters are escaped; each byte that is not part of valid UTF-8
// becomes \u00XX (the byte's value as a code point), so the output always
// parses, and names that are text read as they are.
std::string json_string(std::string_view bytes);

// The same escapes without the quotes (and with '"' left as it is), for
// plain output: a name or label with a newline or another control byte
// stays on its one line, and a backslash reads as \\ so nothing is forged.
std::string text_line(std::string_view bytes);

}  // namespace dlock::cli
