// sched_yield() calls on the lock+unlock path, counted by defining
// sched_yield in this test binary (its own executable: the library is linked
// in statically, so its calls come here). A yield is a system call, and on a
// busy machine a context switch: the call path makes none. epoll_wait() is
// counted the same way: the I/O thread's every sleep is one, so every
// wake-up of it is too, a context switch the caller's round trip pays for. The standard
// library's semaphore made four per "is it there yet?" (libstdc++ 12), which
// is why the call path waits on its own (runtime/wake_count.hpp). Counts, not
// timings: each figure is the least of a few rounds.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>

#include "dlock/client.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "least_per_cycle.hpp"
#include "redis_server.hpp"

namespace {
std::atomic<std::uint64_t> yields{0};
std::atomic<std::uint64_t> identity_reads{0};  // getpid() and gethostname()
std::atomic<std::uint64_t> epoll_sleeps{0};    // epoll_wait() that may block
}  // namespace

extern "C" int epoll_wait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
    if (timeout != 0) epoll_sleeps.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(syscall(SYS_epoll_pwait, epfd, events, maxevents, timeout, nullptr, 0));
}

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

// counter's count per lock+unlock of lock (the least of rounds rounds).
template <typename Counter, typename Lockable>
double per_lock_unlock(Counter&& counter, Lockable& lock, int rounds) {
    return dlock::support::least_per_cycle(counter,
                                           [&](int) {
                                               lock.lock();
                                               lock.unlock();
                                           },
                                           {.warm_up = 100, .rounds = rounds, .cycles = 200});
}

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
    const double per_cycle = per_lock_unlock([] { return identity_reads.load(); }, lock, 3);
    std::printf("reused Lock: %.2f getpid/gethostname calls per lock+unlock\n", per_cycle);
    // The host's name is looked at again once a second: a round that spans
    // a second boundary counts one.
    EXPECT_LT(per_cycle, 0.1);
}

// The I/O thread sleeps once per wake-up: in epoll_wait. A blocking caller
// reads its own replies (the read baton), so a lock+unlock wakes it never,
// and a Redlock vote neither: the caller reads every master's answer itself
// and leaves those that come after the majority to its next vote. Before,
// each vote woke the masters' I/O thread 1.2-1.7 times (answers in bursts):
// 2.4-3.3 of the 6-9 context switches of a lock+unlock over five masters.
// What remains is the connections' deadline ticks (each at most every 50 ms).
TEST(CallPathYield, ALockUnlockWakesNoIoThread) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    dlock::Lock lock(client, "yield:io");
    const auto before = epoll_sleeps.load();
    epoll_event event{};
    const int epoll = epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(epoll, 0);
    (void)epoll_wait(epoll, &event, 1, 1);
    close(epoll);
    ASSERT_GE(epoll_sleeps.load() - before, 1u) << "this binary's epoll_wait is not the one called";
    const double per_cycle = per_lock_unlock([] { return epoll_sleeps.load(); }, lock, 5);
    std::printf("reused Lock: %.2f I/O thread sleeps per lock+unlock\n", per_cycle);
    EXPECT_LT(per_cycle, 0.2);
}

// Every other kind's blocking calls read their own replies as well. A
// Semaphore's acquire and release did not (the scripts' waits had no
// DriveScope): the I/O thread read both replies and woke the caller twice
// per permit, 2.0 sleeps of it per acquire+release. In a contended run (4
// processes x 8 threads on 4 permits) that was 9.5-9.9 context switches per
// acquisition against 8.1-8.3 now.
TEST(CallPathYield, EveryKindsAcquireAndReleaseWakeNoIoThread) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    dlock::FairLock fair(client, "yield:fair");
    dlock::RwLock rw(client, "yield:rw");
    dlock::Semaphore semaphore(client, "yield:semaphore", {.limit = 2});
    const auto io_sleeps = [] { return epoll_sleeps.load(); };
    const dlock::support::RoundsOf rounds{.warm_up = 100, .rounds = 5, .cycles = 200};
    const double fair_cycle = per_lock_unlock(io_sleeps, fair, 5);
    const double write_cycle = per_lock_unlock(io_sleeps, rw, 5);
    const double read_cycle = dlock::support::least_per_cycle(io_sleeps,
                                                              [&](int) {
                                                                  rw.lock_shared();
                                                                  rw.unlock_shared();
                                                              },
                                                              rounds);
    const double permit_cycle = dlock::support::least_per_cycle(io_sleeps,
                                                                [&](int) {
                                                                    auto permit = semaphore.acquire();
                                                                    permit.release();
                                                                },
                                                                rounds);
    std::printf("I/O thread sleeps per acquire+release: FairLock %.2f, RwLock write %.2f, read %.2f, "
                "Semaphore permit %.2f\n",
                fair_cycle, write_cycle, read_cycle, permit_cycle);
    EXPECT_LT(fair_cycle, 0.2);
    EXPECT_LT(write_cycle, 0.2);
    EXPECT_LT(read_cycle, 0.2);
    EXPECT_LT(permit_cycle, 0.2);
}

TEST(CallPathYield, ARedlockLockUnlockOverFiveMastersWakesTheirIoThreadRarely) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> urls;
    for (int i = 0; i < 5; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        urls.push_back(servers.back()->uri());
    }
    dlock::Masters masters(urls);
    dlock::Redlock lock(masters, "yield:redlock");
    const double per_cycle = per_lock_unlock([] { return epoll_sleeps.load(); }, lock, 5);
    std::printf("Redlock over 5 masters: %.2f I/O thread sleeps per lock+unlock\n", per_cycle);
    EXPECT_LT(per_cycle, 0.5);
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
