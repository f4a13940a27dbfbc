// EVALSHA with transparent EVAL fallback.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "redis_server.hpp"

namespace {
const dlock::Script echo_script("return {KEYS[1], ARGV[1], ARGV[2]}");
std::vector<std::string_view> keys{"key:a"};
std::vector<std::string_view> args{"one", "two"};

void expect_echo(const dlock::Reply& r) {
    ASSERT_EQ(r.elements.size(), 3u);
    EXPECT_EQ(r.elements[0].text, "key:a");
    EXPECT_EQ(r.elements[1].text, "one");
    EXPECT_EQ(r.elements[2].text, "two");
}
}  // namespace

TEST(ScriptCache, FirstCallLoadsThenEvalshaIsUsed) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    EXPECT_EQ(server.cli({"SCRIPT", "EXISTS", echo_script.sha1()}), "0");
    expect_echo(client.eval(echo_script, keys, args));
    EXPECT_EQ(server.cli({"SCRIPT", "EXISTS", echo_script.sha1()}), "1");
    auto evalsha_before = server.command_calls("evalsha"), eval_before = server.command_calls("eval");
    expect_echo(client.eval(echo_script, keys, args));
    EXPECT_EQ(server.command_calls("evalsha"), evalsha_before + 1);
    EXPECT_EQ(server.command_calls("eval"), eval_before);
}

TEST(ScriptCache, SurvivesScriptFlush) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    expect_echo(client.eval(echo_script, keys, args));
    server.cli({"SCRIPT", "FLUSH"});
    expect_echo(client.eval(echo_script, keys, args));
    EXPECT_EQ(server.cli({"SCRIPT", "EXISTS", echo_script.sha1()}), "1");
}

TEST(ScriptCache, SurvivesServerRestart) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    expect_echo(client.eval(echo_script, keys, args));
    server.restart();
    // The first call after the restart may meet the dead connection; the one
    // after it must work without the caller handling NOSCRIPT.
    std::error_code ec;
    for (int i = 0; i < 50; ++i) {
        auto r = client.eval(echo_script, keys, args, ec);
        if (!ec) {
            expect_echo(r);
            break;
        }
        EXPECT_TRUE(ec == dlock::errc::connection_lost || ec == dlock::errc::connection_refused) << ec.message();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(ec) << ec.message();
}

TEST(ScriptCache, ScriptErrorsAreServerErrors) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Script broken("return redis.call('NOSUCHCOMMAND')");
    std::error_code ec;
    auto reply = client.eval(broken, {}, {}, ec);
    EXPECT_EQ(ec, dlock::errc::server_error);
    EXPECT_FALSE(reply.text.empty());
}

// Calls answered NOSCRIPT together (pipelined when the server forgot the
// script) send its text once: the first goes again as EVAL, the others as
// EVALSHA behind it. Each used to go as EVAL (the renewals of a thousand
// holds after a restart that lost the data: 15 MB of script text, held in
// the client's output buffer and parsed by the server).
TEST(ScriptCache, CallsAnsweredNoscriptTogetherSendTheScriptOnce) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    expect_echo(client.eval(echo_script, keys, args));
    server.cli({"SCRIPT", "FLUSH"});
    const auto eval_before = server.command_calls("eval");
    constexpr int calls = 200;
    std::atomic<int> answered{0}, right{0};
    for (int i = 0; i < calls; ++i)
        client.eval_async(echo_script, keys, args, [&](std::error_code ec, dlock::Reply&& r) {
            right += !ec && r.elements.size() == 3 && r.elements[2].text == "two";
            ++answered;
        });
    for (int i = 0; i < 500 && answered < calls; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(right, calls);
    EXPECT_EQ(server.command_calls("eval") - eval_before, 1);
}

// The same for the renewals of many holds (one pipelined batch).
TEST(ScriptCache, RenewalsAnsweredNoscriptSendTheScriptOnce) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::vector<dlock::Lock> locks;
    for (int i = 0; i < 100; ++i) {
        locks.push_back(client.lock("renewed:" + std::to_string(i), {.lease = std::chrono::milliseconds(1500)}));
        ASSERT_TRUE(locks.back().try_lock());
    }
    server.cli({"SCRIPT", "FLUSH"});
    const auto eval_before = server.command_calls("eval");
    const auto evalsha_before = server.command_calls("evalsha");
    // Renewals run every third of the lease: two rounds at least.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    for (auto& lock : locks) EXPECT_TRUE(lock.is_held());
    EXPECT_GE(server.command_calls("evalsha") - evalsha_before, 200);
    EXPECT_LE(server.command_calls("eval") - eval_before, 1);
    for (auto& lock : locks) lock.unlock();
}
