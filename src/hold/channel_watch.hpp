// Waiters of one process on one channel, each with its own place in a line
// on the server (a semaphore's): unlike NameQueue, where only the head talks
// to Redis, any of them may be called. A message naming a waiter (its id)
// wakes that waiter only; a message naming one of this client's waiters
// that is not asleep (it is asking right now) or any other message, and a
// resubscription (messages may have been missed), wake them all to ask
// again. Messages naming another client's waiters are ignored. A grant
// notice (the server granted that waiter its permits directly: 'granted
// <id>' on the channel from the previous version's scripts, on the client's
// inbox from this version's, which LockService hands to granted()) goes to
// the waiter it names only (one asking right now, since its last sleep or
// since expect(), finds it when it next sleeps); everyone else ignores it. One
// subscription per channel and client, shared by every waiting thread; it
// lives while someone waits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <unordered_map>

#include "runtime/condition.hpp"
#include "dlock/subscription.hpp"
#include "hold.hpp"

namespace dlock::detail {

class ClientCore;

class ChannelWatch : public std::enable_shared_from_this<ChannelWatch> {
public:
    // own_prefix: what the ids of this client's waiters begin with.
    explicit ChannelWatch(std::string own_prefix) : own_prefix_(std::move(own_prefix)) {}

    std::uint64_t generation();
    // Waiter `id` sleeps until it is called, until the generation moves past
    // seen, until wake_at, or stop. True when a grant notice for `id` came
    // (now or since its last sleep): the waiter holds its permits.
    bool wait_change(const std::string& id, std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop);
    // A grant notice for waiter `id` (on the channel, or on the client's
    // inbox): wakes it holding its permits, or keeps the notice for its next
    // sleep while it asks; ignored for a waiter the watch does not know.
    void granted(std::string_view id);
    // Waiter `id` is about to ask: a grant notice for it that comes before
    // it sleeps is kept for its next sleep. Call before its request is sent.
    void expect(const std::string& id);
    // Waiter `id` waits no more (granted, gave up, or asks under another
    // id): a grant notice for it is dropped, and later ones ignored.
    void forget(const std::string& id);
    // Subscribes once for every waiter of the watch, and waits until the
    // server confirmed it (or deadline, or stop). False when not in time.
    bool ensure_subscribed(ClientCore& client, const std::string& channel, LockClock::time_point deadline,
                           std::stop_token stop);
    // Whether the server has confirmed the subscription and it has not
    // dropped since (what it publishes from now on reaches the watch, or a
    // resubscription moves the generation). Does not wait.
    bool listening();

private:
    struct Sleeper {
        Condition wake;
        bool called = false;
        bool granted = false;
    };
    void on_message(Subscription::Event event, std::string_view payload);
    void granted_locked(std::string_view id);

    const std::string own_prefix_;
    std::mutex mutex_;
    std::uint64_t generation_ = 0;
    std::unordered_map<std::string, Sleeper*> sleepers_;  // by waiter id; each on its own stack
    // Waiters expected or that slept once, until forget(): true when a grant
    // notice came for one while it was not asleep. Bounded by the waiters
    // that wait.
    std::unordered_map<std::string, bool> granted_;
    Subscription subscription_;
};

// The watches of one client, by channel.
class ChannelWatches {
public:
    std::shared_ptr<ChannelWatch> watch(const std::string& channel, const std::string& own_prefix);
    // The watch of channel while some waiter of this client keeps it, else null (none made).
    std::shared_ptr<ChannelWatch> existing(const std::string& channel);

private:
    std::mutex mutex_;
    std::unordered_map<std::string, std::weak_ptr<ChannelWatch>> watches_;
    std::size_t created_ = 0;
};

}  // namespace dlock::detail
