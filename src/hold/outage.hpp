// How a waiting acquisition rides through an outage of its server: a
// failover (a master killed, a replica promoted by the sentinels or by the
// cluster), a restart, a dropped connection. One decision for every lock
// kind: which failures are transient, how long a caller keeps trying, and
// how long it pauses between attempts.
//
// A caller that waits (a deadline ahead, or none) treats a transient
// failure like a busy answer: it tries again after a bounded backoff, and
// the transport meanwhile reconnects (through the sentinels, or to the
// slot's new master). With a deadline it keeps trying until then; without
// one, until the outage has lasted connect_timeout + command_timeout (a
// server that stays away is reported, not waited for in silence). A single
// attempt (try_lock) never rides: its error says that the server could not
// be reached, or that a failover is under way (not_master). Giving up during
// an outage reports the outage's error, never contention.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <system_error>

#include "dlock/client_options.hpp"
#include "dlock/reply.hpp"

namespace dlock::detail {

// A failure after which the same call may well succeed shortly, on the same
// server or on the one that replaces it: the connection lost or refused, no
// answer in time, a replica or a loading server answering (READONLY,
// LOADING, MASTERDOWN), a cluster without a master for the slot
// (CLUSTERDOWN) or migrating it (TRYAGAIN).
bool transient_failure(std::error_code ec, const Reply& reply);

class Outage {
public:
    using Clock = std::chrono::steady_clock;
    // The pause after the first transient failure, doubled after each one
    // up to the last.
    static constexpr std::chrono::milliseconds first_pause{20};
    static constexpr std::chrono::milliseconds longest_pause{500};

    Outage(std::optional<Clock::time_point> deadline, const ClientOptions& options)
        : deadline_(deadline), window_(options.connect_timeout + options.command_timeout) {}

    // A failed attempt (ec, transient_failure's verdict): true when the
    // caller should try again at retry_at(); ec is then cleared (error()
    // keeps it). False, ec untouched: the caller fails with it.
    bool ride(std::error_code& ec, bool transient);
    // An answered attempt: the outage, if there was one, is over.
    void answered() noexcept {
        since_.reset();
        error_.clear();
        pause_ = first_pause;
    }
    // When to try again: after the pause, never past the deadline.
    Clock::time_point retry_at() const noexcept { return retry_at_; }
    // The last transient failure while the outage lasts; empty otherwise.
    std::error_code error() const noexcept { return error_; }
    // What a caller that walked away (deadline) without an answer reports:
    // the outage's error, or command_timeout.
    std::error_code unanswered_error() const;
    // After the pause: true when the caller must return now, because stop
    // was requested or the deadline passed (ec is then the outage's error).
    bool gave_up(const std::stop_token& stop, std::error_code& ec) const;

private:
    const std::optional<Clock::time_point> deadline_;
    const Clock::duration window_;
    std::optional<Clock::time_point> since_;
    std::error_code error_;
    Clock::duration pause_ = first_pause;
    Clock::time_point retry_at_{};
};

// A sleep until `until` that only stop cuts short; a fiber parks (fiber-aware).
void pause_until(std::chrono::steady_clock::time_point until, std::stop_token stop);

}  // namespace dlock::detail
