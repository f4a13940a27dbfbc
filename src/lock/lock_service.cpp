#include "lock_service.hpp"

#include <future>
#include <random>

#include "lock_scripts.hpp"

namespace dlock::detail {
namespace {

std::string random_client_id() {
    std::random_device device;
    std::string id;
    static constexpr char hex[] = "0123456789abcdef";
    for (int i = 0; i < 4; ++i) {
        auto word = device();
        for (int j = 0; j < 8; ++j, word >>= 4) id.push_back(hex[word & 0xf]);
    }
    return id;  // 128 random bits
}

std::uint64_t this_thread_number() {
    static std::atomic<std::uint64_t> next{1};
    thread_local const std::uint64_t number = next.fetch_add(1);
    return number;
}

}  // namespace

LockService::LockService(ClientCore& core) : core_(core), client_id_(random_client_id()), keeper_(core) {
    core_.before_stop([this] { release_all_on_stop(); });
}

std::shared_ptr<LockService> LockService::of(ClientCore& core) {
    return std::static_pointer_cast<LockService>(core.attachment([&] { return std::make_shared<LockService>(core); }));
}

std::string LockService::thread_owner() const { return client_id_ + ":t" + std::to_string(this_thread_number()); }

std::string LockService::new_handle_owner() { return client_id_ + ":h" + std::to_string(next_handle_.fetch_add(1)); }

std::string LockService::next_operation_id() { return std::to_string(next_operation_.fetch_add(1)); }

std::shared_ptr<NameQueue> LockService::queue(const std::string& name) {
    std::lock_guard lock(queues_mutex_);
    auto& slot = queues_[name];
    if (auto queue = slot.lock()) return queue;
    auto queue = std::make_shared<NameQueue>();
    slot = queue;
    // Names nobody waits for any more leave expired entries; sweep them now
    // and then so the map does not grow with every name ever waited on.
    if (++queues_created_ % 1024 == 0)
        std::erase_if(queues_, [](const auto& entry) { return entry.second.expired(); });
    return queue;
}

std::shared_ptr<NameQueue> LockService::existing_queue(const std::string& name) {
    std::lock_guard lock(queues_mutex_);
    auto it = queues_.find(name);
    return it == queues_.end() ? nullptr : it->second.lock();
}

void LockService::release_all_on_stop() {
    auto holds = keeper_.live_holds();
    std::vector<ClientCore::EvalCall> calls;
    std::vector<std::future<void>> done;
    for (auto& hold : holds) {
        {
            std::lock_guard lock(hold->mutex);
            if (hold->released || hold->lost || hold->count == 0) continue;
            hold->released = true;
        }
        auto promise = std::make_shared<std::promise<void>>();
        done.push_back(promise->get_future());
        calls.push_back({{hold->lock->keys.lock, hold->lock->keys.fence(), hold->lock->keys.channel()},
                         {hold->owner, hold->lock->lease_ms, next_operation_id(), "1"},
                         [promise](std::error_code, Reply&&) { promise->set_value(); }});
    }
    core_.eval_many(release_script(), calls);
    // Bounded: every call completes by its command timeout.
    for (auto& f : done) f.wait();
}

}  // namespace dlock::detail
