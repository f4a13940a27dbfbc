#include "channel_watch.hpp"

#include <algorithm>
#include <utility>

#include "redis/client_core.hpp"

namespace dlock::detail {

namespace {
// semaphore_prelude.lua's serve_line: the waiter named after it holds its permits.
constexpr std::string_view grant_prefix = "granted ";
}  // namespace

std::uint64_t ChannelWatch::generation() {
    std::lock_guard lock(mutex_);
    return generation_;
}

void ChannelWatch::granted(std::string_view id) {
    std::lock_guard lock(mutex_);
    granted_locked(id);
}

void ChannelWatch::granted_locked(std::string_view id) {
    if (id.substr(0, own_prefix_.size()) != own_prefix_) return;  // another client's waiter
    const std::string waiter(id);
    if (auto it = sleepers_.find(waiter); it != sleepers_.end()) {
        it->second->granted = true;
        it->second->wake.notify_all();
    } else if (auto known = granted_.find(waiter); known != granted_.end()) {
        known->second = true;  // between two requests: its next sleep takes it
    }
}

void ChannelWatch::on_message(Subscription::Event event, std::string_view payload) {
    std::lock_guard lock(mutex_);
    if (event == Subscription::Event::message && payload.substr(0, grant_prefix.size()) == grant_prefix)
        return granted_locked(payload.substr(grant_prefix.size()));
    if (event == Subscription::Event::message && payload.substr(0, own_prefix_.size()) != own_prefix_ &&
        payload.find('#') != std::string_view::npos)
        return;  // another client's waiter is called
    if (event == Subscription::Event::message) {
        if (auto it = sleepers_.find(std::string(payload)); it != sleepers_.end()) {
            it->second->called = true;
            it->second->wake.notify_all();
            return;
        }
    }
    // Everyone asks again: the limit changed, messages may have been missed,
    // or the one called is between two requests and must not miss its call.
    ++generation_;
    for (auto& [id, sleeper] : sleepers_) sleeper->wake.notify_all();
}

bool ChannelWatch::wait_change(const std::string& id, std::uint64_t seen, LockClock::time_point wake_at,
                               std::stop_token stop) {
    Sleeper me;
    std::unique_lock lock(mutex_);
    // Known from expect() or its first sleep until forget(): a notice that comes while
    // it asks again is kept for it (and for nobody the watch does not know).
    if (std::exchange(granted_[id], false)) return true;
    sleepers_[id] = &me;
    me.wake.wait_until(lock, stop, wake_at, [&] { return me.granted || me.called || generation_ != seen; });
    sleepers_.erase(id);
    return me.granted;
}

void ChannelWatch::expect(const std::string& id) {
    std::lock_guard lock(mutex_);
    granted_.try_emplace(id, false);
}

void ChannelWatch::forget(const std::string& id) {
    std::lock_guard lock(mutex_);
    granted_.erase(id);
}

bool ChannelWatch::ensure_subscribed(ClientCore& client, const std::string& channel, LockClock::time_point deadline,
                                     std::stop_token stop) {
    Subscription* subscription;
    {
        std::lock_guard lock(mutex_);
        if (!subscription_) {
            std::weak_ptr<ChannelWatch> weak = weak_from_this();
            subscription_ = client.subscribe(channel, [weak](Subscription::Event event, std::string_view payload) {
                if (auto watch = weak.lock()) watch->on_message(event, payload);
            });
        }
        subscription = &subscription_;  // set once, never replaced while the watch lives
    }
    // The confirmation is a round trip; a stop request is honoured within a slice of it.
    constexpr std::chrono::milliseconds slice{10};
    while (!stop.stop_requested()) {
        const auto until = std::min(deadline, LockClock::now() + slice);
        if (subscription->wait_active(until)) return true;
        // Refused (an ACL without the channel): it will not listen, however long we wait.
        if (until >= deadline || subscription->refused()) return false;
    }
    return false;
}

bool ChannelWatch::listening() {
    Subscription* subscription;
    {
        std::lock_guard lock(mutex_);
        if (!subscription_) return false;
        subscription = &subscription_;  // set once, never replaced while the watch lives
    }
    return subscription->active();
}

std::shared_ptr<ChannelWatch> ChannelWatches::existing(const std::string& channel) {
    std::lock_guard lock(mutex_);
    const auto it = watches_.find(channel);
    return it == watches_.end() ? nullptr : it->second.lock();
}

std::shared_ptr<ChannelWatch> ChannelWatches::watch(const std::string& channel, const std::string& own_prefix) {
    std::lock_guard lock(mutex_);
    auto& slot = watches_[channel];
    if (auto watch = slot.lock()) return watch;
    auto watch = std::make_shared<ChannelWatch>(own_prefix);
    slot = watch;
    // Channels nobody waits on any more leave expired entries: sweep now and then.
    if (++created_ % 1024 == 0) std::erase_if(watches_, [](const auto& entry) { return entry.second.expired(); });
    return watch;
}

}  // namespace dlock::detail
