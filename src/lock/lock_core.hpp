// The state behind one dlock::Lock: its identity, and the owners it made
// holds for (so that its destructor releases exactly the holds it made).
// The holds themselves live in the client's registry (hold_registry.hpp),
// shared with every other Lock object for the same name.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include "hold/acquisition_engine.hpp"
#include "hold/hold.hpp"
#include "hold/outage.hpp"
#include "hold/retried_call.hpp"
#include "hold_steps.hpp"
#include "runtime/inline_text.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

class LinePlace;
class LineSeat;

class LockCore : public std::enable_shared_from_this<LockCore> {
public:
    // One owner of this object's calls, made once per owner rather than
    // per call: its name, its tombstone key, and its slot in the client's
    // registry (which keeps the slot while this holds it; the last
    // reference gives it back, HoldRegistry::release_if_idle).
    struct CallOwner {
        CallOwner(const LockCore& core, std::uint64_t number, std::shared_ptr<const std::string> name);
        ~CallOwner();
        CallOwner(const CallOwner&) = delete;
        CallOwner& operator=(const CallOwner&) = delete;

        const std::shared_ptr<LockService> service;
        const std::shared_ptr<const LockIdentity> identity;
        const std::uint64_t number;  // OwnerIds::calling_number(); 0: the handle
        // Shared with the thread's other lock objects (OwnerIds::shared_thread_owner).
        const std::shared_ptr<const std::string> name_storage;
        const std::string& name;
    private:
        const InlineText<160> tombstone_;  // kept in this object: no allocation of its own

    public:
        const std::string_view tombstone;  // identity->keys.tombstone(name)
        std::shared_ptr<OwnerSlot> slot;
    };

    // fair: every waiting thread stands in the server's line itself and no
    // local hand-off skips it (FairLock); otherwise only the first of this
    // process's waiting threads does, and hand-offs may (Lock).
    LockCore(std::shared_ptr<ClientCore> client, std::string name, LockOptions options, bool fair = false);

    std::string current_owner() const { return calling_owner()->name; }
    // The calling owner (current_owner()), made once per owner: the last
    // one is kept, so a lock used by one thread makes none per call.
    std::shared_ptr<const CallOwner> calling_owner() const;
    std::shared_ptr<Hold> hold_of(const std::string& owner) const {
        return service->holds().current(identity->name, owner);
    }

    // Blocks until held, deadline, stop, or failure (ec set). Returns within
    // about a round trip after the deadline or the stop request.
    // The engine (hold/acquisition_engine.hpp) drives LockAcquisition
    // (lock_acquisition.cpp).
    bool acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec);
    // Releases one hold of the calling owner. With wait_until, waits for
    // the owner's gate and the answer only until then: past it, the release
    // goes on without the caller, who holds nothing from then on, and ec is
    // command_timeout (no hand-off to a local waiter on this path).
    void release(std::error_code& ec, std::optional<LockClock::time_point> wait_until = std::nullopt);
    // Releases one hold of the calling owner without waiting for the
    // server's answer to a final release (Lock::unlock_nowait): the hold is
    // released here at once, and the release's outcome, when it comes, goes
    // to on_unlock_error on the I/O thread. A release that leaves holds
    // (re-entered) waits as release() does.
    void release_nowait(std::error_code& ec);
    // Releases the holds this object made and did not release (destructor,
    // move-assignment). Best effort; never throws.
    void release_outstanding() noexcept;
    // An asynchronous acquisition's hold leaves this object's keeping for
    // its AsyncHold's (Contributions::hand_over).
    void hand_over(const std::shared_ptr<Hold>& hold) { contributions_.hand_over(this, hold); }

    const std::shared_ptr<ClientCore> client;
    const std::shared_ptr<LockService> service;
    const std::shared_ptr<const LockIdentity> identity;

