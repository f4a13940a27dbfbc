// The shared pub/sub connection.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <atomic>
#include <future>
#include <optional>
#include <memory>
#include <mutex>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "scripted_server.hpp"
#include "warnings.hpp"

using namespace std::chrono_literals;
using Event = dlock::Subscription::Event;

namespace {

// Collects what a listener sees, for a test thread to wait on.
struct Inbox {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::string> messages;
    int resubscribed = 0;
    int subscribed = 0;  // first confirmations

    dlock::Subscription::Listener listener() {
        return [this](Event e, std::string_view payload) {
            std::lock_guard lock(mutex);
            if (e == Event::message) messages.emplace_back(payload);
            else if (e == Event::subscribed) ++subscribed;
            else ++resubscribed;
            changed.notify_all();
        };
    }
    bool wait_messages(std::size_t n, std::chrono::milliseconds timeout = 5s) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, timeout, [&] { return messages.size() >= n; });
    }
    bool wait_resubscribed(int n, std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, timeout, [&] { return resubscribed >= n; });
    }
    int subscribed_count() {
        std::lock_guard lock(mutex);
        return subscribed;
    }
};

auto soon() { return std::chrono::steady_clock::now() + 5s; }

int pubsub_connections(const dlock::support::RedisServer& server) {
    auto list = server.cli({"CLIENT", "LIST", "TYPE", "pubsub"});
    return list.empty() ? 0 : static_cast<int>(std::count(list.begin(), list.end(), '\n') + 1);
}

// Set in a forked child, whose memory LeakSanitizer cannot judge: what the
// parent's other threads held looks leaked there, those threads being gone.
bool in_forked_child = false;

}  // namespace

// LeakSanitizer's hook, asked at exit; without the sanitizer, never called.
extern "C" int __lsan_is_turned_off() { return in_forked_child ? 1 : 0; }

TEST(Subscriber, DeliversMessagesToEveryListenerOfTheChannel) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    Inbox a, b, other;
    auto sa = client.subscribe("news", a.listener());
    auto sb = client.subscribe("news", b.listener());
    auto so = client.subscribe("other", other.listener());
    ASSERT_TRUE(sa.wait_active(soon()));
    ASSERT_TRUE(sb.wait_active(soon()));
    ASSERT_TRUE(so.wait_active(soon()));
    EXPECT_EQ(client.command({"PUBLISH", "news", "hello"}).integer, 1);  // one connection, one receiver
    ASSERT_TRUE(a.wait_messages(1));
    ASSERT_TRUE(b.wait_messages(1));
    EXPECT_EQ(a.messages[0], "hello");
    EXPECT_EQ(b.messages[0], "hello");
    EXPECT_TRUE(other.messages.empty());
}

TEST(Subscriber, LastListenerLeavingUnsubscribes) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    Inbox a, b;
    auto sa = client.subscribe("ch", a.listener());
    auto sb = client.subscribe("ch", b.listener());
    ASSERT_TRUE(sb.wait_active(soon()));
    EXPECT_EQ(server.cli({"PUBSUB", "NUMSUB", "ch"}), "ch\n1");
    sa.reset();
    EXPECT_EQ(server.cli({"PUBSUB", "NUMSUB", "ch"}), "ch\n1");
    client.command({"PUBLISH", "ch", "still"});
    ASSERT_TRUE(b.wait_messages(1));
    EXPECT_TRUE(a.messages.empty());
    sb.reset();
    std::string numsub;
    for (int i = 0; i < 100 && (numsub = server.cli({"PUBSUB", "NUMSUB", "ch"})) != "ch\n0"; ++i)
        std::this_thread::sleep_for(10ms);
    EXPECT_EQ(numsub, "ch\n0");
}

TEST(Subscriber, ResubscribesAfterServerRestartAndSaysMessagesMayBeLost) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    Inbox inbox;
    auto sub = client.subscribe("events", inbox.listener());
    ASSERT_TRUE(sub.wait_active(soon()));
    server.restart();
    ASSERT_TRUE(inbox.wait_resubscribed(1)) << "no resubscribed event after restart";
    ASSERT_TRUE(sub.wait_active(soon()));
    EXPECT_EQ(server.cli({"PUBLISH", "events", "after-restart"}), "1");
    ASSERT_TRUE(inbox.wait_messages(1));
    EXPECT_EQ(inbox.messages.back(), "after-restart");
}

