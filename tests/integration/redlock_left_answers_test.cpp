// Redlock votes read by their callers (DriveScope of Reach::fan_out,
// docs/design/caller-driven-reads.md, "Fan-out"): the answers that come
// after the majority are left on their connections for whoever reads next.
// These tests check what happens to those answers when nobody reads next
// before their deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/redlock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "server_keys.hpp"
#include "quick_options.hpp"

using namespace std::chrono_literals;

using dlock::test::lock_key;

using dlock::test::quick_options;

namespace {

// Connections the server accepted so far, the one asking included.
long long connections_received(const dlock::support::RedisServer& server) {
    const auto info = server.cli({"INFO", "stats"});
    const std::string field = "total_connections_received:";
    const auto at = info.find(field);
    if (at == std::string::npos) return -1;
    return std::stoll(info.substr(at + field.size()));
}

// Five masters; the last two answer `delay` late (through a proxy), so
// every vote is decided by the first three and leaves two answers owed.
struct FiveMastersTwoSlow {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::unique_ptr<dlock::support::TcpProxy>> proxies;
    FiveMastersTwoSlow() {
        for (int i = 0; i < 5; ++i) servers.push_back(std::make_unique<dlock::support::RedisServer>());
        for (int i = 3; i < 5; ++i) proxies.push_back(std::make_unique<dlock::support::TcpProxy>(servers[i]->port()));
    }
    std::vector<std::string> urls() const {
        std::vector<std::string> out;
        for (int i = 0; i < 3; ++i) out.push_back(servers[i]->uri());
        for (const auto& p : proxies) out.push_back(p->uri());
        return out;
    }
    void delay(std::chrono::milliseconds d) {
        for (auto& p : proxies) p->delay_replies(d);
    }
    // New connections each server accepted since `before` (the asking one not counted).
    std::vector<long long> new_connections(const std::vector<long long>& before) const {
        std::vector<long long> out;
        for (std::size_t i = 0; i < servers.size(); ++i)
            out.push_back(connections_received(*servers[i]) - before[i] - 1);
        return out;
    }
    std::vector<long long> connections() const {
        std::vector<long long> out;
        for (const auto& s : servers) out.push_back(connections_received(*s));
        return out;
    }
};

std::string show(const std::vector<long long>& v) {
    std::string out;
    for (auto x : v) out += std::to_string(x) + " ";
    return out;
}

}  // namespace

// An answer that arrives within its node timeout, after the majority, on a
// connection nobody reads before the next tick: the tick must read it, not
// drop the connection as overdue. Lease 1 s: node timeout 20 ms (lease / 50),
// shorter than the 50 ms tick. Two masters answer 5 ms late, well within it.
// Holding the lock 100 ms between votes leaves nobody to read the late
// answers but the tick.
TEST(RedlockLeftAnswers, ALateAnswerInTimeIsReadNotDroppedAsOverdue) {
    FiveMastersTwoSlow m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "late-in-time", {.lease = 1s, .node_timeout = 20ms});
    for (int i = 0; i < 3; ++i) {  // the connections park
        lock.lock();
        lock.unlock();
    }
    std::this_thread::sleep_for(300ms);
    m.delay(5ms);
    std::this_thread::sleep_for(50ms);
    const auto before = m.connections();
    for (int i = 0; i < 10; ++i) {
        lock.lock();
        std::this_thread::sleep_for(100ms);
        lock.unlock();
        std::this_thread::sleep_for(100ms);
    }
    const auto reconnects = m.new_connections(before);
    // No master was ever slower than its node timeout: no connection had
    // any reason to be reset.
    for (std::size_t i = 0; i < reconnects.size(); ++i)
        EXPECT_EQ(reconnects[i], 0) << "master " << i << " was reconnected; new connections per master: "
                                    << show(reconnects);
}

// The same with no proxy and default node timeout for a 1 s lease (20 ms):
// five local servers on a busy machine rarely answer at the same instant,
// so the answers past the majority are left to the tick too.
TEST(RedlockLeftAnswers, IdleHoldsOverFiveLocalMastersResetNoConnection) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> urls;
    for (int i = 0; i < 5; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        urls.push_back(servers.back()->uri());
    }
    dlock::Masters masters(urls, quick_options());
    dlock::Redlock lock(masters, "idle-holds", {.lease = 1s});
    for (int i = 0; i < 3; ++i) {
        lock.lock();
        lock.unlock();
    }
    std::this_thread::sleep_for(300ms);
    std::vector<long long> before;
    for (auto& s : servers) before.push_back(connections_received(*s));
    for (int i = 0; i < 20; ++i) {
        lock.lock();
        std::this_thread::sleep_for(60ms);
        lock.unlock();
        std::this_thread::sleep_for(60ms);
    }
    std::vector<long long> reconnects;
    for (std::size_t i = 0; i < servers.size(); ++i)
        reconnects.push_back(connections_received(*servers[i]) - before[i] - 1);
    long long total = 0;
    for (auto r : reconnects) total += r;
    EXPECT_EQ(total, 0) << "new connections per master: " << show(reconnects);
}

