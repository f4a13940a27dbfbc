// The threads of one process waiting for one lock name, in arrival order.
//
// Only the thread at the head talks to Redis; the others sleep on a local
// condition variable, so a release wakes one waiter per process, not all.
// The queue owns the subscription to the lock's channel that all its waiters
// share (one per server: a Redlock listens on every master): a release
// message or a resubscription (messages may have been missed) bumps the
// generation, and the head retries.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlock/subscription.hpp"
#include "hold.hpp"

namespace dlock::detail {

class ClientCore;

class NameQueue : public std::enable_shared_from_this<NameQueue> {
public:
    std::uint64_t enqueue();
    // Waits until ticket is at the head. False at the deadline or on stop.
    bool wait_turn(std::uint64_t ticket, std::optional<LockClock::time_point> deadline, std::stop_token stop);
    void leave(std::uint64_t ticket);
    bool empty();

    std::uint64_t generation();
    void bump();
    // Sleeps until the generation moves past seen, until wake_at, or stop.
    void wait_change(std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop);

    // Subscribes to channel on every server, once for the whole queue, and
    // waits until `needed` of them confirmed it (or deadline). False when
    // not confirmed in time.
    bool ensure_subscribed(std::span<const std::shared_ptr<ClientCore>> servers, std::size_t needed, const std::string& channel,
                           LockClock::time_point deadline);

private:
    std::mutex mutex_;
    std::condition_variable_any changed_;
    std::deque<std::uint64_t> tickets_;
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
