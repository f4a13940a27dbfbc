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
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "least_per_cycle.hpp"
#include "redis_server.hpp"

namespace {
std::atomic<std::uint64_t> yields{0};
std::atomic<std::uint64_t> identity_reads{0};  // getpid() and gethostname()
}  // namespace

extern "C" int sched_yield() noexcept {
    yields.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(syscall(SYS_sched_yield));
}

// The holder label names host, process and thread; asking the kernel for
// them at every acquisition cost three system calls per lock+unlock.
extern "C" pid_t getpid() noexcept {
    identity_reads.fetch_add(1, std::memory_order_relaxed);
    return static_cast<pid_t>(syscall(SYS_getpid));
}

extern "C" int gethostname(char* name, std::size_t length) noexcept {
    identity_reads.fetch_add(1, std::memory_order_relaxed);
    utsname names{};
    if (uname(&names) != 0) return -1;
    const std::size_t size = std::strlen(names.nodename) + 1;
    if (size > length) {
        errno = ENAMETOOLONG;
        return -1;
    }
    std::memcpy(name, names.nodename, size);
    return 0;
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

TEST(CallPathYield, ALockUnlockAsksTheKernelNothingForItsHolderLabel) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    dlock::Lock lock(client, "yield:label");
    const auto before = identity_reads.load();
    (void)getpid();
    ASSERT_EQ(identity_reads.load() - before, 1u) << "this binary's getpid is not the one called";
    const double per_cycle = dlock::support::least_per_cycle([] { return identity_reads.load(); },
                                                             [&](int) {
                                                                 lock.lock();
                                                                 lock.unlock();
                                                             },
                                                             {.warm_up = 100, .rounds = 3, .cycles = 200});
    std::printf("reused Lock: %.2f getpid/gethostname calls per lock+unlock\n", per_cycle);
    // The host's name is looked at again once a second: a round that spans
    // a second boundary counts one.
    EXPECT_LT(per_cycle, 0.1);
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
