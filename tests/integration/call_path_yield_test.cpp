// sched_yield() calls on the lock+unlock path, counted by defining
// sched_yield in this test binary (its own executable: the library is linked
// in statically, so its calls come here). A yield is a system call, and on a
// busy machine a context switch: the call path makes none. The standard
// library's semaphore made four per "is it there yet?" (libstdc++ 12), which
// is why the call path waits on its own (runtime/wake_count.hpp). Counts, not
// timings: each figure is the least of a few rounds.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "least_per_cycle.hpp"
#include "redis_server.hpp"

namespace {
std::atomic<std::uint64_t> yields{0};
}  // namespace

extern "C" int sched_yield() noexcept {
    yields.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(syscall(SYS_sched_yield));
}

namespace {

template <typename Cycle>
double yields_per_cycle(Cycle&& cycle) {
    return dlock::support::least_per_cycle([] { return yields.load(); }, [&](int) { cycle(); },
                                           {.warm_up = 100, .rounds = 5, .cycles = 200});
}

TEST(CallPathYield, TheCountingSeesAYield) {
    const auto before = yields.load();
    sched_yield();
    EXPECT_EQ(yields.load() - before, 1u) << "this binary's sched_yield is not the one called";
}

TEST(CallPathYield, ALockUnlockMakesNoYield) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    dlock::Lock lock(client, "yield:reused");
    const double per_cycle = yields_per_cycle([&] {
        lock.lock();
        lock.unlock();
    });
    std::printf("reused Lock: %.2f sched_yield calls per lock+unlock\n", per_cycle);
    EXPECT_EQ(per_cycle, 0.0);
}

TEST(CallPathYield, AClientCommandMakesNoYield) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    const double per_cycle = yields_per_cycle([&] { (void)client.command({"PING"}); });
    std::printf("Client::command: %.2f sched_yield calls per call\n", per_cycle);
    EXPECT_EQ(per_cycle, 0.0);
}

}  // namespace
