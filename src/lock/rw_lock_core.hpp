// The state behind one dlock::RwLock: two sides on one name, each with its
// own identity (what its holds renew and release with), registry of holds
// and owner gates; both share the client's lease keeper, the name's local
// wait queue and its release channel. The holds are Hold state machines
// (hold.hpp) like every other kind's.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include "dlock/rw_lock.hpp"
#include "hold/acquisition_engine.hpp"
#include "hold/hold.hpp"
#include "hold/retried_call.hpp"
#include "hold_steps.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

enum class RwSide { write, read };

// The read side's holds live in the reader set, not in the lock hash: they
// renew and release there.
struct ReadIdentity : LockIdentity {
    using LockIdentity::LockIdentity;
    HoldCall renewal(const std::string& owner) const override;
    // (A reader's hold never comes from a line: no grant_arrival.)
    HoldCall final_release(const std::string& owner, const std::string& operation,
                           std::string_view grant_arrival) const override;
};

class RwLockCore : public std::enable_shared_from_this<RwLockCore> {
public:
    RwLockCore(std::shared_ptr<ClientCore> client, std::string name, const RwLockOptions& options);

    std::string current_owner() const;
    std::shared_ptr<Hold> hold_of(RwSide side, const std::string& owner) const {
        return registry(side).current(write_->name, owner);
    }
    const LockIdentity& identity(RwSide side) const { return side == RwSide::write ? *write_ : *read_; }

    // Blocks until held, deadline, stop, or failure (ec set), as
    // LockCore::acquire. The write side while the caller reads is one
    // attempt, and without a deadline fails with resource_deadlock_would_occur.
    bool acquire(RwSide side, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                 std::error_code& ec);
    void release(RwSide side, std::error_code& ec);
    // Both sides' holds made through this object and not released.
    void release_outstanding() noexcept;
    // An asynchronous acquisition's hold leaves this object's keeping for
    // its AsyncHold's (Contributions::hand_over).
    void hand_over(const std::shared_ptr<Hold>& hold) { contributions_.hand_over(this, hold); }

    const std::shared_ptr<ClientCore> client;
    const std::shared_ptr<LockService> service;

private:
    friend class RwAcquisition;  // how one side acquires (rw_acquisition.cpp), driven by the engine
    using Answer = ScriptAnswer;

    HoldRegistry& registry(RwSide side) const {
        return side == RwSide::write ? service->holds() : service->shared_holds();
    }
    std::shared_ptr<const LockIdentity> identity_ptr(RwSide side) const {
        return side == RwSide::write ? write_ : read_;
    }
    // The scripts' calls, keys and arguments in one place.
    HoldCall acquire_call(RwSide side, const std::string& owner, std::string_view mode,
                            const std::string& operation) const;
    HoldCall release_call(RwSide side, const std::string& owner, const std::string& operation,
                            std::string how_many, const std::string& undoing = {}) const;

    Answer run(const HoldCall& call, std::optional<LockClock::time_point> wait_until, std::stop_token stop,
               GateTicket& ticket, std::function<void(std::error_code, const Reply&)> undo,
               RetriedCall::Migration migration = RetriedCall::Migration::within_window);
    // One acquisition script call as a new operation; a grant nobody will
    // use (walked away, outcome never learnt) is undone.
    Answer send_acquire(RwSide side, const std::string& owner, std::string_view mode, GateTicket& ticket,
                        std::optional<LockClock::time_point> wait_until, std::stop_token stop);
    AcquisitionProtocol::Reentry reenter(RwSide side, const std::shared_ptr<Hold>& hold, const std::string& owner,
                                         GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                         std::stop_token stop, std::error_code& ec);
    AttemptResult attempt(RwSide side, std::string_view mode, const std::string& owner, OwnerSlot& slot,
                    GateTicket& ticket, std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                    std::error_code& ec, std::string& operation);
    bool record_grant(RwSide side, const std::string& owner, OwnerSlot& slot, const Grant& grant,
                      const std::string& operation);
    void release_holds(RwSide side, const std::string& owner, OwnerSlot& slot, GateTicket& ticket, unsigned holds,
                       std::error_code& ec);
    // Sends, without waiting: the release of `operation`'s effect only if
    // nothing came after it; a waiting writer's withdrawal of its mark.
    void undo(RwSide side, const std::string& owner, const std::string& operation);
    void withdraw(const std::string& owner, const std::string& last_attempt);
    void fire_and_forget(const HoldCall& call);
    LockClock::time_point retry_window_end() const;

    const std::shared_ptr<const LockIdentity> write_;
    const std::shared_ptr<const LockIdentity> read_;
    const bool prefer_readers_;
    const std::string queue_name_;    // the name's local wait queue (both sides)
    const std::string reader_queue_name_;  // readers' own, with prefer_readers
    const std::string handle_owner_;  // Ownership::handle only
    Subscription name_inbox_;         // cluster only: LockService::name_inbox
    Contributions contributions_;  // owners this object made holds for
};

}  // namespace dlock::detail
