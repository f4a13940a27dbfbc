#include "fork_guard.hpp"

#include <atomic>
#include <new>

namespace dlock::detail {
namespace {

// A lock-free list: a mutex here could have been held by another thread of
// the parent when it forked.
struct Kept {
    const void* object;
    Kept* next;
};
std::atomic<Kept*> kept{nullptr};

}  // namespace

void keep_in_child(const void* object) noexcept {
    auto* node = new (std::nothrow) Kept{object, kept.load(std::memory_order_relaxed)};
    if (!node) return;
    while (!kept.compare_exchange_weak(node->next, node, std::memory_order_release, std::memory_order_relaxed)) {
    }
}

}  // namespace dlock::detail
