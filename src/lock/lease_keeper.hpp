// A watchdog for many holds on one timer, not a thread per lock. Each live
// hold has one entry in a schedule ordered by due time; holds that fall due
// together are handed to the renewal sender at once, so their renewals can
// leave in one write. A hold that cannot be renewed before its validity
// ends is marked lost. Fixed-lease holds are only watched for expiry.
//
// How a renewal is sent is the owner's part (one server for a Lock, a
// majority of masters for a Redlock); what its outcome means is the same
// for both and lives here.
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
    // client shuts down.
    LeaseKeeper(ClientCore& timer_home, SendRenewals send);

    // Starts watching a fresh hold; first due at `due`. Any thread.
    void track(const std::shared_ptr<Hold>& hold, LockClock::time_point due);
    // Stops watching a hold that was released. Any thread.
    void forget(const std::shared_ptr<Hold>& hold);
    // Every hold still watched (for release when the client stops).
    std::vector<std::shared_ptr<Hold>> live_holds();

    // A renewal's outcome. Any thread.
    void renewed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent);  // extended
    void refused(const std::shared_ptr<Hold>& hold);  // the lock is not ours any more: lost
    void failed(const std::shared_ptr<Hold>& hold, std::error_code ec);  // retried until validity ends

private:
    void shutdown();  // I/O thread, at client shutdown: no timer may outlive the client
    void schedule(const std::shared_ptr<Hold>& hold, LockClock::time_point due);
    void rearm();     // I/O thread
    void on_timer();  // I/O thread

    ClientCore& home_;
    SendRenewals send_;
    asio::steady_timer timer_;  // I/O thread only

    std::mutex mutex_;
    std::multimap<LockClock::time_point, std::weak_ptr<Hold>> schedule_;
    LockClock::time_point armed_for_ = LockClock::time_point::max();
    bool shut_down_ = false;
};

}  // namespace dlock::detail
