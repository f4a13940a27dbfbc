// The waiters of this client that stand in a server's line (queued locks:
// Lock's first waiting thread, every waiting thread of a FairLock).
//
// Each has a place in the lock's line on the server that ends unless it is
// refreshed (LockOptions::waiter_lease). One timer on the client's I/O thread
// refreshes every waiter's place each waiter_lease / 3, all of them in one
// write; a refresh also moves a line on whose lock became free without a
// release (an expired lease), and says when the lock was granted to the
// waiter: a grant notice it may have missed. The inbox's grant notices
// ('granted <owner> <token> <arrival> <lock key>') are left with the waiter
// they name, which wakes; after the subscriber reconnected (messages may
// have been missed) every waiter wakes and asks once, at once.
//
// A waiter's wait is named by its arrival number in the line (acquire.lua's
// busy answer). A notice for that wait lets the waiter take the lock as held
// without asking (direct_grant): the grant is leased at least until its
// place would have ended, and its place lasted at least waiter_lease from
// the send time of the last request the server confirmed kept it. A notice
// for another wait of the same owner (an earlier one, given up) is ignored.
//
// A waiter's wake() runs on the I/O thread (or the thread that calls
// wake_all) and must not block. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hold.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

class LineWaiters {
public:
    // A grant notice for one wait.
    struct DirectGrant {
        std::uint64_t token = 0;
        std::uint64_t arrival = 0;
    };
    // A direct grant that the waiter may take as held: its token, and the
    // send time its validity counts from (with waiter_lease as the lease).
    struct TakenGrant {
        std::uint64_t token = 0;
        std::uint64_t arrival = 0;
        LockClock::time_point place_kept{};
    };
    struct Waiter {
        Waiter(std::shared_ptr<const LockIdentity> identity_, std::string owner_, std::function<void()> wake_)
            : identity(std::move(identity_)), owner(std::move(owner_)), wake(std::move(wake_)) {}
        const std::shared_ptr<const LockIdentity> identity;
        const std::string owner;
        const std::function<void()> wake;
        std::string refresh_command;  // line_refresh.lua's EVALSHA, formatted once (I/O thread)

        // The waiting thread's busy answer: its wait's arrival number (0:
        // none) and that request's send time, which kept its place.
        void placed(std::uint64_t arrival, LockClock::time_point sent);
        // The arrival number of its wait, 0 while not known.
        std::uint64_t arrival() const;
        // A grant notice for its wait, taken once; none for another wait.
        std::optional<TakenGrant> direct_grant();
        // Whether the grant taken by direct_grant() was force-released
        // (LineWaiters::revoked) before its hold could be found.
        bool taken_grant_revoked() const;

    private:
        friend class LineWaiters;
        mutable std::mutex mutex_;
        std::uint64_t arrival_ = 0;
        LockClock::time_point place_kept_{};  // send time of the last request confirmed to keep the place
        std::optional<DirectGrant> notice_;
        std::uint64_t taken_token_ = 0;  // of the notice direct_grant() gave out
        bool taken_revoked_ = false;
    };
    // Sends the refreshes of `due` in one write; each answer goes to refreshed().
    using SendRefreshes = std::function<void(std::vector<std::shared_ptr<Waiter>>& due)>;

    LineWaiters(ClientCore& home, SendRefreshes send);

    // Starts refreshing owner's place in identity's line and routing its
    // grant notices to wake. Until leave().
    std::shared_ptr<Waiter> join(std::shared_ptr<const LockIdentity> identity, std::string owner,
                                 std::function<void()> wake);
    void leave(const std::shared_ptr<Waiter>& waiter);

    // A grant notice from the inbox: left with the waiter, which wakes.
    void granted(std::string_view name, std::string_view owner, DirectGrant grant);
    // A force-release notice (inbox): a grant notice of that token not yet
    // taken is dropped; one taken already is marked revoked for its taker.
    void revoked(std::string_view name, std::string_view owner, std::uint64_t token);
    // Messages may have been missed: every waiter asks again.
    void wake_all();
    // A refresh's answer (line_refresh.lua), the refresh sent at `sent`:
    // "still in line" kept the place; anything else wakes the waiter, which
    // asks again. Errors wait for the next round.
    static void refreshed(Waiter& waiter, std::error_code ec, const Reply& reply, LockClock::time_point sent);

private:
    std::shared_ptr<Waiter> find(std::string_view name, std::string_view owner);  // null when not waiting
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
