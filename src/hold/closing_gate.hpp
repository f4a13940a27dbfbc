// The acquisitions under way through one client (or one set of Redlock
// masters), and what its close does to them.
//
// A waiter sleeps on whatever wakes its kind: a local queue, a channel, a
// server's line. None of those is told that the client closes, so a waiter
// would sleep on until the holder's lease ended and only then find the
// client closed. Every acquisition therefore passes this gate: close() asks
// every one inside to stop (their stop tokens end every wait the engine
// makes) and waits until they have left. On the way out each gives back
// what its attempts left on the server (a writer's mark that holds back
// readers, a place in a line) while the client can still send it; the
// engine then reports errc::client_closed.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <utility>

#include "hold.hpp"

namespace dlock::detail {

class ClosingGate {
public:
    // One acquisition inside the gate, until destroyed.
    class Pass {
    public:
        explicit Pass(ClosingGate& gate) noexcept : gate_(&gate) {}
        Pass(Pass&& other) noexcept : gate_(std::exchange(other.gate_, nullptr)) {}
        Pass& operator=(Pass&&) = delete;
        ~Pass() {
            if (gate_) gate_->leave();
        }

    private:
        ClosingGate* gate_;
    };

    // Enters an acquisition; nothing once the close began.
    std::optional<Pass> enter();
    // Requested when the close begins.
    std::stop_token closing() const noexcept { return stop_.get_token(); }
    bool closed() const noexcept { return stop_.stop_requested(); }
    // Stops every acquisition inside and waits until they left, or until
    // `until`: true when all did. Later calls of enter() get nothing. When
    // `until` passes with acquisitions still inside, when_late (if given)
    // runs once the last of them has left, on its thread: for a close that
    // may not wait longer but must still finish what they leave.
    bool close(LockClock::time_point until, std::function<void()> when_late = {});
    // As close() with no wait at all: when_left runs once every acquisition
    // inside has left, at once (here) when none is inside. For a close on
    // the very thread their answers need (it could not wait for them).
    void close_then(const std::function<void()>& when_left) {
        if (close(LockClock::time_point::min(), when_left)) when_left();
    }

private:
    void leave();

    std::stop_source stop_;
    std::mutex mutex_;
    std::condition_variable left_;
    std::size_t inside_ = 0;
    std::function<void()> when_left_;  // a late close's, until the last leaves
};

}  // namespace dlock::detail
