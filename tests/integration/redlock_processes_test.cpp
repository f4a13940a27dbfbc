// Redlock across processes: mutual exclusion across processes and threads (a
// non-atomic read-modify-write on a counter must lose no update), and Masters
// closed in a child that the test can kill should the close hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/redlock.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;

TEST(RedlockProcesses, ThreeProcessesTimesFourThreadsCountExactly) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> urls;
    for (int i = 0; i < 5; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        urls.push_back(servers.back()->uri());
    }
    dlock::support::RedisServer counter_server;  // the resource: not one of the masters
    constexpr int processes = 3, threads = 4, per_worker = 40;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        children.push_back(dlock::support::run_in_child([&] {
            dlock::Masters masters(urls);
            dlock::Client resource(counter_server.uri());
            dlock::Redlock lock(masters, "counter");
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t)
                workers.emplace_back([&] {
                    for (int i = 0; i < per_worker; ++i) {
                        std::lock_guard guard(lock);
                        // Deliberately not atomic: GET, then SET.
                        auto value = resource.command({"GET", "counter"});
                        long n = value.is_nil() ? 0 : std::stol(value.text);
                        resource.command({"SET", "counter", std::to_string(n + 1)});
                    }
                });
            for (auto& w : workers) w.join();
            return 0;
        }));
    }
    for (auto pid : children) EXPECT_EQ(dlock::support::wait_child(pid), 0);
    EXPECT_EQ(counter_server.cli({"GET", "counter"}), std::to_string(processes * threads * per_worker));
    for (auto& s : servers) EXPECT_EQ(s->cli({"EXISTS", "dlock:{counter}"}), "0");
}

// The last Masters dropped inside a callback on their own I/O thread: the
// close cannot wait there for the releases' answers (that thread reads
// them), so it sends them and closes the clients once they are answered. The
// masters give the key back at once, not at the end of its 30 s lease.
TEST(RedlockProcesses, MastersClosedFromACallbackOnTheirLoopReleaseWhatIsHeld) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> urls;
    for (int i = 0; i < 3; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        urls.push_back(servers.back()->uri());
    }
    const std::string key = "dlock:{on-loop}";
    auto holding = [&] {
        int n = 0;
        for (auto& s : servers) n += s->cli({"EXISTS", key}) == "1";
        return n;
    };
    const pid_t child = dlock::support::run_in_child([&] {
        auto masters = std::make_unique<dlock::Masters>(urls);
        dlock::Redlock lock(*masters, "on-loop", {.lease = 30'000ms});
        lock.lock();
        if (!lock.is_held()) return 3;
        std::promise<std::chrono::milliseconds> closed;
        const std::string_view ping[] = {"PING"};
        masters->client(0).submit(ping, [&](std::error_code, dlock::Reply&&) {
            const auto start = std::chrono::steady_clock::now();
            masters.reset();  // on the masters' I/O thread
            closed.set_value(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start));
        });
        auto took = closed.get_future();
        if (took.wait_for(20s) != std::future_status::ready) return 2;
        std::fprintf(stderr, "~Masters on their I/O thread returned in %lld ms\n",
                     static_cast<long long>(took.get().count()));
        // Time for the releases' answers: the child's exit would cut them off.
        std::this_thread::sleep_for(2s);
        return 0;
    });
    ASSERT_EQ(dlock::support::wait_child(child), 0) << "2: the close on the I/O thread never returned; 3: not held";
    EXPECT_EQ(holding(), 0) << "of 3 masters still hold the key (lease 30 s), PTTL " << servers[0]->cli({"PTTL", key})
                            << " ms on the first";
}
