// The holds of one client (or one set of Redlock masters), by lock name and
// owner. Every lock object for a name shares them: two Lock objects used by
// one thread for one name are one owner with one hold and one count, so
// neither can release what the other still holds.
//
// Each (name, owner) has a slot: its current hold, and a gate that lets one
// operation of that owner on that name be in flight at a time. The scripts
// keep one operation id per owner on the server (lock.hpp, "Retries"); with
// the gate, a retry can never be mistaken for a new operation of the same
// owner, nor a new one for a retry — also with Ownership::handle, where many
// threads act for one owner. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/condition.hpp"
#include "runtime/inline_text.hpp"
#include "slot_table.hpp"
#include "dlock/error.hpp"
#include "hold.hpp"

namespace dlock::detail {

class OwnerGate {
public:
    // Waits until no other operation of this owner is in flight, then
    // enters. False at the deadline or when stop is requested; then
    // `unanswered` says whether the gate was held by an operation whose
    // caller walked away before the server answered it (see unanswered()).
    bool enter(std::optional<LockClock::time_point> deadline, std::stop_token stop, bool& unanswered) {
        std::unique_lock lock(mutex_);
        auto free = [&] { return !busy_; };
        bool entered = true;
        if (busy_) {
            // Made by the first caller that must wait: most gates are never
            // waited on, and a Condition costs an allocation (a slot is made
            // for every name an owner locks).
            if (!free_) free_.emplace();
            entered = deadline ? free_->wait_until(lock, stop, *deadline, free) : free_->wait(lock, stop, free);
        }
        if (entered) busy_ = true;
        unanswered = !entered && unanswered_;
        return entered;
    }
    void leave() {
        std::lock_guard lock(mutex_);
        busy_ = false;
        unanswered_ = false;
        // Under the mutex: free_ is made under it too.
        if (free_) free_->notify_one();
    }
    // The operation in flight goes on without its caller, its outcome not
    // known yet (a deadline passed with no answer): the next caller that
    // cannot get in learns that it never reached the server, rather than
    // taking the wait for contention.
    void unanswered() {
        std::lock_guard lock(mutex_);
        if (busy_) unanswered_ = true;
    }
    bool busy() {
        std::lock_guard lock(mutex_);
        return busy_;
    }

private:
    std::mutex mutex_;
    std::optional<Condition> free_;  // made when a caller first waits
    bool busy_ = false;
    bool unanswered_ = false;
};

struct OwnerSlot {
    // The registry's key of this slot (owner, then name) is kept in the
    // slot itself: with the common lengths inline, so that a slot is one
    // allocation besides its map entry.
    OwnerSlot(std::string_view owner, std::string_view name)
        : key_{owner, name}, key_owner(key_.view(0, owner.size())), key_name(key_.view(owner.size(), name.size())) {}
    OwnerSlot(const OwnerSlot&) = delete;
    OwnerSlot& operator=(const OwnerSlot&) = delete;

    OwnerGate gate;

    std::shared_ptr<Hold> current() const {
        std::lock_guard lock(mutex);
        return hold;
    }
    void set(std::shared_ptr<Hold> h) {
        std::lock_guard lock(mutex);
        hold = std::move(h);
    }
    // Forgets h if it is still the current hold.
    void clear(const std::shared_ptr<Hold>& h) {
        std::lock_guard lock(mutex);
        if (hold == h) hold.reset();
    }

