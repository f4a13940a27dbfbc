// Mutual exclusion across processes and threads: a non-atomic
// read-modify-write on a Redis counter must lose no update.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "redis_server.hpp"

TEST(LockProcesses, FourProcessesTimesEightThreadsCountExactly) {
    dlock::support::RedisServer server;
    constexpr int processes = 4, threads = 8, total = 2000;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        children.push_back(dlock::support::run_in_child([&, p] {
            dlock::Client client(server.uri());
            auto lock = client.lock("counter");
            std::vector<std::thread> workers;
            std::atomic<int> failures{0};
            for (int t = 0; t < threads; ++t) {
                int worker = p * threads + t;
                int rounds = total / (processes * threads) + (worker < total % (processes * threads) ? 1 : 0);
                workers.emplace_back([&, rounds] {
                    for (int i = 0; i < rounds; ++i) {
                        std::lock_guard guard(lock);
                        // Deliberately not atomic: GET, then SET.
                        auto value = client.command({"GET", "counter"});
                        long n = value.is_nil() ? 0 : std::stol(value.text);
                        client.command({"SET", "counter", std::to_string(n + 1)});
                    }
                });
            }
            for (auto& w : workers) w.join();
            return failures.load() == 0 ? 0 : 1;
        }));
    }
    for (auto pid : children) EXPECT_EQ(dlock::support::wait_child(pid), 0);
    EXPECT_EQ(server.cli({"GET", "counter"}), std::to_string(total));
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{counter}"}), "0");
}
