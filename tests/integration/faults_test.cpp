// Failures of the server: killed, down, back, paused. No call blocks past its
// timeout, nothing in flight is resent, and the client recovers by itself.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "ping.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::ping;

namespace {

dlock::ClientOptions short_timeouts() {
    dlock::ClientOptions o;
    o.connect_timeout = 300ms;
    o.command_timeout = 500ms;
    o.reconnect_backoff_max = 200ms;
    return o;
}

bool recovers_within(dlock::Client& client, std::chrono::milliseconds limit) {
    auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
        if (!ping(client)) return true;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

}  // namespace

TEST(Faults, ServerKilledMidCommandFailsWithinTheCommandTimeoutAndIsNotResent) {
    dlock::support::RedisServer server;
    auto options = short_timeouts();
    options.command_timeout = 3s;
    dlock::Client client(server.uri(), options);
    ASSERT_FALSE(ping(client));
    auto start = Clock::now();
    auto future = std::async(std::launch::async, [&] {
        std::error_code ec;
        std::string_view args[] = {"EVAL", "redis.call('INCR', 'ran'); local t = redis.call('TIME'); "
                                           "while true do end", "0"};
        client.command(args, ec);
        return ec;
    });
    std::this_thread::sleep_for(200ms);
    server.kill();
    auto ec = future.get();
    EXPECT_EQ(ec, dlock::errc::connection_lost) << ec.message();
    EXPECT_LT(Clock::now() - start, 3s);
    server.start();
    ASSERT_TRUE(recovers_within(client, 5s));
    // The server came back empty and nothing ran the script again.
    EXPECT_EQ(server.cli({"GET", "ran"}), "");
}

TEST(Faults, ServerDownAtConnectFailsWithinTheConnectTimeout) {
    auto port = dlock::support::free_port();
    auto options = short_timeouts();
    dlock::Client client("redis://127.0.0.1:" + std::to_string(port), options);
    auto start = Clock::now();
    EXPECT_EQ(ping(client), dlock::errc::connection_refused);
    EXPECT_LT(Clock::now() - start, options.connect_timeout + 200ms);
    // Commands during backoff fail at once with the same typed error.
    start = Clock::now();
    EXPECT_EQ(ping(client), dlock::errc::connection_refused);
    EXPECT_LT(Clock::now() - start, 100ms);
}

TEST(Faults, UnreachableHostFailsWithinTheConnectTimeout) {
    // A paused server accepts TCP (kernel backlog) but never answers the handshake.
    dlock::support::RedisServer server;
    server.pause();
    auto options = short_timeouts();
    options.command_timeout = 2s;
    dlock::Client client(server.uri(), options);
    auto start = Clock::now();
    std::error_code ec;
    client.wait_connected(ec);
    EXPECT_EQ(ec, dlock::errc::connect_timeout);
    EXPECT_LT(Clock::now() - start, options.connect_timeout + 300ms);
    server.resume();
}

TEST(Faults, UnresolvableHostIsResolveFailed) {
    dlock::Client client("redis://no-such-host.invalid:6379", short_timeouts());
    auto ec = ping(client);
    EXPECT_TRUE(ec == dlock::errc::resolve_failed || ec == dlock::errc::connect_timeout) << ec.message();
}

TEST(Faults, RecoversByItselfWhenTheServerComesBack) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), short_timeouts());
    ASSERT_FALSE(ping(client));
    server.stop();
    auto ec = ping(client);
    EXPECT_TRUE(ec == dlock::errc::connection_lost || ec == dlock::errc::connection_refused) << ec.message();
    std::this_thread::sleep_for(300ms);
    server.start();
    EXPECT_TRUE(recovers_within(client, 5s));
}

TEST(Faults, PausedServerTimesOutThenRecoversAfterResume) {
    dlock::support::RedisServer server;
    auto options = short_timeouts();
    dlock::Client client(server.uri(), options);
    ASSERT_FALSE(ping(client));
    server.pause();
    auto start = Clock::now();
    EXPECT_EQ(ping(client), dlock::errc::command_timeout);
    auto elapsed = Clock::now() - start;
    EXPECT_GE(elapsed, options.command_timeout - 5ms);
    EXPECT_LT(elapsed, options.command_timeout + 200ms);
    // Async submissions are answered in bounded time too: timed out by the
    // I/O thread, or failed by the reset that the first timeout caused.
    std::promise<std::error_code> async_result;
    std::string_view args[] = {"PING"};
    client.submit(args, [&](std::error_code ec, dlock::Reply&&) { async_result.set_value(ec); });
    auto f = async_result.get_future();
    ASSERT_EQ(f.wait_for(options.command_timeout + options.connect_timeout + 1s), std::future_status::ready);
    auto async_ec = f.get();
    EXPECT_TRUE(async_ec == dlock::errc::command_timeout || async_ec == dlock::errc::connect_timeout ||
                async_ec == dlock::errc::connection_lost)
        << async_ec.message();
    server.resume();
    EXPECT_TRUE(recovers_within(client, 5s));
}

TEST(Faults, ManyThreadsThroughARestartAllGetAnAnswer) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), short_timeouts());
    std::atomic<bool> stop{false};
    std::atomic<long> ok{0}, failed{0}, wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            for (long i = 0; !stop && i < 1'000'000; ++i) {
                std::string payload = std::to_string(t) + ":" + std::to_string(i);
                std::error_code ec;
                std::string_view args[] = {"ECHO", payload};
                auto r = client.command(args, ec);
                if (ec) ++failed;
                else if (r.text != payload) ++wrong;
                else ++ok;
            }
        });
    }
    std::this_thread::sleep_for(200ms);
    server.kill();
    std::this_thread::sleep_for(200ms);
    server.start();
    std::this_thread::sleep_for(1s);
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(failed.load(), 0);
    EXPECT_GT(ok.load(), 0);
    EXPECT_TRUE(recovers_within(client, 5s));
}