    mutable std::mutex mutex;
    std::shared_ptr<Hold> hold;  // the latest hold of this owner; may be final until replaced or cleared

private:
    const InlineText<120> key_;

public:
    const std::string_view key_owner, key_name;  // views of key_
};

// The gate of one slot, entered; leaves it when destroyed. Movable, so an
// operation the caller walked away from can carry it to its end.
class GateTicket {
public:
    GateTicket() = default;
    explicit GateTicket(std::shared_ptr<OwnerSlot> slot) : slot_(std::move(slot)) {}
    GateTicket(GateTicket&& other) noexcept = default;
    GateTicket& operator=(GateTicket&& other) noexcept {
        if (this != &other) {
            leave();
            slot_ = std::move(other.slot_);
        }
        return *this;
    }
    ~GateTicket() { leave(); }
    void leave() {
        if (slot_) std::exchange(slot_, nullptr)->gate.leave();
    }
    // Carried by a call whose caller walked away unanswered (OwnerGate::unanswered).
    void unanswered() {
        if (slot_) slot_->gate.unanswered();
    }
    explicit operator bool() const noexcept { return slot_ != nullptr; }

private:
    std::shared_ptr<OwnerSlot> slot_;
};

class HoldRegistry {
public:
    // The slot of (name, owner), made on first use.
    std::shared_ptr<OwnerSlot> slot(const std::string& name, const std::string& owner) {
        std::lock_guard lock(mutex_);
        if (auto* found = slots_.find({owner, name})) return *found;
        return slots_.insert(std::make_shared<OwnerSlot>(owner, name));
    }

    // The current hold of (name, owner), or null; makes no slot.
    std::shared_ptr<Hold> current(const std::string& name, const std::string& owner) const {
        std::lock_guard lock(mutex_);
        auto* found = slots_.find({owner, name});
        return found ? (*found)->current() : nullptr;
    }

    // Drops the slot when nothing uses it any more: no hold that is not
    // final, no operation in flight, no one else holding it. Keeps the
    // table from growing with every (name, owner) ever used.
    void release_if_idle(const std::string& name, const std::string& owner) {
        std::lock_guard lock(mutex_);
        auto* found = slots_.find({owner, name});
        if (!found || found->use_count() > 1) return;
        auto hold = (*found)->current();
        if ((hold && !hold->final()) || (*found)->gate.busy()) return;
        slots_.erase(found);
    }

private:
    mutable std::mutex mutex_;
    SlotTable<OwnerSlot> slots_;  // lookups name a slot by the caller's strings: no string made
};

// One operation of an owner on a name: its slot, its gate entered for the
// operation's length, and the slot dropped afterwards if nothing uses it.
class OwnerOperation {
public:
    // slot: the (name, owner) slot when the caller keeps it already (none: looked up).
    OwnerOperation(HoldRegistry& registry, const std::string& name, const std::string& owner,
                   std::shared_ptr<OwnerSlot> slot = nullptr)
        : registry_(registry), name_(name), owner_(owner), slot_(slot ? std::move(slot) : registry.slot(name, owner)) {}
    ~OwnerOperation() {
        ticket.leave();
        slot_.reset();
        registry_.release_if_idle(name_, owner_);
    }
    OwnerOperation(const OwnerOperation&) = delete;
    OwnerOperation& operator=(const OwnerOperation&) = delete;

    // Waits for the gate (see OwnerGate::enter). False at the deadline or on stop.
    bool enter(std::optional<LockClock::time_point> deadline, std::stop_token stop) {
        std::error_code ignored;
        return enter(deadline, stop, ignored);
    }
    // As above; when the gate stayed shut because an earlier call of this
    // owner is still unanswered (its caller walked away), ec is
    // command_timeout: this call never reached the server either, which is
    // not contention.
    bool enter(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
        bool unanswered = false;
        if (!slot_->gate.enter(deadline, stop, unanswered)) {
            if (unanswered && !stop.stop_requested()) ec = make_error_code(errc::command_timeout);
            return false;
        }
        ticket = GateTicket(slot_);
        return true;
    }
    OwnerSlot& slot() noexcept { return *slot_; }

    GateTicket ticket;  // may be handed to a call the caller walks away from

private:
    HoldRegistry& registry_;
    const std::string& name_;
    const std::string& owner_;
    std::shared_ptr<OwnerSlot> slot_;
};

}  // namespace dlock::detail
