#include "fork_generation.hpp"

#include <pthread.h>

#include <atomic>

namespace dlock::detail {
namespace {

std::atomic<unsigned> fork_generation{0};

void on_fork_child() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

const bool fork_handler_installed = [] {
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
}();

}  // namespace

unsigned current_fork_generation() noexcept {
    (void)fork_handler_installed;
    return fork_generation.load(std::memory_order_relaxed);
}

}  // namespace dlock::detail
