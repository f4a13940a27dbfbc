// Mutual exclusion through Redlock across processes and threads: a
// non-atomic read-modify-write on a counter must lose no update.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/redlock.hpp"
#include "redis_server.hpp"

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
