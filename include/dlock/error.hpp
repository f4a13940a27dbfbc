// dlock/error.hpp — the error codes every dlock call reports.
//
// Contention is not an error (try_lock returns false). Everything else that
// can go wrong has a code in dlock::errc, with its own std::error_category, so
// callers can compare `ec == dlock::errc::command_timeout`. Throwing calls
// throw dlock::Error (a std::system_error); each has a std::error_code& twin
// that never throws.
#pragma once

// The headers use C++20 (concepts, std::stop_token) and take any later
// standard as it is: nothing pins -std, so say what is missing here.
#if __cplusplus < 202002L
#error "dlock needs C++20 or later: compile with -std=c++20 (or a later standard such as -std=c++23)"
#endif

#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock {

enum class errc {
    // Caller mistakes.
    invalid_argument = 1,   // empty name, bad duration, malformed option
    invalid_uri,            // the server URI cannot be parsed

    // Reaching the server.
    connect_timeout,        // no connection (or handshake) within connect_timeout
    connection_refused,     // nothing listens there (ECONNREFUSED, no socket file)
    resolve_failed,         // the host name does not resolve
    tls_error,              // TLS handshake or certificate verification failed
    auth_failed,            // wrong password or unknown user (WRONGPASS), or none given (NOAUTH)
    not_connected,          // the last connect attempt failed; reconnecting in the background

    // A command on an established connection.
    command_timeout,        // no reply within command_timeout; the connection is reset
    connection_lost,        // the connection dropped with the command in flight; NOT resent
    protocol_error,         // the server sent bytes that are not RESP
    reply_too_large,        // a reply exceeded ClientOptions' size limits, or a lock script's own
                            // (a few elements): the message names which; the connection is reset
    server_error,           // an error reply from Redis; the message carries its text
    permission_denied,      // NOPERM: the ACL user may not run this command or key
    wrong_type,             // WRONGTYPE: the key holds another kind of value
    no_script,              // NOSCRIPT: handled internally by the script cache

    // Client lifecycle.
    client_closed,          // the Client was destroyed or is shutting down
    forked_child,           // a Client created before fork() was used in the child

    // Locks.
    not_owner,              // unlock by a thread/owner that does not hold the lock
    lease_lost,             // the lease expired or the lock was removed while held
    no_quorum,              // Redlock: fewer than a majority of masters answered in time
    replicas_not_acknowledged,  // WAIT: fewer replicas than required confirmed the write in time

    // Sentinel and Cluster.
    no_master,              // Sentinel: no sentinel named a master (unreachable, or the name is unknown)
    not_master,             // the server reached is not a master (ROLE says replica): a failover is under way
    cluster_down,           // Cluster: no node serves the key's slot (CLUSTERDOWN, no slot map), within the deadline
    slot_migrating,         // Cluster: TRYAGAIN, the key's slot is being migrated and the keys are split; it did not run

    // Why a held lock was lost, one code per LostReason (below). Each
    // compares equal to errc::lease_lost (`ec == dlock::errc::lease_lost`
    // holds for all four), so a caller that only asks "lost?" need not
    // know them; lost_reason_of() tells them apart.
    lease_expired,          // LostReason::expired
    lock_revoked,           // LostReason::revoked
    lock_taken_over,        // LostReason::taken_over
    renewal_refused,        // LostReason::renewal_refused
    // One name, one resource.
    kind_mismatch,          // the name is held as another kind (a Lock, an RwLock, a Semaphore); what() names it
    limit_mismatch,         // the semaphore exists with another limit than SemaphoreOptions::limit; what() names both
    // Rolling upgrades: the lock's data was written in a later data layout than this
    // library's (README "Mixing versions"); what() names both. Nothing was changed.
    layout_mismatch,
};

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};

namespace dlock {

// Why a held lock (a Lock's, FairLock's, RwLock side's, Semaphore permit's,
// Redlock's, MultiLock name's or AsyncHold's hold) was lost.
enum class LostReason {
    // Its validity ended before a renewal was confirmed: the server was
    // unreachable or slow (or renewal is off and the fixed lease ran out).
    // Whether the server still holds it for this owner is unknown.
    expired,
    // An operator force-released it (force_release, `dlock release
    // --force`, also of read-shared names and semaphore permits): the
    // client heard it on its inbox or from the renewal's answer.
    revoked,
    // The server answered that it is not this owner's any more: the key is
    // gone or owned by someone else (a server restart without persistence,
    // a failover to a replica that never saw it, the key deleted or evicted).
    taken_over,
    // The server answered a renewal with an error that retrying will not
    // mend (an ACL that forbids the script, a key of another type): the
    // lock is no longer renewed, so it is given up at once.
    renewal_refused,
};

// "expired", "revoked", "taken_over", "renewal_refused".
std::string_view to_string(LostReason reason) noexcept;
// The error code that reports reason (compares equal to errc::lease_lost).
std::error_code make_error_code(LostReason reason) noexcept;
// The reason an error code reports; nothing for any other code (also for
// the generic errc::lease_lost itself).
std::optional<LostReason> lost_reason_of(const std::error_code& ec) noexcept;

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

// `ec == errc::X`: as std::error_code's own comparison, except that
// errc::lease_lost also matches the four codes that say why a lock was lost
// (lease_expired, lock_revoked, lock_taken_over, renewal_refused). Found by
// argument-dependent lookup wherever an error_code meets an errc.
inline bool operator==(const std::error_code& ec, errc e) noexcept {
    if (ec.category() != error_category()) return false;
    const auto value = static_cast<errc>(ec.value());
    if (value == e) return true;
    return e == errc::lease_lost && value >= errc::lease_expired && value <= errc::renewal_refused;
}

// Thrown by every throwing dlock call. what() carries the detail (for server
// errors, Redis's own text).
class Error : public std::system_error {
public:
    explicit Error(std::error_code ec) : std::system_error(ec) {}
    Error(std::error_code ec, const std::string& detail) : std::system_error(ec, detail) {}
};

// Throws Error(ec, detail) when ec is set. For an error Redis replied
// (server_error, permission_denied), what() ends with Redis's own text.
void throw_if(const std::error_code& ec, const std::string& detail = {});

// Redis's own text for the last error reply that a lock call on this thread
// reported through a std::error_code& twin (say "OOM command not allowed
// when used memory > 'maxmemory'." or "NOPERM ..."): an error_code cannot
// carry text. For reply_too_large, dlock's word on which limit the reply
// went past and what it answered. Empty when that call failed for another
// reason.
std::string last_server_error();

}  // namespace dlock

