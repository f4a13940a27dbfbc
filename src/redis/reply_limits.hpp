// Which replies are held to a ReplyLimit of their own (frame_check.hpp):
// the replies to scripts registered here. The connection looks each command
// up as it is submitted, by its bytes (EVALSHA and its SHA1, or EVAL and
// the script's text), so every path that sends a script (a single call, a
// pipelined batch of renewals, the EVAL fallback, a cluster node) is held
// to the same limit without carrying it along.
#pragma once

#include <string_view>

#include "dlock/script.hpp"
#include "frame_check.hpp"

namespace dlock::detail {

// Holds the replies to script (both its texts: Script::for_cluster) to limit from now on. limit.what must name
// the script and outlive the process (a literal). Any thread; at most
// max_limited_scripts scripts, further ones are not limited.
void limit_script_replies(const Script& script, ReplyLimit limit);
inline constexpr std::size_t max_limited_scripts = 64;

// The limit of the reply to one formatted command: no limit unless it runs
// a registered script; named after the command either way. Any thread;
// allocates nothing.
ReplyLimit reply_limit_of(std::string_view formatted) noexcept;

}  // namespace dlock::detail
