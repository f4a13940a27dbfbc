// The I/O thread clients run on: one asio::io_context and the thread that
// runs it. A Client has a loop of its own; the masters of a Redlock share
// one (MastersCore): one thread hears every master's answers that the
// voting caller does not read itself (connection.hpp, DriveScope), not one
// thread per master.
//
// Members: every ClientCore on a loop holds it and is one of its members
// from its construction to its stop(). The thread starts with run() (a
// Client's own loop: when its core starts; a shared one: once its owner
// has started every member, so that each topology starts before the thread
// runs, as topology.hpp asks). A member leaves with its shutdown, which
// runs on the loop; the last to leave also lets the thread end and joins
// it (or detaches it, when that is the thread leaving). A stopped member
// whose last reference drops while the loop still runs for the others is
// kept until the thread has ended: handlers still queued for its closed
// sockets and cancelled timers may refer to it.
//
// Each connection keeps its own deadlines on the loop: a member whose
// server stops answering holds up no other member's replies. Host names
// are resolved on the loop's one resolver thread, one after the other.
//
// fork(): a child has no loop thread. Members do not call in there (their
// ForkGuard), and a loop whose last reference drops in a child is kept,
// not destroyed (fork_guard.hpp).
//
// Thread-safety: every function from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "asio.hpp"
#include "fork_guard.hpp"

namespace dlock::detail {

class IoLoop : public std::enable_shared_from_this<IoLoop> {
public:
    // Not running yet: see run().
    static std::shared_ptr<IoLoop> make();
    ~IoLoop();
    IoLoop(const IoLoop&) = delete;
    IoLoop& operator=(const IoLoop&) = delete;

    asio::io_context& io() noexcept { return io_; }
    bool on_io_thread() const noexcept { return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire); }
    std::thread::id thread_id() const noexcept { return thread_id_.load(std::memory_order_acquire); }

    // A member joins. Throws Error(client_closed) once its last member left.
    void join();
    // Starts the thread; once (later calls do nothing).
    void run();
    // Runs fn with no handler of this loop running beside it: at once
    // before run() or on the loop's thread, else on the loop's thread
    // while the caller waits (an exception comes back to the caller).
    void run_alone(const std::function<void()>& fn);
    // Posts fn to the loop, unless the thread has finished running
    // handlers: then false, and fn is left to the caller to run.
    template <typename F>
    bool post_unless_ended(F& fn) {
        std::lock_guard lock(mutex_);
        if (io_ended_) return false;
        asio::post(io_, std::move(fn));
        return true;
    }
    // A member leaves; shutdown (may be empty) runs on the loop's thread.
    // Returns once shutdown has run (unless on the loop's thread, or before
    // run(): then it runs later). The last member's leave lets the thread
    // end and joins it (detaches it on the loop's own thread), starting it
    // first if it never ran, so that every member's shutdown runs.
    void leave(std::function<void()> shutdown);
    // Keeps destroy to run once the thread has ended (a stopped member still
    // referred to by queued handlers); false when it has: run it now.
    bool keep_until_ended(std::function<void()>& destroy);

private:
    IoLoop();
    void run_io() noexcept;
    void run_locked(std::unique_lock<std::mutex>& lock);

    const ForkGuard fork_guard_;
    asio::io_context io_;
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    std::atomic<std::thread::id> thread_id_{};

    std::mutex mutex_;
    std::thread thread_;
    bool started_ = false;
    std::size_t members_ = 0;
    bool closing_ = false;      // the last member left
    bool io_ended_ = false;     // run() is over: a post would not run (post_unless_ended)
    bool thread_done_ = false;  // nothing more runs on the thread
    std::vector<std::function<void()>> kept_;
};

}  // namespace dlock::detail
