// The client's watchdog: one timer for every held lock, not a thread per
// lock. Each live hold has one entry in a schedule ordered by due time. When
// entries fall due together their renewals leave in one write. A hold whose
// lock is gone, or that cannot be renewed before its validity ends, is
// marked lost. Fixed-lease holds are only watched for expiry.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "hold.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

class LeaseKeeper {
public:
    explicit LeaseKeeper(ClientCore& core);

    // Starts watching a fresh hold; first due at `due`. Any thread.
    void track(const std::shared_ptr<Hold>& hold, LockClock::time_point due);
    // Stops watching a hold that was released. Any thread.
    void forget(const std::shared_ptr<Hold>& hold);
    // Every hold still watched (for release when the client stops).
    std::vector<std::shared_ptr<Hold>> live_holds();
    // I/O thread, at client shutdown: no timer may outlive the client.
    void shutdown();

private:
    void schedule(const std::shared_ptr<Hold>& hold, LockClock::time_point due);
    void rearm();  // I/O thread
    void on_timer();  // I/O thread
    void on_renewed(const std::weak_ptr<Hold>& weak, LockClock::time_point sent, std::error_code ec,
                    const Reply& reply);  // I/O thread

    ClientCore& core_;
    asio::steady_timer timer_;  // I/O thread only

    std::mutex mutex_;
    std::multimap<LockClock::time_point, std::weak_ptr<Hold>> schedule_;
    LockClock::time_point armed_for_ = LockClock::time_point::max();
    bool shut_down_ = false;
};

}  // namespace dlock::detail
