// Passwords, ACL users and TLS: each failure has its own error, fast.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "ping.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using dlock::support::ping;

namespace {

// Runs f and checks that it took less than limit.
template <typename F>
std::error_code timed(std::chrono::milliseconds limit, F f) {
    auto start = std::chrono::steady_clock::now();
    std::error_code ec = f();
    EXPECT_LT(std::chrono::steady_clock::now() - start, limit);
    return ec;
}

}  // namespace

TEST(Auth, PasswordWorks) {
    dlock::support::RedisServer server({.password = "hunter2"});
    dlock::Client client(server.uri());
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
}

TEST(Auth, WrongPasswordIsAuthFailedAtOnce) {
    dlock::support::RedisServer server({.password = "hunter2"});
    dlock::Client client("redis://:wrong@127.0.0.1:" + std::to_string(server.port()));
    EXPECT_EQ(timed(1s, [&] { return ping(client); }), dlock::errc::auth_failed);
    try {
        client.wait_connected();
        FAIL();
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::auth_failed);
        EXPECT_NE(std::string(e.what()).find("WRONGPASS"), std::string::npos) << e.what();
    }
}

TEST(Auth, MissingPasswordIsAuthFailed) {
    dlock::support::RedisServer server({.password = "hunter2"});
    dlock::Client client("redis://127.0.0.1:" + std::to_string(server.port()));
    EXPECT_EQ(timed(1s, [&] { return ping(client); }), dlock::errc::auth_failed);
}

TEST(Auth, UnknownAclUserIsAuthFailed) {
    dlock::support::RedisServer server({.acl_users = {{"alice", "on", ">pw", "~*", "+@all"}}});
    dlock::Client client("redis://mallory:pw@127.0.0.1:" + std::to_string(server.port()));
    EXPECT_EQ(timed(1s, [&] { return ping(client); }), dlock::errc::auth_failed);
}

TEST(Auth, AclUserWithOnlyTheNeededPermissionsWorks) {
    // What dlock's locks use: scripts, publish/subscribe, on dlock keys and channels only.
    dlock::support::RedisServer server({.acl_users = {{"default", "off"},
                                                   {"locker", "on", ">pw", "~dlock:*", "&dlock:*", "+evalsha",
                                                    "+eval", "+set", "+get", "+subscribe", "+unsubscribe",
                                                    "+publish"}}});
    dlock::Client client("redis://locker:pw@127.0.0.1:" + std::to_string(server.port()));
    dlock::Script script("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])");
    std::vector<std::string_view> keys{"dlock:{x}"}, args{"v"};
    EXPECT_EQ(client.eval(script, keys, args).text, "v");
    std::error_code ec;
    std::vector<std::string_view> forbidden_keys{"other"};
    client.eval(script, forbidden_keys, args, ec);
    EXPECT_TRUE(ec == dlock::errc::permission_denied || ec == dlock::errc::server_error) << ec.message();
    std::string_view flush[] = {"FLUSHALL"};
    auto denied = client.command(flush, ec);
    EXPECT_EQ(ec, dlock::errc::permission_denied);
    EXPECT_NE(denied.text.find("NOPERM"), std::string::npos);
    // And the subscriber connection logs in the same way.
    auto sub = client.subscribe("dlock:{x}:ch", [](auto, auto) {});
    EXPECT_TRUE(sub.wait_active(std::chrono::steady_clock::now() + 5s));
}

TEST(Tls, WorksWithTheRightCa) {
    dlock::support::RedisServer server({.tls = true});
    dlock::ClientOptions options;
    options.tls.ca_file = dlock::support::TlsFiles::get().ca_cert;
    dlock::Client client(server.uri(), options);
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
    auto sub = client.subscribe("tls-ch", [](auto, auto) {});
    EXPECT_TRUE(sub.wait_active(std::chrono::steady_clock::now() + 5s));
}

TEST(Tls, ClientCertificateWhenTheServerRequiresOne) {
    dlock::support::RedisServer server({.tls = true, .tls_require_client_cert = true});
    const auto& files = dlock::support::TlsFiles::get();
    dlock::ClientOptions with_cert;
    with_cert.tls.ca_file = files.ca_cert;
    with_cert.tls.cert_file = files.client_cert;
    with_cert.tls.key_file = files.client_key;
    dlock::Client client(server.uri(), with_cert);
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
    dlock::ClientOptions without_cert;
    without_cert.tls.ca_file = files.ca_cert;
    dlock::Client refused(server.uri(), without_cert);
    auto ec = timed(2s, [&] { return ping(refused); });
    EXPECT_TRUE(ec == dlock::errc::tls_error || ec == dlock::errc::connection_refused) << ec.message();
}

TEST(Tls, WrongCaFailsClearly) {
    dlock::support::RedisServer server({.tls = true});
    dlock::ClientOptions options;
    options.tls.ca_file = dlock::support::TlsFiles::get().other_ca_cert;
    dlock::Client client(server.uri(), options);
    EXPECT_EQ(timed(2s, [&] { return ping(client); }), dlock::errc::tls_error);
}

TEST(Tls, MissingCaFileFailsClearly) {
    dlock::support::RedisServer server({.tls = true});
    dlock::ClientOptions options;
    options.tls.ca_file = "/nonexistent/ca.crt";
    dlock::Client client(server.uri(), options);
    EXPECT_EQ(timed(2s, [&] { return ping(client); }), dlock::errc::tls_error);
}

TEST(Tls, PlainClientAgainstTlsServerIsRefusedOrTimesOut) {
    dlock::support::RedisServer server({.tls = true});
    dlock::ClientOptions options;
    options.connect_timeout = 500ms;
    dlock::Client client("redis://127.0.0.1:" + std::to_string(server.port()), options);
    auto ec = timed(3s, [&] { return ping(client); });
    EXPECT_TRUE(ec == dlock::errc::connect_timeout || ec == dlock::errc::connection_refused ||
                ec == dlock::errc::command_timeout)
        << ec.message();
}
