// Waiters of one process on one channel, where every message may let
// several of them through (a semaphore's releases): unlike NameQueue, where
// only the head talks to Redis, each waiter here has its own place on the
// server, and a message or a resubscription (messages may have been
// missed) wakes them all to try again. One subscription per channel and
// client, shared by every waiting thread; it lives while someone waits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <unordered_map>

#include "dlock/subscription.hpp"
#include "hold.hpp"

namespace dlock::detail {

class ClientCore;

class ChannelWatch : public std::enable_shared_from_this<ChannelWatch> {
public:
    std::uint64_t generation();
    // Sleeps until the generation moves past seen, until wake_at, or stop.
    void wait_change(std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop);
    // Subscribes once for every waiter of the watch, and waits until the
    // server confirmed it (or deadline, or stop). False when not in time.
    bool ensure_subscribed(ClientCore& client, const std::string& channel, LockClock::time_point deadline,
                           std::stop_token stop);

private:
    void bump();

    std::mutex mutex_;
    std::condition_variable_any changed_;
    std::uint64_t generation_ = 0;
    Subscription subscription_;
};

// The watches of one client, by channel.
class ChannelWatches {
public:
    std::shared_ptr<ChannelWatch> watch(const std::string& channel);

private:
    std::mutex mutex_;
    std::unordered_map<std::string, std::weak_ptr<ChannelWatch>> watches_;
    std::size_t created_ = 0;
};

}  // namespace dlock::detail
