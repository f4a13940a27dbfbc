#include "io_loop.hpp"

#include <exception>

#include "dlock/error.hpp"
#include "runtime/wake_count.hpp"

namespace dlock::detail {

std::shared_ptr<IoLoop> IoLoop::make() {
    // Dropped in a forked child, the loop is kept: destroying it would
    // deregister the parent's sockets from the epoll instance they share.
    return std::shared_ptr<IoLoop>(new IoLoop(), [](IoLoop* loop) {
        if (loop->fork_guard_.forked()) keep_in_child(loop);
        else delete loop;
    });
}

IoLoop::IoLoop() : work_(asio::make_work_guard(io_)) {}

IoLoop::~IoLoop() {
    // The thread holds the loop while it runs: what is left here is a thread
    // that ended, or this very thread finishing (the last reference was its own).
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
    else thread_.join();
}

void IoLoop::join() {
    std::lock_guard lock(mutex_);
    if (closing_) throw Error(errc::client_closed, "the I/O loop of these clients has closed");
    ++members_;
}

void IoLoop::run() {
    std::unique_lock lock(mutex_);
    run_locked(lock);
}

void IoLoop::run_locked(std::unique_lock<std::mutex>&) {
    if (started_) return;
    started_ = true;
    thread_ = std::thread([self = shared_from_this()] { self->run_io(); });
    thread_id_.store(thread_.get_id(), std::memory_order_release);
}

// No exception may end the I/O thread (an uncaught one terminates the
// process). Connections turn their own handlers' exceptions into connection
// errors; what still arrives here (a completion posted by a client core, or
// a DedicatedConnections callback, that threw) is dropped, and the loop goes
// on: Asio allows run() to be called again after a handler threw.
void IoLoop::run_io() noexcept {
    thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
    for (;;) {
        try {
            io_.run();
            break;
        } catch (...) {
        }
    }
    // No thread runs posts from here: a failure is told on its caller's
    // thread (post_unless_ended). What was posted since run() ran out of work runs now.
    {
        std::lock_guard lock(mutex_);
        io_ended_ = true;
    }
    for (;;) {
        try {
            io_.restart();
            io_.poll();
            break;
        } catch (...) {
        }
    }
    std::vector<std::function<void()>> kept;
    {
        std::lock_guard lock(mutex_);
        thread_done_ = true;
        kept.swap(kept_);
    }
    for (auto& destroy : kept) {
        try {
            destroy();
        } catch (...) {
        }
    }
}

void IoLoop::run_alone(const std::function<void()>& fn) {
    bool started;
    {
        std::lock_guard lock(mutex_);
        started = started_;
    }
    if (!started || on_io_thread()) return fn();
    auto done = std::make_shared<WakeCount>();
    std::exception_ptr failure;
    asio::post(io_, [&fn, &failure, done] {
        try {
            fn();
        } catch (...) {
            failure = std::current_exception();
        }
        done->release();
    });
    done->acquire();
    if (failure) std::rethrow_exception(failure);
}

void IoLoop::leave(std::function<void()> shutdown) {
    auto run_shutdown = [shutdown = std::move(shutdown)] {
        try {
            if (shutdown) shutdown();
        } catch (...) {
        }
    };
    std::unique_lock lock(mutex_);
    const bool last = --members_ == 0;
    if (!last) {
        const bool started = started_;
        lock.unlock();
        if (!started || on_io_thread()) return asio::post(io_, std::move(run_shutdown));
        // This member's connections are closed before its stop returns, as
        // when a client joins its own thread.
        auto done = std::make_shared<WakeCount>();
        asio::post(io_, [run_shutdown = std::move(run_shutdown), done] {
            run_shutdown();
            done->release();
        });
        done->acquire();
        return;
    }
    closing_ = true;
    asio::post(io_, [this, run_shutdown = std::move(run_shutdown)] {
        run_shutdown();
        work_.reset();
        // Handlers still queued for closed sockets and cancelled timers run
        // and return; then run() ends.
    });
    run_locked(lock);
    auto thread = std::move(thread_);
    lock.unlock();
    // A last reference dropped inside a callback: the thread ends by itself.
    if (thread.get_id() == std::this_thread::get_id()) thread.detach();
    else thread.join();
}

bool IoLoop::keep_until_ended(std::function<void()>& destroy) {
    std::lock_guard lock(mutex_);
    if (thread_done_) return false;
    kept_.push_back(std::move(destroy));
    return true;
}

}  // namespace dlock::detail
