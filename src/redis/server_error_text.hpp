// Where Redis's text for an error reply is kept for dlock::last_server_error()
// and throw_if: the calling thread's own slot, set where a lock call turns an
// error reply into an error_code, cleared when a call starts.
#pragma once

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

}  // namespace dlock::detail