TEST(Subscriber, TenThousandChannelsShareOneConnection) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    Inbox inbox;
    std::vector<dlock::Subscription> subs;
    constexpr int channels = 10'000;
    for (int i = 0; i < channels; ++i) subs.push_back(client.subscribe("lock:" + std::to_string(i), inbox.listener()));
    for (auto& s : subs) ASSERT_TRUE(s.wait_active(soon()));
    // Each channel's first confirmation is told once, as Event::subscribed.
    EXPECT_TRUE(dlock::support::eventually([&] { return inbox.subscribed_count() == channels; }));
    EXPECT_EQ(pubsub_connections(server), 1);
    EXPECT_EQ(server.cli({"PUBSUB", "NUMSUB", "lock:9999"}), "lock:9999\n1");
    client.command({"PUBLISH", "lock:4242", "x"});
    ASSERT_TRUE(inbox.wait_messages(1));
    // After a restart all of them come back, still on one connection.
    server.restart();
    ASSERT_TRUE(inbox.wait_resubscribed(channels, 20s));
    for (auto& s : subs) ASSERT_TRUE(s.wait_active(soon()));
    EXPECT_EQ(pubsub_connections(server), 1);
    EXPECT_EQ(inbox.subscribed_count(), channels) << "a re-subscription is not a first confirmation";
    subs.clear();
}

TEST(Subscriber, QuickUnsubscribeAndResubscribeStillDelivers) {
    // Unsubscribe and subscribe again at once, 200 times: once active, the
    // second subscription receives what is published. (The subscriber counts
    // acknowledgements so the first SUBSCRIBE's cannot mark the second active
    // early; the interleaving that would expose that needs the server to
    // serve another connection in between, which a test cannot force.)
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client publisher(server.uri());
    for (int round = 0; round < 200; ++round) {
        std::string channel = "flip:" + std::to_string(round);
        Inbox first, second;
        auto a = client.subscribe(channel, first.listener());
        a.reset();
        auto b = client.subscribe(channel, second.listener());
        ASSERT_TRUE(b.wait_active(soon()));
        publisher.command({"PUBLISH", channel, "now"});
        ASSERT_TRUE(second.wait_messages(1, 2s)) << "message lost in round " << round;
    }
}

TEST(Subscriber, ListenerIsNotCalledAfterItsSubscriptionIsGone) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::atomic<bool> gone{false};
    std::atomic<int> late_calls{0};
    auto sub = client.subscribe("c", [&](Event, std::string_view) {
        if (gone) ++late_calls;
    });
    ASSERT_TRUE(sub.wait_active(soon()));
    std::thread publisher([&] {
        for (int i = 0; i < 2000; ++i) client.command({"PUBLISH", "c", "m"});
    });
    std::this_thread::sleep_for(5ms);
    sub.reset();
    gone = true;
    publisher.join();
    EXPECT_EQ(late_calls.load(), 0);
}

TEST(Subscriber, WhatAForkedChildDestroysLeavesTheParentSubscribed) {
    dlock::support::RedisServer server;
    auto client = std::make_unique<dlock::Client>(server.uri());
    Inbox inbox;
    auto subscription = client->subscribe("ch", inbox.listener());
    ASSERT_TRUE(subscription.wait_active(soon()));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // The child lets go of everything it inherited, as a program that
        // forks and then exits normally would, destructors and all.
        in_forked_child = true;
        int code = subscription.active() ? 2 : 0;  // only the parent's I/O thread knows
        subscription = dlock::Subscription();
        std::string_view publish[] = {"PUBLISH", "ch", "from-child"};
        std::error_code ec;
        client->command(publish, ec);
        if (ec != dlock::errc::forked_child) code = 1;
        client.reset();
        std::exit(code);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(server.cli({"PUBSUB", "NUMSUB", "ch"}), "ch\n1");
    EXPECT_EQ(client->command({"PUBLISH", "ch", "after"}).integer, 1);
    ASSERT_TRUE(inbox.wait_messages(1));
    EXPECT_EQ(inbox.messages[0], "after");
    EXPECT_EQ(client->command({"ECHO", "parent"}).text, "parent");
}

