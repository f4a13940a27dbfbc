#include "fiber_runner.hpp"

#include <asio/post.hpp>

#include "fiber.hpp"
#include "owner_ids.hpp"

namespace dlock::detail {

std::uint64_t new_owner_number() { return OwnerIds::new_owner_number(); }

FiberRunner::FiberRunner() : work_(asio::make_work_guard(io_)) {}

std::shared_ptr<FiberRunner> FiberRunner::start() {
    auto runner = std::make_shared<FiberRunner>();
    runner->thread_ = std::thread([self = runner] { self->run(); });
    return runner;
}

FiberRunner::~FiberRunner() { shutdown(); }

void FiberRunner::run() {
    thread_id_ = std::this_thread::get_id();
    // A handler that throws (a user's completion) must not end the thread
    // while fibers still need it.
    for (;;) {
        try {
            io_.run();
            return;
        } catch (...) {
        }
    }
}

bool FiberRunner::spawn(std::function<void(std::stop_token)> body, std::uint64_t owner_number, std::stop_source stop) {
    auto fiber = std::make_shared<Fiber>(
        *this, [body = std::move(body), token = stop.get_token()] { body(token); }, owner_number);
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return false;
        running_.emplace(fiber.get(), std::make_pair(fiber, stop));
    }
    asio::post(io_, [this, fiber] { resume(fiber); });
    return true;
}

void FiberRunner::resume(const std::shared_ptr<Fiber>& fiber) {
    fiber->resume();
    if (!fiber->finished()) return;
    std::lock_guard lock(mutex_);
    running_.erase(fiber.get());
    if (shut_down_ && running_.empty()) work_.reset();
}

bool FiberRunner::add_abort(std::uint64_t& id, std::function<void()> abort) {
    std::lock_guard lock(mutex_);
    if (shut_down_) return false;
    id = next_abort_++;
    aborts_.emplace(id, std::move(abort));
    return true;
}

void FiberRunner::forget_abort(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    aborts_.erase(id);
}

void FiberRunner::shutdown(bool wait) {
    std::vector<std::stop_source> stops;
    std::map<std::uint64_t, std::function<void()>> aborts;
    {
        std::lock_guard lock(mutex_);
        if (!shut_down_) {
            shut_down_ = true;
            for (auto& [raw, entry] : running_) stops.push_back(entry.second);
            aborts.swap(aborts_);
            if (running_.empty()) work_.reset();
        }
    }
    for (auto& stop : stops) stop.request_stop();
    for (auto& [id, abort] : aborts) abort();  // each keeps the thread running until it has completed
    if (!thread_.joinable()) return;
    if (!wait || on_runner_thread()) {
        thread_.detach();  // closed from one of its own handlers: it ends by itself
        return;
    }
    thread_.join();
}

}  // namespace dlock::detail
