#include "channel_watch.hpp"

#include <algorithm>

#include "redis/client_core.hpp"

namespace dlock::detail {

std::uint64_t ChannelWatch::generation() {
    std::lock_guard lock(mutex_);
    return generation_;
}

void ChannelWatch::bump() {
    {
        std::lock_guard lock(mutex_);
        ++generation_;
    }
    changed_.notify_all();
}

void ChannelWatch::wait_change(std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    changed_.wait_until(lock, stop, wake_at, [&] { return generation_ != seen; });
}

bool ChannelWatch::ensure_subscribed(ClientCore& client, const std::string& channel, LockClock::time_point deadline,
                                     std::stop_token stop) {
    Subscription* subscription;
    {
        std::lock_guard lock(mutex_);
        if (!subscription_) {
            std::weak_ptr<ChannelWatch> weak = weak_from_this();
            subscription_ = client.subscribe(channel, [weak](Subscription::Event, std::string_view) {
                // A message, or a resubscription after which one may have been missed: try again.
                if (auto watch = weak.lock()) watch->bump();
            });
        }
        subscription = &subscription_;  // set once, never replaced while the watch lives
    }
    // The confirmation is a round trip; a stop request is honoured within a slice of it.
    constexpr std::chrono::milliseconds slice{10};
    while (!stop.stop_requested()) {
        const auto until = std::min(deadline, LockClock::now() + slice);
        if (subscription->wait_active(until)) return true;
        if (until >= deadline) return false;
    }
    return false;
}

std::shared_ptr<ChannelWatch> ChannelWatches::watch(const std::string& channel) {
    std::lock_guard lock(mutex_);
    auto& slot = watches_[channel];
    if (auto watch = slot.lock()) return watch;
    auto watch = std::make_shared<ChannelWatch>();
    slot = watch;
    // Channels nobody waits on any more leave expired entries: sweep now and then.
    if (++created_ % 1024 == 0) std::erase_if(watches_, [](const auto& entry) { return entry.second.expired(); });
    return watch;
}

}  // namespace dlock::detail
