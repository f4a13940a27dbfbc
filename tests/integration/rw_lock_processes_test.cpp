// Readers together, a writer alone, across processes and threads: every
// worker counts itself in Redis while it holds a side, and checks the other
// side's count (a writer also checks that it is the only writer).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/rw_lock.hpp"
#include "redis_server.hpp"

namespace {

// A counter's value; a key never set reads as 0.
long as_number(const dlock::Reply& reply) {
    if (reply.is_nil()) return 0;
    return reply.is_integer() ? reply.integer : std::stol(reply.text);
}

}  // namespace

TEST(RwLockProcesses, ReadersRunTogetherAndAWriterExcludesAllAcrossProcessesAndThreads) {
    dlock::support::RedisServer server;
    constexpr int processes = 3, threads = 4, rounds = 40;
    const auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        children.push_back(dlock::support::run_in_child([&, p] {
            dlock::Client client(server.uri());
            auto lock = client.rw_lock("shared-counter");
            std::atomic<int> violations{0};
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t) {
                workers.emplace_back([&, t] {
                    for (int i = 0; i < rounds; ++i) {
                        // One write in ten, as a read-mostly workload.
                        if ((p * threads + t + i) % 10 == 0) {
                            std::unique_lock guard(lock);
                            if (as_number(client.command({"INCR", "writers"})) != 1) ++violations;
                            if (as_number(client.command({"GET", "readers"})) != 0) ++violations;
                            // Not atomic on purpose: lost updates would show.
                            auto value = client.command({"GET", "written"});
                            long n = value.is_nil() ? 0 : std::stol(value.text);
                            client.command({"SET", "written", std::to_string(n + 1)});
                            client.command({"DECR", "writers"});
                        } else {
                            std::shared_lock guard(lock);
                            const long together = as_number(client.command({"INCR", "readers"}));
                            client.command({"EVAL",
                                            "if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) "
                                            "then redis.call('SET', KEYS[1], ARGV[1]) end",
                                            "1", "most-readers", std::to_string(together)});
                            if (as_number(client.command({"GET", "writers"})) != 0) ++violations;
                            std::this_thread::sleep_for(std::chrono::milliseconds(2));
                            client.command({"DECR", "readers"});
                        }
                    }
                });
            }
            for (auto& w : workers) w.join();
            return violations.load() == 0 ? 0 : 1;
        }));
    }
    for (auto pid : children) EXPECT_EQ(dlock::support::wait_child(pid), 0) << "a worker saw the sides overlap";
    // Well under one lease (30 s): no waiter sat out a lease for a wake-up
    // that never came (a writer marked waiting behind a reader of its own
    // process, which waited for that mark, cost a lease each time).
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    int writes = 0;
    for (int p = 0; p < processes; ++p)
        for (int t = 0; t < threads; ++t)
            for (int i = 0; i < rounds; ++i) writes += (p * threads + t + i) % 10 == 0;
    EXPECT_EQ(server.cli({"GET", "written"}), std::to_string(writes));
    EXPECT_GT(std::stol(server.cli({"GET", "most-readers"})), 1) << "readers never ran together";
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{shared-counter}"}), "0");
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{shared-counter}:readers"}), "0");
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{shared-counter}:wwait"}), "0");
}