// A granter that answers after the majority, below the token, within its
// node timeout, is raised (Redlock.ALateGrantersAnswerIsReadWithNoFurtherCall
// with a node timeout shorter than the tick): its answer must be read, not
// failed as overdue, or the fence stays behind.
TEST(RedlockLeftAnswers, ALateGranterWithinItsNodeTimeoutIsRaised) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    for (int i = 0; i < 5; ++i) servers.push_back(std::make_unique<dlock::support::RedisServer>());
    dlock::support::TcpProxy slow(servers[0]->port());
    std::vector<std::string> urls{slow.uri()};
    for (int i = 1; i < 5; ++i) urls.push_back(servers[i]->uri());
    dlock::Masters masters(urls, quick_options());
    int left_behind = 0;
    std::string detail;
    for (int round = 0; round < 6; ++round) {
        const std::string name = "late-granter-" + std::to_string(round);
        dlock::Redlock lock(masters, name, {.lease = 1s, .node_timeout = 20ms});
        slow.delay_replies(0ms);
        std::uint64_t behind = 0;
        for (int i = 0; i < 3; ++i) {
            lock.lock();
            behind = lock.fencing_token();
            lock.unlock();
        }
        for (int i : {1, 2, 3, 4})
            servers[i]->cli({"HSET", lock_key(name) + ":fence", "token", std::to_string(behind + 1'000'000'000)});
        std::this_thread::sleep_for(200ms);
        masters.client(0).command({"PING"});  // read by this thread: the connection parks
        slow.delay_replies(5ms);  // master 0 answers 5 ms late, within its 20 ms
        const auto connections_before = connections_received(*servers[0]);
        lock.lock();
        const auto token = lock.fencing_token();
        std::this_thread::sleep_for(200ms);
        const auto reconnects = connections_received(*servers[0]) - connections_before - 1;
        const bool raised = dlock::support::eventually(
            [&] { return std::stoull(servers[0]->cli({"HGET", lock_key(name) + ":fence", "token"})) >= token; }, 500ms);
        if (!raised) {
            ++left_behind;
            detail += " round " + std::to_string(round) + ": token " + std::to_string(token) + ", master 0 at " +
                      servers[0]->cli({"HGET", lock_key(name) + ":fence", "token"}) + ", its connection reset " +
                      std::to_string(reconnects) + " times;";
        }
        lock.unlock();
    }
    EXPECT_EQ(left_behind, 0) << detail;
}

// Several Redlock objects on several threads over two Masters (two
// "processes") contend for one name with a short lease (renewals on the
// I/O thread interleave with the votes) while masters are paused and
// resumed: never two holders at once, and no try_lock_for returns much
// later than its timeout.
TEST(RedlockLeftAnswers, ContendedVotesWithPausedMastersKeepOneHolderAndTheirDeadlines) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> urls;
    for (int i = 0; i < 5; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        urls.push_back(servers.back()->uri());
    }
    dlock::Masters first(urls, quick_options());
    dlock::Masters second(urls, quick_options());
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    std::atomic<long long> acquired{0};
    std::atomic<long long> worst_overshoot_ms{0};
    std::atomic<bool> stop{false};
    auto worker = [&](dlock::Masters& masters, int seed) {
        dlock::Redlock lock(masters, "contended", {.lease = 300ms});
        unsigned x = static_cast<unsigned>(seed);
        while (!stop.load()) {
            const auto timeout = std::chrono::milliseconds(20 + (x = x * 1103515245u + 12345u) % 80);
            const auto start = std::chrono::steady_clock::now();
            bool got = false;
            try {
                got = lock.try_lock_for(timeout);
            } catch (const dlock::Error&) {
            }
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - start - timeout).count();
            long long seen = worst_overshoot_ms.load();
            while (took > seen && !worst_overshoot_ms.compare_exchange_weak(seen, took)) {
            }
            if (!got) continue;
            if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
            ++acquired;
            std::this_thread::sleep_for(std::chrono::milliseconds(1 + x % 3));
            inside.fetch_sub(1);
            try {
                lock.unlock();
            } catch (const dlock::Error&) {
            }
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) threads.emplace_back(worker, std::ref(first), i + 1);
    for (int i = 0; i < 2; ++i) threads.emplace_back(worker, std::ref(second), i + 11);
    std::thread chaos([&] {
        unsigned x = 7;
        const auto until = std::chrono::steady_clock::now() + 6s;
        while (std::chrono::steady_clock::now() < until) {
            auto& s = *servers[(x = x * 1103515245u + 12345u) % 5];
            s.pause();
            std::this_thread::sleep_for(std::chrono::milliseconds(20 + x % 60));
            s.resume();
            std::this_thread::sleep_for(std::chrono::milliseconds(x % 40));
        }
        stop = true;
    });
    chaos.join();
    for (auto& t : threads) t.join();
    std::printf("acquisitions %lld, worst overshoot %lld ms\n", acquired.load(), worst_overshoot_ms.load());
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_GT(acquired.load(), 0);
    // The node timeout is 10 ms (lease / 50, floored); a vote's answers are
    // waited for at most its deadline and 200 ms beyond, should a client close.
    EXPECT_LT(worst_overshoot_ms.load(), 150) << acquired.load() << " acquisitions";
}

// Votes whose late answers are left on the connections while other threads
// use the same masters' clients: blocking ECHOs (which then deliver the
// votes' late answers first) and asynchronous ones (which hand the
// connections to the I/O thread). Every ECHO gets its own text back and
// every lock+unlock succeeds.
TEST(RedlockLeftAnswers, LeftAnswersAndPlainCommandsOnTheSameClientsNeverMix) {
    FiveMastersTwoSlow m;
    dlock::Masters masters(m.urls(), quick_options());
    m.delay(3ms);
    std::atomic<bool> stop{false};
    std::atomic<int> wrong{0};
    std::atomic<int> errors{0};
    std::atomic<long long> echoes{0};
    std::atomic<int> in_flight{0};
    auto blocking = [&](int id) {
        for (int n = 0; !stop.load(); ++n) {
            const auto text = "b" + std::to_string(id) + "-" + std::to_string(n);
            try {
                auto reply = masters.client(static_cast<std::size_t>(n % 5)).command({"ECHO", text});
                if (reply.text != text) ++wrong;
                ++echoes;
            } catch (const dlock::Error& e) {
                if (++errors <= 3) std::printf("blocking ECHO failed: %s\n", e.what());
            }
        }
    };
    auto asynchronous = [&] {
        for (int n = 0; !stop.load(); ++n) {
            auto text = std::make_shared<std::string>("a-" + std::to_string(n));
            ++in_flight;
            std::string_view args[] = {"ECHO", *text};
            masters.client(static_cast<std::size_t>(n % 5)).submit(args, [&, text](std::error_code ec, dlock::Reply&& r) {
                if (ec && ++errors <= 3) std::printf("asynchronous ECHO failed: %s\n", ec.message().c_str());
                if (!ec && r.text != *text) ++wrong;
                ++echoes;
                --in_flight;
            });
            std::this_thread::sleep_for(2ms);
        }
    };
    std::atomic<int> lock_failures{0};
    std::atomic<long long> cycles{0};
    auto locker = [&](int id) {
        // Renewals every 100 ms interleave with the votes; a node timeout
        // of its own (lease / 50 would be 10 ms), so that a busy machine's
        // slow answer is not a genuine timeout, which resets the connection
        // and fails what waits behind it, as it must.
        dlock::Redlock lock(masters, "mixed-" + std::to_string(id), {.lease = 300ms, .node_timeout = 250ms});
        while (!stop.load()) {
            try {
                lock.lock();
                std::this_thread::sleep_for(std::chrono::milliseconds(id * 7 % 30));
                lock.unlock();
                ++cycles;
            } catch (const dlock::Error&) {
                ++lock_failures;
            }
        }
    };
    std::vector<std::thread> threads;
    threads.emplace_back(blocking, 1);
    threads.emplace_back(blocking, 2);
    threads.emplace_back(asynchronous);
    for (int i = 1; i <= 3; ++i) threads.emplace_back(locker, i);
    std::this_thread::sleep_for(4s);
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_TRUE(dlock::support::eventually([&] { return in_flight.load() == 0; }, 3s));
    std::printf("echoes %lld, cycles %lld, echo errors %d, lock failures %d\n", echoes.load(), cycles.load(),
                errors.load(), lock_failures.load());
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(lock_failures.load(), 0);
    EXPECT_GT(cycles.load(), 0);
}
