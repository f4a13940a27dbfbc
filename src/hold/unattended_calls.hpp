// Lock calls that nobody waits for: an undo of a grant that came too late,
// a place in line given back, a writer's mark withdrawn, a release that
// returns at once, and every call whose caller walked away (deadline, stop)
// before its outcome was known.
//
// They still matter to others: a mark or a place left behind holds up other
// clients until its lease ends. So a closing client waits for them (every
// one is bounded by its retry window) before its connections close: a
// program that gives up and exits at once leaves nothing behind that it
// meant to take back. Without this, a call answered NOSCRIPT (the first use
// of a script on a server) had its EVAL fallback cut off by the close.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>

#include "retried_call.hpp"

namespace dlock::detail {

class UnattendedCalls {
public:
    // Held while a call's outcome is still to come: every live copy counts
    // (so a handler may be copied freely), and the call is settled when the
    // last is gone. Copies allocate nothing: attended calls make one each.
    class Pending {
    public:
        explicit Pending(UnattendedCalls& calls) noexcept : calls_(&calls) { calls_->add(); }
        Pending(const Pending& other) noexcept : calls_(other.calls_) {
            if (calls_) calls_->add();
        }
        Pending(Pending&& other) noexcept : calls_(std::exchange(other.calls_, nullptr)) {}
        Pending& operator=(Pending other) noexcept {
            std::swap(calls_, other.calls_);
            return *this;
        }
        ~Pending() {
            if (calls_) calls_->end();
        }

    private:
        UnattendedCalls* calls_;
    };

    // Counts one call as unsettled until the returned value (and every copy) is dropped.
    Pending begin() noexcept { return Pending(*this); }

    // Sends script(keys, argv) (retried until give_up_by) and returns at
    // once; on_settled, if any, gets the outcome on the I/O thread.
    void send(const std::shared_ptr<ClientCore>& client, const Script& script, ClientCore::Args keys,
              ClientCore::Args argv, Clock::time_point give_up_by, RetriedCall::Done on_settled = {},
              RetriedCall::Send how = RetriedCall::Send::evalsha);

    // Blocks until every call begun so far has settled, or until deadline:
    // true when all have.
    bool settle_by(Clock::time_point deadline);

private:
    void add() noexcept { in_flight_.fetch_add(1, std::memory_order_relaxed); }
    void end();

    std::mutex mutex_;
    std::condition_variable settled_;
    std::atomic<std::size_t> in_flight_{0};
};

}  // namespace dlock::detail
