#include "name_queue.hpp"

#include <algorithm>

#include "redis/client_core.hpp"

namespace dlock::detail {

std::uint64_t NameQueue::enqueue() {
    std::lock_guard lock(mutex_);
    tickets_.push_back(next_ticket_);
    return next_ticket_++;
}

bool NameQueue::wait_turn(std::uint64_t ticket, std::optional<LockClock::time_point> deadline, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    auto my_turn = [&] { return !tickets_.empty() && tickets_.front() == ticket; };
    if (deadline) return changed_.wait_until(lock, stop, *deadline, my_turn);
    return changed_.wait(lock, stop, my_turn);
}

void NameQueue::leave(std::uint64_t ticket) {
    {
        std::lock_guard lock(mutex_);
        auto it = std::find(tickets_.begin(), tickets_.end(), ticket);
        if (it != tickets_.end()) tickets_.erase(it);
    }
    changed_.notify_all();
}

bool NameQueue::empty() {
    std::lock_guard lock(mutex_);
    return tickets_.empty();
}

std::uint64_t NameQueue::generation() {
    std::lock_guard lock(mutex_);
    return generation_;
}

void NameQueue::bump() {
    {
        std::lock_guard lock(mutex_);
        ++generation_;
    }
    changed_.notify_all();
}

void NameQueue::wait_change(std::uint64_t seen, LockClock::time_point wake_at, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    changed_.wait_until(lock, stop, wake_at, [&] { return generation_ != seen; });
}

bool NameQueue::ensure_subscribed(ClientCore& client, const std::string& channel, LockClock::time_point deadline) {
    {
        std::lock_guard lock(mutex_);
        if (!subscription_) {
            std::weak_ptr<NameQueue> weak = weak_from_this();
            subscription_ = client.subscribe(channel, [weak](Subscription::Event, std::string_view) {
                if (auto queue = weak.lock()) queue->bump();
            });
        }
    }
    return subscription_.wait_active(deadline);
}

}  // namespace dlock::detail
