// The waiters of this client that stand in a server's line (queued locks:
// Lock's first waiting thread, every waiting thread of a FairLock).
//
// Each has a place in the lock's line on the server that ends unless it is
// refreshed (LockOptions::waiter_lease). One timer on the client's I/O thread
// refreshes every waiter's place each waiter_lease / 3, all of them in one
// write; a refresh also moves a line on whose lock became free without a
// release (an expired lease), and says when the lock was granted to the
// waiter: a grant notice it may have missed. The inbox's grant notices
// ('granted <owner> <token> <lock key>') wake the waiter they name; after the
// subscriber reconnected (messages may have been missed) every waiter wakes
// and asks once, at once.
//
// A waiter's wake() runs on the I/O thread (or the thread that calls
// wake_all) and must not block. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hold.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

class LineWaiters {
public:
    struct Waiter {
        std::shared_ptr<const LockIdentity> identity;
        std::string owner;
        std::function<void()> wake;
        std::string refresh_command;  // line_refresh.lua's EVALSHA, formatted once
    };
    // Sends the refreshes of `due` in one write; each answer goes to refreshed().
    using SendRefreshes = std::function<void(std::vector<std::shared_ptr<Waiter>>& due)>;

    LineWaiters(ClientCore& home, SendRefreshes send);

    // Starts refreshing owner's place in identity's line and routing its
    // grant notices to wake. Until leave().
    std::shared_ptr<Waiter> join(std::shared_ptr<const LockIdentity> identity, std::string owner,
                                 std::function<void()> wake);
    void leave(const std::shared_ptr<Waiter>& waiter);

    // A grant notice from the inbox.
    void granted(std::string_view name, std::string_view owner);
    // Messages may have been missed: every waiter asks again.
    void wake_all();
    // A refresh's answer (line_refresh.lua): anything but "still in line"
    // wakes the waiter, which asks again. Errors wait for the next round.
    static void refreshed(const Waiter& waiter, std::error_code ec, const Reply& reply);

private:
    void arm(std::chrono::milliseconds period);  // I/O thread
    void on_tick();                              // I/O thread
    void shutdown();

    ClientCore& home_;
    SendRefreshes send_;
    asio::steady_timer timer_;  // I/O thread only

    std::mutex mutex_;
    std::map<std::pair<std::string, std::string>, std::shared_ptr<Waiter>, std::less<>> waiters_;
    bool ticking_ = false;
    std::chrono::milliseconds period_{0};  // of the timer as armed last
    bool shut_down_ = false;
};

}  // namespace dlock::detail
