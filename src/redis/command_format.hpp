// Appends one command in RESP form to a write buffer (hiredis' formatter).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace dlock::detail {

void append_command(std::string& out, std::span<const std::string_view> args);

// EVALSHA/EVAL sha_or_text numkeys keys... argv...
void append_eval(std::string& out, std::string_view verb, std::string_view body,
                 std::span<const std::string_view> keys, std::span<const std::string_view> argv);

// Turns a formatted "EVALSHA <sha1> numkeys ..." into "EVAL <text> numkeys ..."
// with the same keys and arguments: the NOSCRIPT fallback.
std::string rewrite_evalsha_as_eval(std::string_view evalsha, std::string_view sha1, std::string_view text);

}  // namespace dlock::detail
