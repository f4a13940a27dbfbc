// The threads of one process waiting for one lock name, in arrival order.
//
// Only the thread at the head talks to Redis; the others sleep on a local
// condition variable, so a release wakes one waiter per process, not all.
// The queue owns the subscription to the lock's channel that all its waiters
// share (one per server: a Redlock listens on every master): a release
// message or a resubscription (messages may have been missed) bumps the
// generation, and the head retries.
//
// Hand-off (single-server locks): a thread of this process that releases the
// lock while the head sleeps may hand the lock straight to the head instead
// of releasing it (one script that renames the owner and issues a new
// fencing token). The head wakes holding it: no release message, no race
// with other processes, one round trip instead of three. To stay fair to
// other processes, hand-offs continue only for a slice of time
// (LockOptions::handoff_slice) after this process took the lock from the
// server; then the lock is released and every process's head races for it.
//
// Seats (single-server locks): the hand-off may also place the waiter behind
// the head in the server's line (hand_off.lua), so that it need not ask for
// its place when its turn comes: the releasing thread claims it with the
// head (claim_head), and gives it the place it took (seat_successor), which
// it takes over as it becomes head (take_seat). A seat it never takes (it
// left the queue first) is given back by its own end: the queue keeps it as
// an opaque shared object whose destructor does that.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/condition.hpp"
#include "dlock/subscription.hpp"
#include "hold.hpp"

namespace dlock::detail {

class ClientCore;

class NameQueue : public std::enable_shared_from_this<NameQueue> {
public:
    // What a hand-off gives the head: the grant (its validity counts from
    // the hand-off's send; slice_start carries on from hold to hold), and the
    // hand-off's operation id, should the head have to give it back.
    struct Handed {
        Grant grant;
        std::string operation;
    };

    // owner: the waiter's; tag: which lock (and options) it waits with:
    // only a waiter of the releasing thread's is placed by its hand-off.
    std::uint64_t enqueue(std::string owner = {}, const void* tag = nullptr);
    // Waits until ticket is at the head. False at the deadline or on stop.
    bool wait_turn(std::uint64_t ticket, std::optional<LockClock::time_point> deadline, std::stop_token stop);
    void leave(std::uint64_t ticket);

    std::uint64_t generation();
    void bump();
    // Sleeps until the generation moves past seen, until wake_at, or stop.
    void wait_change(std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop);

    // The head sleeps until the generation moves past seen, until wake_at,
    // or stop, and may be handed the lock meanwhile (returned). owner and
    // lease_ms say whom to hand it to. A hand-off under way is waited for
    // past wake_at, but not past the caller's deadline or stop: the head
    // then gives up on it, and the releasing thread gives back whatever
    // the hand-off gave (finish_handoff says so).
    std::optional<Handed> sleep_as_head(std::uint64_t seen, LockClock::time_point wake_at,
                                       std::optional<LockClock::time_point> deadline, std::stop_token stop,
                                       const std::string& owner, const std::string& lease_ms);
    // A releasing thread: claims the sleeping head for a hand-off, when
    // there is one, and the waiter behind it of the same tag, when it has
    // not been placed or claimed yet (successor empty: none).
    struct Claimed {
        std::string owner, lease_ms;  // the head's
        std::uint64_t ticket = 0;
        std::string successor;  // the waiter behind it, to be placed in line
        std::uint64_t successor_ticket = 0;
    };
    bool claim_head(Claimed& claimed, const void* tag);
    // Ends the claim of a successor: `seat` is the place the hand-off took
    // for it (null: none; it may be claimed again). False when it left the
    // queue meanwhile, or gave up waiting for its seat: the caller's seat is
    // then its own to give back (dropping it does).
    bool seat_successor(std::uint64_t ticket, std::shared_ptr<void> seat);
    // The head, as it begins to wait in line: the seat a hand-off placed it
    // with, or null. Waits while a hand-off is placing it, though not past
    // deadline or stop (the seat, when it comes, is then given back).
    std::shared_ptr<void> take_seat(std::optional<LockClock::time_point> deadline, std::stop_token stop);
    // Ends the hand-off claimed for ticket: the head wakes holding the lock,
    // or (nullopt) goes back to waiting as before. False when that head gave
    // up on it meanwhile: what the hand-off gave is then the caller's to undo.
    bool finish_handoff(std::uint64_t ticket, std::optional<Handed> handed);

    // Subscribes to channel on every server, once for the whole queue, and
    // waits until `needed` of them confirmed it (or deadline, or stop).
    // False when not confirmed in time.
    bool ensure_subscribed(std::span<const std::shared_ptr<ClientCore>> servers, std::size_t needed,
                           std::string_view channel, LockClock::time_point deadline, std::stop_token stop);
    // Whether `needed` of the queue's subscriptions are confirmed now (what
    // is published from here on reaches the queue, or a resubscription bumps
    // the generation). Does not wait; false before ensure_subscribed.
    bool listening(std::size_t needed);

private:
    // Each waiter sleeps on its own condition variable: a release, a
    // message or a hand-off wakes only the head, not every waiting thread.
    struct Waiter {
        std::uint64_t ticket = 0;
        Condition wake;
        // The hand-off (head only): sleeping heads may be claimed; a claimed
        // one is receiving until finish_handoff, which leaves `handed`.
        enum class HandOff { awake, sleeping, receiving } hand_off = HandOff::awake;
        std::string owner, lease_ms;
        std::optional<Handed> handed;
        const void* tag = nullptr;
        // Its seat: none (may be claimed), claimed (a hand-off is placing
        // it), ready (`seat` waits to be taken), settled (taken, or given up:
        // never claimed again).
        enum class Seat { none, claimed, ready, settled } seat_state = Seat::none;
        std::shared_ptr<void> seat;
    };
    Waiter* find_locked(std::uint64_t ticket);
    void wake_head_locked();

    std::mutex mutex_;
    std::list<Waiter> waiters_;
    std::uint64_t next_ticket_ = 0;
    std::uint64_t generation_ = 0;
    std::vector<Subscription> subscriptions_;
};

// The queues of one client (or Redlock group), by lock name; a queue lives
// while someone waits in it.
class QueueRegistry {
public:
    std::shared_ptr<NameQueue> queue(const std::string& name);
    std::shared_ptr<NameQueue> existing_queue(const std::string& name);

private:
    std::mutex mutex_;
    std::unordered_map<std::string, std::weak_ptr<NameQueue>> queues_;
    std::size_t created_ = 0;
};

}  // namespace dlock::detail
