// EVALSHA with transparent EVAL fallback.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
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
