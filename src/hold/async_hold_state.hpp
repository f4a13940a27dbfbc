// What an asynchronous acquisition made (dlock/async.hpp's AsyncHold), by
// lock kind: its queries and its release, each done as the acquisition's
// own owner (OwnerScope with its owner number). One implementation per kind
// beside that kind's synchronous code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/async.hpp"
#include "runtime/fiber_runner.hpp"
#include "hold_queries.hpp"
#include "runtime/owner_ids.hpp"

namespace dlock::detail {

class ClientCore;

class AsyncHoldState {
public:
    AsyncHoldState(std::shared_ptr<ClientCore> client, std::uint64_t owner_number, std::string name)
        : client(std::move(client)), owner_number(owner_number), name(std::move(name)) {}
    virtual ~AsyncHoldState() = default;

    // The kind's release (unlock(ec), Permit::release(ec)), as the owner.
    virtual void release(std::error_code& ec) noexcept = 0;
    virtual bool is_held() const = 0;
    virtual std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const = 0;
    virtual std::chrono::steady_clock::time_point valid_until() const = 0;
    virtual std::stop_token lost_token() const = 0;
    virtual std::optional<LostReason> lost_reason() const = 0;
    // A release nobody waited for (the hold dropped) that failed: to the
    // kind's on_unlock_error / on_release_error.
    virtual void report_release_error(std::error_code ec) noexcept = 0;

    // True for the one caller that may release it.
    bool claim_release() noexcept { return !released_.exchange(true); }
    bool released() const noexcept { return released_.load(); }

    // A wait for the hold's loss (start_wait_lost), ended when the release
    // is.
    class LostWait {
    public:
        virtual void abort() = 0;

    protected:
        ~LostWait() = default;
    };
    // Lost waits end when the release does. Held weakly: a wait that has
    // completed (its owner let go of it) is dropped at the next add, so a
    // hold waited on again and again keeps only the waits still running.
    void add_lost_wait(std::weak_ptr<LostWait> wait);
    void end_lost_waits();

    const std::shared_ptr<ClientCore> client;
    const std::uint64_t owner_number;
    const std::string name;

private:
    std::atomic<bool> released_{false};
    std::mutex mutex_;
    std::vector<std::weak_ptr<LostWait>> lost_waits_;
    bool lost_waits_ended_ = false;
};

// A kind whose acquisition makes one Hold (all but the multi-lock): the
// queries read it.
class SingleHoldState : public AsyncHoldState {
public:
    using AsyncHoldState::AsyncHoldState;
    virtual std::shared_ptr<Hold> hold() const = 0;

    bool is_held() const override { return hold_is_held(hold()); }
    std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const override {
        return {{name, fencing_token_of(hold())}};
    }
    std::chrono::steady_clock::time_point valid_until() const override { return valid_until_of(hold()); }
    std::stop_token lost_token() const override { return lost_token_of(hold()); }
    std::optional<LostReason> lost_reason() const override { return loss_of(hold()); }
};

// A kind whose core names its holds by owner string (Lock, FairLock,
// Redlock): the owner is made in the acquiring fiber (its OwnerScope), and
// the release is the kind's own unlock(ec).
template <typename Core>
class OwnedHoldState final : public SingleHoldState {
public:
    OwnedHoldState(std::shared_ptr<Core> core, std::shared_ptr<ClientCore> client, std::uint64_t owner_number)
        : SingleHoldState(std::move(client), owner_number, core->identity->name),
          core_(std::move(core)),
          hold_(core_->hold_of(core_->current_owner())) {
        // The AsyncHold owns it from here: the lock object's destructor
        // leaves it alone, and it is renewed until released or dropped.
        if (hold_) core_->hand_over(hold_);
    }
    void release(std::error_code& ec) noexcept override { release_noexcept(*core_, ec); }
    // The hold this acquisition made, as it goes on (released, lost).
    std::shared_ptr<Hold> hold() const override { return hold_; }
    void report_release_error(std::error_code ec) noexcept override { report_unlock_error(*core_->identity, ec); }

private:
    const std::shared_ptr<Core> core_;
    const std::shared_ptr<Hold> hold_;
};

// Runs acquire(deadline, stop, ec) — a kind's synchronous acquisition,
// returning its state or null (not acquired) — in client's fiber thread as
// a new owner, then done(ec, hold) on that thread outside the fiber.
using AsyncAcquisition = std::function<std::shared_ptr<AsyncHoldState>(
    std::uint64_t owner_number, std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_token stop,
    std::error_code& ec)>;
void run_acquisition(const std::shared_ptr<ClientCore>& client,
                     std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                     AsyncAcquisition acquire, async_entry::AcquireCompletion done);

// Reaches the private core of a public lock object.
struct AsyncAccess {
    template <typename Object>
    static const auto& core(const Object& object) noexcept {
        return object.core_;
    }
    static std::shared_ptr<AsyncHoldState> take(AsyncHold& hold) noexcept { return std::move(hold.state_); }
    static const std::shared_ptr<AsyncHoldState>& state(const AsyncHold& hold) noexcept { return hold.state_; }
    // (Not a constructor of AsyncHold: no exported symbol names dlock::detail.)
    static AsyncHold make(std::shared_ptr<AsyncHoldState> state) noexcept {
        AsyncHold hold;
        hold.state_ = std::move(state);
        return hold;
    }
};

}  // namespace dlock::detail

namespace dlock::detail {

// Starts an acquisition of a kind whose holds OwnedHoldState describes;
// client carries the fiber thread.
template <typename Core>
void start_owned(const std::shared_ptr<Core>& core, std::shared_ptr<ClientCore> client,
                 std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                 async_entry::AcquireCompletion done) {
    run_acquisition(
        client, deadline, std::move(stop),
        [core, client](std::uint64_t owner_number, std::optional<std::chrono::steady_clock::time_point> until,
                       std::stop_token stop, std::error_code& ec) -> std::shared_ptr<AsyncHoldState> {
            if (!core->acquire(until, stop, ec)) return nullptr;
            return std::make_shared<OwnedHoldState<Core>>(core, client, owner_number);
        },
        std::move(done));
}

}  // namespace dlock::detail
