// A fiber: a function with its own stack that can park in the middle of a
// call and be resumed later, by one thread (its runner, fiber_runner.hpp).
//
// Why fibers: the asynchronous API (dlock/async.hpp) runs exactly the code
// of the synchronous one — every lock kind's acquire, wait, hand-off and
// release — inside a fiber. Where that code waits (a condition, an
// answer from the server), it parks the fiber instead of the thread
// (condition.hpp), so one thread carries thousands of waits, and there is
// no second implementation of any lock's state machine to keep in step.
//
// Stacks are mapped lazily (only the pages a fiber touches cost memory),
// with a guard page below them: an overflow faults instead of corrupting
// the heap. Switches are announced to AddressSanitizer and ThreadSanitizer.
//
// Thread-safety: resume() and everything a fiber does run on its runner's
// thread; wake() may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include <ucontext.h>

namespace dlock::detail {

class FiberRunner;

class Fiber : public std::enable_shared_from_this<Fiber> {
public:
    // What the synchronous code needs, with room; callbacks the library runs
    // inside an operation (on_unlock_error, a metrics sink) share it.
    static constexpr std::size_t stack_bytes = 256 * 1024;
    // Fibers alive in the process at most (two memory mappings each).
    static constexpr std::size_t max_fibers = 16384;

    // body runs on the fiber's stack at the first resume(). owner_number
    // names the fiber as an owner of holds (owner_ids.hpp) while it runs.
    Fiber(FiberRunner& runner, std::function<void()> body, std::uint64_t owner_number);
    ~Fiber();
    Fiber(const Fiber&) = delete;
    Fiber& operator=(const Fiber&) = delete;

    // The fiber running on this thread, or null (a plain thread).
    static Fiber* current() noexcept;

    // Runner thread: runs the fiber until it parks or ends.
    void resume();
    bool finished() const noexcept { return finished_; }

    // Inside the fiber: returns to the runner until wake() is called (at
    // once when a wake() came since the last park ended). Wake-ups may be
    // spurious: callers re-check what they wait for.
    void park();
    // Any thread: makes a parked fiber runnable again (posted to its runner).
    void wake();

    FiberRunner& runner() noexcept { return runner_; }

private:
    static void entry();
    void switch_in();   // runner -> fiber
    void switch_out();  // fiber -> runner

    FiberRunner& runner_;
    std::function<void()> body_;
    const std::uint64_t owner_number_;
    void* stack_ = nullptr;  // the mapping, guard page first
    ucontext_t context_{}, caller_{};
    bool finished_ = false;

    std::mutex wake_mutex_;
    bool parked_ = false;    // switched out in park(), not yet posted for resumption
    bool notified_ = false;  // a wake() that found it running

    // Sanitizer bookkeeping of the stack switches.
    void* asan_fake_stack_ = nullptr;
    const void* caller_stack_bottom_ = nullptr;
    std::size_t caller_stack_size_ = 0;
    void* tsan_fiber_ = nullptr;
    void* tsan_caller_ = nullptr;
};

}  // namespace dlock::detail
