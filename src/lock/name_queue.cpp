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

bool NameQueue::ensure_subscribed(std::span<const std::shared_ptr<ClientCore>> servers, std::size_t needed,
                                  const std::string& channel, LockClock::time_point deadline) {
    {
        std::lock_guard lock(mutex_);
        if (subscriptions_.empty()) {
            std::weak_ptr<NameQueue> weak = weak_from_this();
            for (const auto& server : servers)
                subscriptions_.push_back(server->subscribe(channel, [weak](Subscription::Event, std::string_view) {
                    if (auto queue = weak.lock()) queue->bump();
                }));
        }
    }
    // Confirmations come in any order; one slow server must not hold up the
    // count once enough others have confirmed.
    std::size_t active = 0;
    for (auto& subscription : subscriptions_) active += subscription.active();
    for (auto& subscription : subscriptions_) {
        if (active >= needed) return true;
        if (!subscription.active() && subscription.wait_active(deadline)) ++active;
    }
    return active >= needed;
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
