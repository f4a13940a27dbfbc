// Where Redis's text for an error reply is kept for dlock::last_server_error()
// and throw_if: the calling thread's own slot, set where a lock call turns an
// error reply into an error_code, cleared when a call starts.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

#include "dlock/reply.hpp"

namespace dlock::detail {

// Keeps reply's text when ec is what Redis said in it; transport failures
// also come with an error Reply (carrying their own detail), which is not
// Redis's text and is not kept.
void note_server_error(const std::error_code& ec, const Reply& reply);
// Forgets it: a new call starts.
void clear_server_error();
// Puts back what last_server_error() said before: a call that cleans up
// after a failure (a multi-lock giving back its other names) keeps the
// failure's text.
void restore_server_error(std::string text);

}  // namespace dlock::detail
