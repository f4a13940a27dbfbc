// What the lock scripts (src/scripts/*.lua) answer, read from the Reply
// alone: no server, no client state. The lock kinds act on these readings;
// tests and fuzzers feed them any reply a server, or something posing as
// one, might send. A reply outside a script's vocabulary reads as
// malformed, never as a grant, and never indexes past what arrived.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/reply.hpp"

namespace dlock::detail {

// acquire.lua: {1, token, count} granted; {0, pttl} held by another owner;
// {-1} a re-entry that is not ours any more; {-2} a resent copy of an
// operation that may not grant any more.
bool is_grant(const Reply& reply);

// A fresh attempt's answer.
struct FreshAcquire {
    enum class Kind { granted, busy, stale_operation, malformed };
    Kind kind = Kind::malformed;
    std::uint64_t token = 0;                  // granted
    unsigned count = 0;                       // granted
    std::chrono::milliseconds lease_left{0};  // busy: the holder's, 1 ms .. max_lease
    std::uint64_t arrival = 0;                // busy: the caller's arrival number in line; 0: no place
};
FreshAcquire read_fresh_acquire(const Reply& reply);

// A re-entry's answer: granted with the new count, or the hold is not ours
// on the server any more (any other answer of the script).
struct Reentry {
    enum class Kind { granted, not_ours, malformed };
    Kind kind = Kind::malformed;
    unsigned count = 0;  // granted
};
Reentry read_reentry(const Reply& reply);

// One master's answer to a Redlock attempt (always fresh).
struct MasterVote {
    Vote vote = Vote::failed;   // granted, held_by_another, or failed (malformed)
    std::uint64_t token = 0;    // granted
    long long lease_left = 0;   // held_by_another: as the master said
};
MasterVote read_master_vote(const Reply& reply);

// release.lua: the holds left (0: released), or a negative number when the
// lock is not ours there (expired, taken, a stale or resent operation).
struct Release {
    enum class Kind { released, not_ours, malformed };
    Kind kind = Kind::malformed;
    unsigned holds_left = 0;  // released
};
Release read_release(const Reply& reply);

// renew.lua: 1 when the lease was extended.
bool read_renewed(const Reply& reply);

// hand_off.lua: {1, token} when the lock went to the next owner ({1, token,
// arrival} when the waiter behind it took a place in line: its arrival);
// anything else means it was not ours to give.
struct HandOffAnswer {
    std::uint64_t token = 0;
    std::uint64_t placed_arrival = 0;  // 0: nobody placed
};
std::optional<HandOffAnswer> read_hand_off(const Reply& reply);

// inspect.lua: every kind's holds of one name (the script's header says
// what, in order). Throws dlock::Error(protocol_error) for anything else.
LockInfo read_inspect(const Reply& reply);

// force_release.lua and semaphore_force_release.lua: {'free'},
// {'refused', holds} or {'released', holds}. Throws
// dlock::Error(protocol_error) for anything else.
ForceRelease read_force_release(const Reply& reply);

// The notice force_release.lua publishes on the owner's client's inbox:
// "revoked <owner> <token> dlock:{<name>}" for the exclusive hold,
// "revoked-read ..." alike for a reader. The name may hold any byte,
// spaces too: it is everything between the braces after the token.
struct Revocation {
    std::string_view owner;
    std::uint64_t token = 0;
    std::string name;  // decoded from the key's tag
    bool reader = false;  // an RwLock's read hold
};
// semaphore_force_release.lua's notice: "revoked-permit <permit id> 0 <key>".
inline bool is_permit_revocation(std::string_view payload) { return payload.substr(0, 15) == "revoked-permit "; }
// The permit id such a notice names ("" when it names none).
inline std::string_view permit_revoked(std::string_view payload) {
    payload.remove_prefix(std::min<std::size_t>(payload.size(), 15));
    return payload.substr(0, payload.find(' '));
}
std::optional<Revocation> read_revocation(std::string_view payload);
// The notice of a direct grant to a waiter in the lock's line (prelude.lua,
// grant_first_in_line): "granted <owner> <token> <arrival> dlock:{<name>}",
// read alike; the arrival names the wait the grant is for.
struct GrantNotice {
    std::string_view owner;
    std::uint64_t token = 0;
    std::uint64_t arrival = 0;
    std::string name;  // decoded from the key's tag
};
std::optional<GrantNotice> read_grant_notice(std::string_view payload);
// The notice of a direct grant of permits to a waiter of this client
// (semaphore_prelude.lua, tell_granted): "granted-permit <permit id>
// <the semaphore's channel>". The channel may hold any byte, spaces too: it
// is everything after the id, which holds none.
struct PermitGrantNotice {
    std::string_view permit;
    std::string_view channel;
};
std::optional<PermitGrantNotice> read_permit_grant_notice(std::string_view payload);

}  // namespace dlock::detail
