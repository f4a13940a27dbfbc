#include "fork_guard.hpp"

#include <pthread.h>

#include <atomic>
#include <new>

namespace dlock::detail {
namespace {

std::atomic<unsigned> fork_generation{0};

void on_fork_child() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

const bool fork_handler_installed = [] {
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
}();

// A lock-free list: a mutex here could have been held by another thread of
// the parent when it forked.
struct Kept {
    const void* object;
    Kept* next;
};
std::atomic<Kept*> kept{nullptr};

}  // namespace

unsigned current_fork_generation() noexcept {
    (void)fork_handler_installed;
    return fork_generation.load(std::memory_order_relaxed);
}

void keep_in_child(const void* object) noexcept {
    auto* node = new (std::nothrow) Kept{object, kept.load(std::memory_order_relaxed)};
    if (!node) return;
    while (!kept.compare_exchange_weak(node->next, node, std::memory_order_release, std::memory_order_relaxed)) {
    }
}

}  // namespace dlock::detail
