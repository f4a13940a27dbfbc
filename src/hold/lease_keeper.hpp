// A watchdog for many holds on one timer, not a thread per lock.
//
// Every live hold has exactly one entry in a schedule ordered by time:
// its next renewal, or — while a renewal is in flight, and for fixed
// leases — the end of its validity. Whatever the network does, a hold
// whose validity ends before a renewal was confirmed is LOST at that
// moment (notify_lost), and a renewal's answer that comes later is
// ignored. Holds that fall due together are handed to the renewal sender
// at once, so their renewals leave in one write. A failed renewal is
// retried soon (renew_retry_interval), never past the validity.
//
// How a renewal is sent is the owner's part (one server for a Lock, a
// majority of masters for a Redlock); what its outcome means is the same
// for both and lives here, on the hold's state machine (hold.hpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "hold.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

class LeaseKeeper {
public:
    // Sends the renewals of `due` (live, renewable holds), all counted as
    // sent at `sent`. Each must end in exactly one call of renewed, refused
    // or failed. Runs on the timer's I/O thread.
    using SendRenewals = std::function<void(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent)>;

    // The timer runs on timer_home's I/O thread and is cancelled when that
    // client shuts down; loss notices run there too.
    LeaseKeeper(ClientCore& timer_home, SendRenewals send);

    // Starts watching a fresh hold, granted by a request sent at `sent`. Any thread.
    // `first_lease` is the lease its first validity counts from `sent` when
    // that is not the lock's own (a direct grant taken from its notice: the
    // waiter's waiter_lease): its first renewal is due a third of
    // the way into the shorter of the two, so that a grant trusted for less
    // than a lease is renewed in time like any other hold.
    void track(const std::shared_ptr<Hold>& hold, LockClock::time_point sent,
               std::chrono::milliseconds first_lease = std::chrono::milliseconds::zero());
    // Stops watching a hold (released, lost). Any thread.
    void forget(const std::shared_ptr<Hold>& hold);
    // Every hold still watched, renewal in flight or not.
    std::vector<std::shared_ptr<Hold>> live_holds();
    // Renews every hold now (at most one renewal in flight per hold): after
    // messages may have been missed, the server is asked at once.
    void renew_all_now();
    void renew_now(const std::shared_ptr<Hold>& hold);

    // What an answer settles: a renewal, or the confirmation of a grant
    // taken from the server's line (counted apart in the metrics).
    enum class Answer { renewal, grant_confirmation };
    // A renewal's outcome. Any thread.
    void renewed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent,
                 Answer answer = Answer::renewal);  // extended
    // Not ours any more (the answer says why, taken_over by default): lost.
    void refused(const std::shared_ptr<Hold>& hold, LostReason reason = LostReason::taken_over,
                 Answer answer = Answer::renewal);
    // Retried until validity ends; an error no retry mends (permission_denied,
    // wrong_type) ends it at once, as refused does.
    void failed(const std::shared_ptr<Hold>& hold, std::error_code ec);

    // A renewal sent at `sent` must have its answer by then; later it is no use.
    static LockClock::time_point renewal_deadline(const Hold& hold, LockClock::time_point sent,
                                                  std::chrono::milliseconds command_timeout);

    asio::io_context& io() noexcept { return home_.io(); }

private:
    void shutdown();  // I/O thread, at client shutdown: no timer may outlive the client
    void schedule_locked(const std::shared_ptr<Hold>& hold, LockClock::time_point at, bool& earlier);
    void schedule(const std::shared_ptr<Hold>& hold, LockClock::time_point at);
    void unschedule_locked(Hold& hold);
    void rearm();     // I/O thread
    void on_timer();  // I/O thread

    ClientCore& home_;
    SendRenewals send_;
    asio::steady_timer timer_;  // I/O thread only

    std::mutex mutex_;
    using Schedule = std::multimap<LockClock::time_point, std::shared_ptr<Hold>>;
    Schedule schedule_;
    // Entries taken out of the schedule, for reuse (at most max_spare_entries).
    static constexpr std::size_t max_spare_entries = 16;
    std::vector<Schedule::node_type> spare_entries_;
    LockClock::time_point armed_for_ = LockClock::time_point::max();
    bool shut_down_ = false;
};

}  // namespace dlock::detail