// An ACL user with rights on some channels only: the server answers the
// SUBSCRIBE of another with NOPERM. The refused channel says so at once
// (no wait for a confirmation that never comes), the client is warned once
// with the server's error, and the channels it may use still listen.
TEST(Subscriber, ARefusedChannelSaysSoAtOnceAndIsWarnedOfOnce) {
    dlock::support::RedisServer server({.acl_users = {{"some", "on", ">pw", "~*", "resetchannels", "&open*", "+@all"}}});
    dlock::support::Warnings told;
    dlock::ClientOptions options;
    options.on_warning = told.hook();
    dlock::Client client("redis://some:pw@127.0.0.1:" + std::to_string(server.port()), options);
    Inbox open, closed, closed_too;
    auto before = client.subscribe("open-before", open.listener());
    auto refused = client.subscribe("closed", closed.listener());
    auto refused_too = client.subscribe("closed-too", closed_too.listener());
    auto after = client.subscribe("open-after", open.listener());
    ASSERT_TRUE(before.wait_active(soon()));
    ASSERT_TRUE(after.wait_active(soon()));
    const auto started = std::chrono::steady_clock::now();
    EXPECT_FALSE(refused.wait_active(started + 10s));
    EXPECT_FALSE(refused_too.wait_active(started + 10s));
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "a refused channel is waited for in vain";
    EXPECT_TRUE(refused.refused());
    EXPECT_TRUE(refused_too.refused());
    EXPECT_FALSE(before.refused());
    EXPECT_FALSE(after.refused());
    EXPECT_EQ(client.command({"PUBLISH", "open-after", "hello"}).integer, 1);
    ASSERT_TRUE(open.wait_messages(1));
    EXPECT_EQ(closed.subscribed_count(), 0);
    // A reconnect subscribes every channel in one command, which the server
    // refuses whole: the allowed channels still listen after it.
    server.restart();
    ASSERT_TRUE(open.wait_resubscribed(2)) << "no resubscribed event after restart";
    ASSERT_TRUE(before.wait_active(soon()));
    ASSERT_TRUE(after.wait_active(soon()));
    EXPECT_FALSE(refused.wait_active(soon()));
    EXPECT_TRUE(refused.refused());
    EXPECT_EQ(server.cli({"PUBLISH", "open-before", "again"}), "1");
    ASSERT_TRUE(open.wait_messages(2));
    const auto warnings = told.told();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("closed"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("NOPERM"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("ACL SETUSER"), std::string::npos) << warnings[0];
}

// A SUBSCRIBE that meets a script running past busy-reply-threshold is
// answered -BUSY: a passing state of the server, not an ACL refusal. Once
// the script is killed, the channel must listen (and the client is not told
// to fix its ACL user, which has every right).
TEST(Subscriber, ABusyScriptDoesNotRefuseAChannelForGood) {
    dlock::support::RedisServer server;
    dlock::support::Warnings told;
    dlock::ClientOptions options;
    options.on_warning = told.hook();
    dlock::Client client(server.uri(), options);
    Inbox warm_inbox, late_inbox;
    auto warm = client.subscribe("warm", warm_inbox.listener());
    ASSERT_TRUE(warm.wait_active(soon()));  // the subscriber connection is up
    ASSERT_EQ(server.cli({"CONFIG", "SET", "busy-reply-threshold", "100"}), "OK");
    auto script = std::async(std::launch::async, [&] { return server.cli({"EVAL", "while true do end", "0"}); });
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"PING"}).find("BUSY") != std::string::npos; }));
    auto late = client.subscribe("late", late_inbox.listener());
    std::this_thread::sleep_for(300ms);  // its SUBSCRIBE is answered -BUSY
    const bool refused_while_busy = late.refused();
    server.cli({"SCRIPT", "KILL"});
    script.get();
    ASSERT_EQ(server.cli({"PING"}), "PONG");
    EXPECT_TRUE(late.wait_active(std::chrono::steady_clock::now() + 10s))
        << "refused() while busy: " << refused_while_busy << ", now: " << late.refused();
    EXPECT_EQ(server.cli({"PUBLISH", "late", "hello"}), "1") << "nobody listens on the channel";
    for (const auto& warning : told.told()) EXPECT_EQ(warning.find("ACL"), std::string::npos) << warning;
}

// The warning hook runs on the I/O thread; one that calls back into the
// client without blocking (subscribes, asks a subscription, drops one) must
// not deadlock it.
TEST(Subscriber, AWarningHookMayCallBackIntoTheClient) {
    dlock::support::RedisServer server({.acl_users = {{"some", "on", ">pw", "~*", "resetchannels", "&open*", "+@all"}}});
    std::mutex mutex;
    std::optional<dlock::Subscription> from_hook, refused;
    std::atomic<bool> asked{false};
    dlock::Client* self = nullptr;
    dlock::ClientOptions options;
    options.on_warning = [&](std::string_view) {
        std::lock_guard lock(mutex);
        asked = refused && refused->refused();
        refused.reset();  // its last listener: UNSUBSCRIBE from the I/O thread
        from_hook.emplace(self->subscribe("open-from-hook", [](Event, std::string_view) {}));
    };
    dlock::Client client("redis://some:pw@127.0.0.1:" + std::to_string(server.port()), options);
    self = &client;
    {
        std::lock_guard lock(mutex);
        refused.emplace(client.subscribe("closed", [](Event, std::string_view) {}));
    }
    ASSERT_TRUE(dlock::support::eventually([&] {
        std::lock_guard lock(mutex);
        return from_hook.has_value();
    }));
    std::lock_guard lock(mutex);
    EXPECT_TRUE(from_hook->wait_active(soon()));
    EXPECT_TRUE(asked.load());
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
    // A Subscription must not outlive its Client (client.hpp).
    from_hook.reset();
    refused.reset();
}

