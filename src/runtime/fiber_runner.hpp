// The thread that runs a client's fibers (fiber.hpp): the asynchronous
// operations of dlock/async.hpp. One per client, started on its first
// asynchronous operation. It is not the client's I/O thread: a fiber's work
// (the same code as a synchronous call's) never delays replies.
//
// Closing (the client's close, before its I/O thread stops): every running
// operation is asked to stop (its stop token), which ends its waits within
// about a round trip, as a stop request ends a synchronous call; the
// runner's thread ends when they have.
//
// Thread-safety: spawn(), shutdown() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <map>
#include <unordered_map>
#include <utility>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

namespace dlock::detail {

class Fiber;

class FiberRunner : public std::enable_shared_from_this<FiberRunner> {
public:
    // Started: its thread keeps it alive until the thread ends.
    static std::shared_ptr<FiberRunner> start();
    FiberRunner();
    ~FiberRunner();  // shutdown()
    FiberRunner(const FiberRunner&) = delete;
    FiberRunner& operator=(const FiberRunner&) = delete;

    // Runs body(stop) in a new fiber named by owner_number; stop is
    // requested when stop_source is, and at shutdown. False (body not run)
    // once shut down.
    bool spawn(std::function<void(std::stop_token)> body, std::uint64_t owner_number, std::stop_source stop);

    // Asks every fiber to stop; with wait, waits for them to end and for
    // the thread to end. From the runner's own thread (a handler that closed
    // its client), or without wait, the thread is left to end by itself.
    void shutdown(bool wait = true);

    // abort runs once at shutdown (a wait that is no fiber: async_wait_lost),
    // unless forgotten first. False (not registered) once shut down.
    bool add_abort(std::uint64_t& id, std::function<void()> abort);
    void forget_abort(std::uint64_t id);

    asio::io_context& io() noexcept { return io_; }
    bool shut_down() {
        std::lock_guard lock(mutex_);
        return shut_down_;
    }
    bool on_runner_thread() const noexcept { return std::this_thread::get_id() == thread_id_.load(); }

private:
    friend class Fiber;
    void run();
    void resume(const std::shared_ptr<Fiber>& fiber);  // runner thread

    asio::io_context io_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};

    std::mutex mutex_;
    bool shut_down_ = false;
    std::map<std::uint64_t, std::function<void()>> aborts_;
    std::uint64_t next_abort_ = 1;
    // The fibers started and not ended, each with its stop source.
    std::unordered_map<Fiber*, std::pair<std::shared_ptr<Fiber>, std::stop_source>> running_;
};

// A number no thread and no other fiber uses as its owner number
// (owner_ids.hpp): each asynchronous operation owns its holds.
std::uint64_t new_owner_number();

}  // namespace dlock::detail