private:
    friend class LinePlace;
    friend class LineSeat;
    friend class LockAcquisition;
    using Answer = ScriptAnswer;

    // Runs one script call through RetriedCall; the caller waits until
    // wait_until (none: until known) or stop. Walking away hands the gate
    // and the handler make_undo makes (called with the outcome when it
    // comes) to the call.
    Answer run(const Script& script, ClientCore::Args keys, ClientCore::Args argv,
               std::optional<LockClock::time_point> wait_until, std::stop_token stop, GateTicket& ticket,
               MakeLate make_undo,
               RetriedCall::Migration migration = RetriedCall::Migration::within_window);
    Answer run(const Script& script, std::initializer_list<std::string_view> keys,
               std::initializer_list<std::string_view> argv, std::optional<LockClock::time_point> wait_until,
               std::stop_token stop, GateTicket& ticket, MakeLate make_undo) {
        return run(script, ClientCore::Args(keys.begin(), keys.size()), ClientCore::Args(argv.begin(), argv.size()),
                   wait_until, stop, ticket, make_undo);
    }
    // acquire.lua for owner in `mode` ("fresh" or "reenter"), as a new
    // operation: through run(), or with replica_ack followed by WAIT on a
    // dedicated connection, bounded alike by wait_until and stop. A grant
    // nobody will use (the caller walked away, too few replicas confirmed
    // it: replicas_not_acknowledged) is undone.
    // With take_place, a busy answer keeps (or takes) the owner's place in
    // the server's line. grant_arrival: a re-entry names its hold's
    // (Hold::grant_arrival), an attempt in line its wait's (acquire.lua).
    Answer send_acquire(const CallOwner& owner, std::string_view mode, GateTicket& ticket,
                        std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                        bool take_place = false, bool new_wait = false, std::string_view grant_arrival = {});

    AcquisitionProtocol::Reentry reenter(const std::shared_ptr<Hold>& hold, const CallOwner& owner,
                                         GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                         std::stop_token stop, std::error_code& ec);
    // One acquire.lua attempt; with place, in the server's line (it takes
    // or keeps the owner's place there, and notes what the answer says of it).
    AttemptResult attempt(const CallOwner& owner, OwnerSlot& slot, GateTicket& ticket,
                          std::optional<LockClock::time_point> wait_until, std::stop_token stop, std::error_code& ec,
                          LinePlace* place);
    // A direct grant for this wait, taken from its notice as held (not with
    // replica_ack, whose grants must be acknowledged first): its hold is
    // valid until its place's last confirmed keeping + waiter_lease, and a
    // renewal confirming it leaves at once, carrying the owner's gate so
    // that the owner's next call on it (a release, a re-entry) comes after
    // the confirmation. False when there is no such notice or its validity
    // is over (the next attempt then confirms the grant, if it is still there).
    bool take_direct_grant(LinePlace& place, const std::shared_ptr<const std::string>& owner, OwnerSlot& slot,
                           GateTicket& ticket);
    // A grant confirmed by the server: a new hold, tracked and renewed, or
    // (its validity already over) undone. False when undone.
    bool record_grant(const std::shared_ptr<const std::string>& owner, OwnerSlot& slot, const Grant& grant,
                      const std::string& operation);
    // Releases `holds` holds (or all) of owner; the gate is held.
    // tombstone: the owner's tombstone key, when the caller has it (empty: made here).
    void release_holds(const std::string& owner, OwnerSlot& slot, GateTicket& ticket, unsigned holds,
                       std::error_code& ec, std::optional<LockClock::time_point> wait_until = std::nullopt,
                       std::string_view tombstone = {});
    // At the final release: hands the lock to this process's sleeping queue
    // head instead of releasing it (name_queue.hpp). False when there is no
    // one to hand it to, or it is not ours any more.
    bool hand_off(const std::shared_ptr<Hold>& hold, OwnerSlot& slot, std::error_code& ec);
    // Sends a release of operation `operation`'s effect (only if nothing
    // came after it) without waiting: the cleanup of a grant nobody uses.
    // placed_waiter: a waiter an undone hand-off may have placed in line
    // (its seat), whose place goes with it.
    void undo(const std::string& owner, const std::string& operation, std::shared_ptr<GateTicket> ticket = {},
              std::string_view placed_waiter = {});
    // Sends call without waiting for it (retried within the retry window).
    void send_unattended(const HoldCall& call, std::shared_ptr<GateTicket> ticket = {});
    // Gives owner's place in the line back, and a grant to it that nobody
    // took (line_leave.lua), named by the wait's arrival (0: whichever wait
    // of owner stands there). Best effort, unattended: a place not given
    // back ends waiter_lease after its last refresh.
    void give_back_place(const std::string& owner, std::uint64_t arrival) noexcept;
    Answer run(const HoldCall& call, std::optional<LockClock::time_point> wait_until, std::stop_token stop,
               GateTicket& ticket, MakeLate make_undo) {
        const HoldCallViews views(call);
        return run(*call.script, views.keys, views.argv, wait_until, stop, ticket, make_undo);
    }
    LockClock::time_point retry_window_end() const;

    const bool fair_;
    // Cluster only: this lock's inbox (LockService::name_inbox).
    Subscription name_inbox_;
    const std::shared_ptr<const std::string> handle_owner_;  // Ownership::handle only
    mutable std::mutex owner_mutex_;
    mutable std::shared_ptr<const CallOwner> last_owner_;  // calling_owner()'s last
    // The owners this object made holds for; what it made is counted on
    // each hold (Hold::contribute), and dies with the hold.
    Contributions contributions_;
};

}  // namespace dlock::detail
