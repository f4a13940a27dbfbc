// Heap allocations on the lock+unlock path, counted by replacing operator
// new in this test binary (its own executable, so no other test is
// affected). Counts barely depend on the machine's load, so the bounds are
// counts, not timings: a regression that allocates per call fails here. A
// loaded machine still adds a few (a reply split over two reads, the I/O
// thread's work overlapping the caller's), so each figure is the least of
// a few rounds: the steady state, not the noise. Every thread counts (the caller's and the client's I/O thread), as
// bench/allocation_count.cpp counts for `./run bench`.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "least_per_cycle.hpp"
#include "redis_server.hpp"

namespace {

std::atomic<std::uint64_t> allocations{0};

void* allocate(std::size_t size) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size ? size : 1)) return p;
    throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Allocations per call of `cycle`: the least of a few rounds.
template <typename Cycle>
double allocations_per_cycle(Cycle&& cycle) {
    return dlock::support::least_per_cycle([] { return allocations.load(); }, cycle);
}

class CallPathAllocation : public ::testing::Test {
protected:
    dlock::support::RedisServer server;
    dlock::Client client{server.uri()};
    void SetUp() override { client.wait_connected(); }
};

// The goal in README's table of targets: at most 8 per lock+unlock of a
// Lock reused in a loop (what the replies need, and nothing per call beyond:
// owner, tombstone key and slot are made once per Lock and owner, call
// state and schedule entries are reused, a waiter's walk-away handler is
// made only when it walks away).
TEST_F(CallPathAllocation, AReusedLockAllocatesAtMostEightPerLockUnlock) {
    dlock::Lock lock(client, "allocation:reused-lock-name");
    const double per_cycle = allocations_per_cycle([&](int) {
        lock.lock();
        lock.unlock();
    });
    std::printf("reused Lock: %.2f allocations per lock+unlock\n", per_cycle);
    EXPECT_LE(per_cycle, 8.0);
}

// A Lock made per name (the name's string made outside the count): what
// making and destroying one costs on top of its lock+unlock. The goal is 12
// (README, "Table of targets"); the bound pins today's 22.5 (41.5 before the
// key names shared one buffer and the owners a lock object made holds for
// a vector), with room for a reply split over two reads, so that it only
// goes down.
TEST_F(CallPathAllocation, ALockPerNameAllocatesAtMost25PerLockUnlock) {
    std::vector<std::string> names;
    for (int i = 0; i < 500; ++i) names.push_back("allocation:lock-per-name:" + std::to_string(i));
    const double per_cycle = allocations_per_cycle([&](int i) {
        dlock::Lock lock(client, names[static_cast<std::size_t>(i) % names.size()]);
        lock.lock();
        lock.unlock();
    });
    std::printf("Lock per name: %.2f allocations per lock+unlock\n", per_cycle);
    EXPECT_LE(per_cycle, 25.0);
}

}  // namespace
