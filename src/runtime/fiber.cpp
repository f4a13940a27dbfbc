#include "fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <new>
#include <system_error>

#include "fiber_runner.hpp"
#include "owner_ids.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define DLOCK_ASAN_FIBERS 1
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, std::size_t* size_old);
#endif
#if defined(__SANITIZE_THREAD__)
#define DLOCK_TSAN_FIBERS 1
extern "C" void* __tsan_get_current_fiber();
extern "C" void* __tsan_create_fiber(unsigned flags);
extern "C" void __tsan_destroy_fiber(void* fiber);
extern "C" void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#endif

namespace dlock::detail {
namespace {

thread_local Fiber* current_fiber = nullptr;

std::size_t page_size() {
    static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

}  // namespace

// Fibers alive in the process. Each costs two memory mappings (its stack
// and guard page), and the kernel's map limit (vm.max_map_count, 65,530 by
// default) is shared with malloc: past max_fibers a new operation is
// refused (resource_unavailable_try_again) rather than starve the process.
std::atomic<std::size_t> live_fibers{0};

Fiber::Fiber(FiberRunner& runner, std::function<void()> body, std::uint64_t owner_number)
    : runner_(runner), body_(std::move(body)), owner_number_(owner_number) {
    if (live_fibers.fetch_add(1) >= max_fibers) {
        live_fibers.fetch_sub(1);
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "too many asynchronous lock operations at once");
    }
    const auto guard = page_size();
    // MAP_NORESERVE: only the pages the fiber touches are backed.
    stack_ = ::mmap(nullptr, guard + stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    auto fail = [&] {
        if (stack_) ::munmap(stack_, guard + stack_bytes);
        stack_ = nullptr;
        live_fibers.fetch_sub(1);
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "no memory for an asynchronous operation's stack");
    };
    if (stack_ == MAP_FAILED) {
        stack_ = nullptr;
        fail();
    }
    // An overflow faults here; a stack without its guard is never used.
    if (::mprotect(stack_, guard, PROT_NONE) != 0 || ::getcontext(&context_) != 0) fail();
    context_.uc_stack.ss_sp = static_cast<char*>(stack_) + guard;
    context_.uc_stack.ss_size = stack_bytes;
    context_.uc_link = nullptr;
    ::makecontext(&context_, &Fiber::entry, 0);
#ifdef DLOCK_TSAN_FIBERS
    tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#ifdef DLOCK_TSAN_FIBERS
    if (tsan_fiber_) __tsan_destroy_fiber(tsan_fiber_);
#endif
    if (stack_) ::munmap(stack_, page_size() + stack_bytes);
    if (stack_) live_fibers.fetch_sub(1);
}

Fiber* Fiber::current() noexcept { return current_fiber; }

void Fiber::entry() {
    Fiber* self = current_fiber;
#ifdef DLOCK_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
    try {
        self->body_();
    } catch (...) {
        // The operation's body reports its own failures; nothing may unwind past the fiber's first frame.
    }
    self->body_ = nullptr;
    self->finished_ = true;
    self->switch_out();  // never comes back
}

void Fiber::resume() {
    Fiber* previous = current_fiber;
    current_fiber = this;
    OwnerScope scope(owner_number_);
    switch_in();
    current_fiber = previous;
}

void Fiber::switch_in() {
#ifdef DLOCK_TSAN_FIBERS
    tsan_caller_ = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
#ifdef DLOCK_ASAN_FIBERS
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, context_.uc_stack.ss_sp, context_.uc_stack.ss_size);
#endif
    ::swapcontext(&caller_, &context_);
#ifdef DLOCK_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void Fiber::switch_out() {
#ifdef DLOCK_ASAN_FIBERS
    // A fiber that ended has no frames left to keep.
    __sanitizer_start_switch_fiber(finished_ ? nullptr : &asan_fake_stack_, caller_stack_bottom_, caller_stack_size_);
#endif
#ifdef DLOCK_TSAN_FIBERS
    __tsan_switch_to_fiber(tsan_caller_, 0);
#endif
    ::swapcontext(&context_, &caller_);
#ifdef DLOCK_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(asan_fake_stack_, &caller_stack_bottom_, &caller_stack_size_);
#endif
}

void Fiber::park() {
    {
        std::lock_guard lock(wake_mutex_);
        if (notified_) {
            notified_ = false;
            return;
        }
        parked_ = true;
    }
    // A wake() from now on posts the resumption; it cannot run before this
    // switch, as the runner's one thread is the one running this fiber.
    switch_out();
}

void Fiber::wake() {
    {
        std::lock_guard lock(wake_mutex_);
        if (!parked_) {
            notified_ = true;
            return;
        }
        parked_ = false;
    }
    asio::post(runner_.io(), [self = shared_from_this()] { self->runner_.resume(self); });
}

}  // namespace dlock::detail
