#include "name_queue.hpp"

#include <algorithm>

#include "redis/client_core.hpp"

namespace dlock::detail {

std::uint64_t NameQueue::enqueue(std::string owner, const void* tag) {
    std::lock_guard lock(mutex_);
    auto& waiter = waiters_.emplace_back();
    waiter.ticket = next_ticket_;
    waiter.owner = std::move(owner);
    waiter.tag = tag;
    return next_ticket_++;
}

NameQueue::Waiter* NameQueue::find_locked(std::uint64_t ticket) {
    for (auto& waiter : waiters_)
        if (waiter.ticket == ticket) return &waiter;
    return nullptr;
}

void NameQueue::wake_head_locked() {
    if (!waiters_.empty()) waiters_.front().wake.notify_all();
}

bool NameQueue::wait_turn(std::uint64_t ticket, std::optional<LockClock::time_point> deadline, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    auto* me = find_locked(ticket);
    auto my_turn = [&] { return waiters_.front().ticket == ticket; };
    if (deadline) return me->wake.wait_until(lock, stop, *deadline, my_turn);
    return me->wake.wait(lock, stop, my_turn);
}

void NameQueue::leave(std::uint64_t ticket) {
    std::shared_ptr<void> untaken_seat;  // given back once the lock is let go (its destructor calls out)
    std::lock_guard lock(mutex_);
    const bool was_head = !waiters_.empty() && waiters_.front().ticket == ticket;
    if (auto* me = find_locked(ticket)) untaken_seat = std::move(me->seat);
    waiters_.remove_if([&](const Waiter& waiter) { return waiter.ticket == ticket; });
    // Only a new head has anything to do: the others keep sleeping.
    if (was_head) wake_head_locked();
}

std::uint64_t NameQueue::generation() {
    std::lock_guard lock(mutex_);
    return generation_;
}

void NameQueue::bump() {
    std::lock_guard lock(mutex_);
    ++generation_;
    wake_head_locked();
}

void NameQueue::wait_change(std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    waiters_.front().wake.wait_until(lock, stop, wake_at, [&] { return generation_ != seen; });
}

std::optional<NameQueue::Handed> NameQueue::sleep_as_head(std::uint64_t seen, LockClock::time_point wake_at,
                                                        std::optional<LockClock::time_point> deadline,
                                                        std::stop_token stop, const std::string& owner,
                                                        const std::string& lease_ms) {
    using HandOff = Waiter::HandOff;
    std::unique_lock lock(mutex_);
    auto& me = waiters_.front();  // the caller is the head, and stays it while it sleeps
    me.owner = owner;
    me.lease_ms = lease_ms;
    me.hand_off = HandOff::sleeping;
    me.wake.wait_until(lock, stop, wake_at, [&] { return generation_ != seen || me.handed.has_value(); });
    // A hand-off that started may have made us the owner: wait for its
    // answer, though not past the caller's deadline or stop.
    auto answered = [&] { return me.hand_off != HandOff::receiving; };
    if (deadline) me.wake.wait_until(lock, stop, *deadline, answered);
    else me.wake.wait(lock, stop, answered);
    // Given up while receiving: finish_handoff finds the head awake, and
    // the releasing thread undoes what it gave.
    me.hand_off = HandOff::awake;
    auto handed = std::move(me.handed);
    me.handed.reset();
    return handed;
}

bool NameQueue::claim_head(Claimed& claimed, const void* tag) {
    std::lock_guard lock(mutex_);
    if (waiters_.empty() || waiters_.front().hand_off != Waiter::HandOff::sleeping) return false;
    auto& head = waiters_.front();
    head.hand_off = Waiter::HandOff::receiving;
    claimed.owner = head.owner;
    claimed.lease_ms = head.lease_ms;
    claimed.ticket = head.ticket;
    claimed.successor.clear();
    if (auto next = std::next(waiters_.begin()); next != waiters_.end() && next->seat_state == Waiter::Seat::none &&
                                                 tag && next->tag == tag && !next->owner.empty() &&
                                                 next->owner != head.owner) {
        next->seat_state = Waiter::Seat::claimed;
        claimed.successor = next->owner;
        claimed.successor_ticket = next->ticket;
    }
    return true;
}

bool NameQueue::seat_successor(std::uint64_t ticket, std::shared_ptr<void> seat) {
    std::lock_guard lock(mutex_);
    auto* waiter = find_locked(ticket);
    if (!waiter || waiter->seat_state != Waiter::Seat::claimed) return false;
    waiter->seat_state = seat ? Waiter::Seat::ready : Waiter::Seat::none;
    waiter->seat = std::move(seat);
    waiter->wake.notify_all();  // it may be waiting for it (take_seat)
    return true;
}

std::shared_ptr<void> NameQueue::take_seat(std::optional<LockClock::time_point> deadline, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    auto& me = waiters_.front();  // the caller is the head
    auto placed = [&] { return me.seat_state != Waiter::Seat::claimed; };
    if (deadline) me.wake.wait_until(lock, stop, *deadline, placed);
    else me.wake.wait(lock, stop, placed);
    // Given up while claimed: seat_successor finds it settled, and the
    // releasing thread gives back what the hand-off took.
    me.seat_state = Waiter::Seat::settled;
    return std::move(me.seat);
}

bool NameQueue::finish_handoff(std::uint64_t ticket, std::optional<Handed> handed) {
    std::lock_guard lock(mutex_);
    auto* head = find_locked(ticket);
    // Gone (it left the queue) or awake (it gave up waiting for this).
    if (!head || head->hand_off != Waiter::HandOff::receiving) return false;
    head->handed = std::move(handed);
    head->hand_off = Waiter::HandOff::sleeping;
    head->wake.notify_all();
    return true;
}

bool NameQueue::ensure_subscribed(std::span<const std::shared_ptr<ClientCore>> servers, std::size_t needed,
                                  std::string_view channel, LockClock::time_point deadline,
                                  std::stop_token stop) {
    {
        std::lock_guard lock(mutex_);
        if (subscriptions_.empty()) {
            std::weak_ptr<NameQueue> weak = weak_from_this();
            for (const auto& server : servers)
                subscriptions_.push_back(server->subscribe(std::string(channel), [weak](Subscription::Event, std::string_view) {
                    if (auto queue = weak.lock()) queue->bump();
                }));
        }
    }
    // Confirmations come in any order; one slow server must not hold up the
    // count once enough others have confirmed.
    std::size_t active = 0;
    for (auto& subscription : subscriptions_) active += subscription.active();
    // The confirmation is a round trip; a stop request is honoured within a
    // slice of that wait.
    constexpr std::chrono::milliseconds slice{10};
    for (auto& subscription : subscriptions_) {
        if (active >= needed) return true;
        if (subscription.active()) continue;
        while (!stop.stop_requested()) {
            auto until = std::min(deadline, LockClock::now() + slice);
            if (subscription.wait_active(until)) {
                ++active;
                break;
            }
            if (until >= deadline || subscription.refused()) break;  // refused: it will not listen
        }
    }
    return active >= needed;
}

bool NameQueue::listening(std::size_t needed) {
    std::lock_guard lock(mutex_);
    std::size_t active = 0;
    for (auto& subscription : subscriptions_) active += subscription.active();
    return !subscriptions_.empty() && active >= needed;
}

std::shared_ptr<NameQueue> QueueRegistry::queue(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto& slot = queues_[name];
    if (auto queue = slot.lock()) return queue;
    auto queue = std::make_shared<NameQueue>();
    slot = queue;
    // Names nobody waits for any more leave expired entries; sweep them now
    // and then so the map does not grow with every name ever waited on.
    if (++created_ % 1024 == 0) std::erase_if(queues_, [](const auto& entry) { return entry.second.expired(); });
    return queue;
}

std::shared_ptr<NameQueue> QueueRegistry::existing_queue(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = queues_.find(name);
    return it == queues_.end() ? nullptr : it->second.lock();
}

}  // namespace dlock::detail