// A hostile server answering SUBSCRIBE with errors (one more than there are
// commands), odd arrays and late acknowledgements: the client neither
// crashes nor waits for the channel past the deadline, and its other
// connection still works.
TEST(Subscriber, AHostileServersSubscribeAnswersAreSurvived) {
    using dlock::support::ScriptedServer;
    ScriptedServer hostile([](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "SUBSCRIBE" || command[0] == "UNSUBSCRIBE") {
            std::string out = "-ERR one\r\n-ERR two with nothing pending\r\n*1\r\n:1\r\n*3\r\n:1\r\n*0\r\n$-1\r\n";
            out += ScriptedServer::array({ScriptedServer::bulk("subscribe"), ScriptedServer::bulk(""), ":1\r\n"});
            for (std::size_t i = 1; i < command.size(); ++i)
                out += ScriptedServer::array({ScriptedServer::bulk("subscribe"), ScriptedServer::bulk(command[i]), ":1\r\n"});
            out += "-NOPERM three\r\n";
            return out;
        }
        return "-ERR unknown\r\n";
    });
    dlock::Client client("redis://127.0.0.1:" + std::to_string(hostile.port()));
    const auto started = std::chrono::steady_clock::now();
    auto a = client.subscribe("a", [](Event, std::string_view) {});
    auto b = client.subscribe("b", [](Event, std::string_view) {});
    (void)a.wait_active(started + 3s);
    (void)b.wait_active(started + 3s);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
    a = dlock::Subscription();
    auto c = client.subscribe("c", [](Event, std::string_view) {});
    (void)c.wait_active(std::chrono::steady_clock::now() + 3s);
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
}

// SUBSCRIBE, UNSUBSCRIBE and SUBSCRIBE of one channel in flight together,
// for a refused channel and an allowed one: each ends where its last command
// says (refused at once; listening), whatever the order of errors and acks.
TEST(Subscriber, ResubscribingWhileAnswersAreInFlightEndsRight) {
    dlock::support::RedisServer server({.acl_users = {{"some", "on", ">pw", "~*", "resetchannels", "&open*", "+@all"}}});
    dlock::Client client("redis://some:pw@127.0.0.1:" + std::to_string(server.port()));
    Inbox warm_inbox;
    auto warm = client.subscribe("open-warm", warm_inbox.listener());
    ASSERT_TRUE(warm.wait_active(soon()));
    for (int round = 0; round < 20; ++round) {
        Inbox open, closed;
        std::optional<dlock::Subscription> o(client.subscribe("open-x", open.listener()));
        std::optional<dlock::Subscription> c(client.subscribe("closed-x", closed.listener()));
        o.reset();
        c.reset();
        o.emplace(client.subscribe("open-x", open.listener()));
        c.emplace(client.subscribe("closed-x", closed.listener()));
        const auto started = std::chrono::steady_clock::now();
        EXPECT_FALSE(c->wait_active(started + 5s)) << round;
        EXPECT_TRUE(c->refused()) << round;
        EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << round;
        ASSERT_TRUE(o->wait_active(soon())) << round;
        EXPECT_FALSE(o->refused()) << round;
        EXPECT_EQ(server.cli({"PUBLISH", "open-x", "m"}), "1") << round;
    }
}

// A Subscription left behind by its Client (the Client destroyed first) is
// inert: it answers at once, no longer listens, and is destroyed without
// touching the Client's freed I/O context or sockets (AddressSanitizer saw a
// heap-use-after-free here when the subscriber's connections outlived it).
TEST(Subscriber, ASubscriptionLeftBehindByItsClientIsInert) {
    dlock::support::RedisServer server;
    std::optional<dlock::Client> client(std::in_place, server.uri());
    Inbox inbox;
    auto kept = client->subscribe("left", inbox.listener());
    auto moved_later = client->subscribe("left:too", inbox.listener());
    ASSERT_TRUE(kept.wait_active(soon()));
    ASSERT_TRUE(moved_later.wait_active(soon()));
    client.reset();

    EXPECT_FALSE(kept.active());
    EXPECT_FALSE(kept.refused());
    const auto asked = std::chrono::steady_clock::now();
    EXPECT_FALSE(kept.wait_active(asked + 5s));
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 2s) << "wait_active waited for a Client that is gone";
    // Nothing listens any more: a message published now reaches nobody.
    dlock::Client publisher(server.uri());
    EXPECT_EQ(publisher.command({"PUBLISH", "left", "late"}).integer, 0);
    auto moved = std::move(moved_later);
    moved.reset();
    kept.reset();
    EXPECT_TRUE(inbox.messages.empty());
}
