// Attacks on the read baton (docs/design/caller-driven-reads.md): a blocking
// caller alone on a plain request/reply connection reads its own replies.
// Each test tries to make a reply go to the wrong caller, get lost, or a
// caller miss its deadline, with real servers and the fault proxy.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "scripted_server.hpp"
#include "tcp_proxy.hpp"
#include "thrown.hpp"

using namespace std::chrono_literals;

namespace {

long long ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

dlock::ClientOptions with_timeout(std::chrono::milliseconds command_timeout) {
    dlock::ClientOptions options;
    options.command_timeout = command_timeout;
    return options;
}

// Two clients on one server, one of them through a fault proxy, and lock
// options with a lease no test outlives.
struct TwoClients {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::LockOptions options = [] {
        dlock::LockOptions o;
        o.lease = std::chrono::seconds(20);
        return o;
    }();
};

}  // namespace

// Blocking callers on several threads, asynchronous submissions and a proxy
// that cuts every connection again and again: every answer a caller gets is
// the answer to its own command (ECHO of a text no other command sends).
TEST(ReadBatonAttack, BlockingAndAsyncCallersUnderCutsNeverGetAnotherCommandsReply) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), with_timeout(500ms));
    ASSERT_EQ(client.command({"PING"}).text, "PONG");

    std::atomic<bool> stop{false};
    std::atomic<long> answered{0}, failed{0}, wrong{0}, async_answered{0}, async_wrong{0};
    std::mutex detail_mutex;
    std::string detail;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (long i = 0; !stop; ++i) {
                const std::string text = "b" + std::to_string(t) + ":" + std::to_string(i);
                const std::string_view args[] = {"ECHO", text};
                std::error_code ec;
                auto reply = client.command(args, ec);
                if (ec) {
                    ++failed;
                    continue;
                }
                if (reply.text == text) ++answered;
                else {
                    ++wrong;
                    std::lock_guard lock(detail_mutex);
                    detail = text + " got " + reply.text;
                }
            }
        });
    }
    threads.emplace_back([&] {
        for (long i = 0; !stop; ++i) {
            const std::string text = "a:" + std::to_string(i);
            auto done = std::make_shared<std::promise<void>>();
            auto finished = done->get_future();
            const std::string_view args[] = {"ECHO", text};
            client.submit(args, [&async_answered, &async_wrong, done, text](std::error_code ec, dlock::Reply&& reply) {
                if (!ec) {
                    if (reply.text == text) ++async_answered;
                    else ++async_wrong;
                }
                done->set_value();
            });
            finished.wait_for(2s);
        }
    });
    for (int cut = 0; cut < 20; ++cut) {
        std::this_thread::sleep_for(100ms);
        proxy.drop_connections();
    }
    std::this_thread::sleep_for(200ms);
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0) << detail;
    EXPECT_EQ(async_wrong.load(), 0);
    EXPECT_GT(answered.load(), 100);
    EXPECT_GT(async_answered.load(), 10);
    std::cout << "answered " << answered << " failed " << failed << " async " << async_answered << "\n";
}

// A caller reading its own reply through a black hole (no reply, no close)
// returns by its deadline; its reply, released later, reaches nobody else.
TEST(ReadBatonAttack, ACallerReadingIntoABlackHoleReturnsByItsDeadlineAndTheLateReplyGoesNowhere) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), with_timeout(300ms));
    for (int i = 0; i < 3; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");  // parked
    for (int round = 0; round < 5; ++round) {
        proxy.black_hole(true);
        const std::string late = "late" + std::to_string(round);
        const std::string_view args[] = {"ECHO", late};
        std::error_code ec;
        const auto start = std::chrono::steady_clock::now();
        auto reply = client.command(args, ec);
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_EQ(ec, dlock::errc::command_timeout) << ec.message() << " " << reply.text;
        EXPECT_LT(took, 2s);
        proxy.black_hole(false);  // the held request goes out, its reply comes back
        for (int i = 0; i < 20; ++i) {
            const std::string text = "next" + std::to_string(round) + ":" + std::to_string(i);
            const std::string_view next[] = {"ECHO", text};
            std::error_code ec2;
            auto r = client.command(next, ec2);
            if (ec2) continue;  // the overdue command's connection was reset
            ASSERT_EQ(r.text, text);
        }
    }
}

// The reply arrives, then the server closes (QUIT): the caller gets the
// reply, as when the I/O thread read it (the reply came before the close);
// the next command, sent once the close has arrived, is answered.
TEST(ReadBatonAttack, AReplyFollowedByTheServersCloseIsStillDelivered) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    int quit_lost = 0, next_lost = 0;
    std::string what;
    const std::string_view ping[] = {"PING"};
    const std::string_view quit[] = {"QUIT"};
    for (int i = 0; i < 200; ++i) {
        std::error_code ec;
        for (int j = 0; j < 2; ++j) {  // connected (again), parked
            auto r = client.command(ping, ec);
            if (ec || r.text != "PONG") ++next_lost, what = ec.message();
            if (ec) std::this_thread::sleep_for(20ms);
        }
        auto reply = client.command(quit, ec);
        if (ec) ++quit_lost, what = ec.message();
        else EXPECT_EQ(reply.text, "OK");
        std::this_thread::sleep_for(20ms);  // the close has arrived
    }
    EXPECT_EQ(quit_lost, 0) << quit_lost << " of 200 QUIT replies lost: " << what;
    EXPECT_EQ(next_lost, 0) << next_lost << " of 400 PINGs after a QUIT lost: " << what;
}

// A reply over its limit read by the caller fails that call with
// reply_too_large naming the limit; the connection is reset and the next
// call is answered with its own reply.
TEST(ReadBatonAttack, AnOverLimitReplyReadByTheCallerFailsOnlyItsCall) {
    dlock::support::RedisServer server;
    dlock::ClientOptions options;
    options.max_string_bytes = 1000;
    dlock::Client client(server.uri(), options);
    ASSERT_EQ(client.command({"SET", "big", std::string(5000, 'x')}).text, "OK");
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(client.command({"PING"}).text, "PONG");  // parked
        std::error_code ec;
        const std::string_view get[] = {"GET", "big"};
        auto reply = client.command(get, ec);
        EXPECT_EQ(ec, dlock::errc::reply_too_large) << ec.message() << " " << reply.text;
        const std::string text = "after" + std::to_string(i);
        const std::string_view echo[] = {"ECHO", text};
        std::error_code ec2;
        auto next = client.command(echo, ec2);
        EXPECT_FALSE(ec2) << ec2.message();
        EXPECT_EQ(next.text, text);
    }
}

// A reply over its own command's limit (a lock script answers with a few
// numbers) read by the caller on a parked connection: refused from its
// header, as when the I/O thread reads it, and the call fails with the
// script named.
TEST(ReadBatonAttack, AReplyOverItsCommandsOwnLimitReadByTheCallerFailsItsCall) {
    std::string hostile = "*1000\r\n";
    for (int i = 0; i < 1000; ++i) hostile += ":1\r\n";
    dlock::support::ScriptedServer scripted([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "EVALSHA" || command[0] == "EVAL") return hostile;
        if (command[0] == "CLIENT") return "+OK\r\n";
        return "+PONG\r\n";
    });
    dlock::Client client("redis://127.0.0.1:" + std::to_string(scripted.port()), with_timeout(2000ms));
    auto lock = client.lock("hostile-caller");
    for (int i = 0; i < 5; ++i) {
        client.wait_connected();
        ASSERT_EQ(client.command({"PING"}).text, "PONG");  // parked: the caller reads the script's reply
        const auto [ec, what] = dlock::support::thrown_by([&] { return lock.try_lock(); });
        EXPECT_EQ(ec, dlock::errc::reply_too_large) << ec.message() << ": " << what;
        EXPECT_NE(what.find("lock script 'acquire'"), std::string::npos) << what;
    }
}

// A hostile server that answers one command twice: the extra reply is
// nobody's; the next caller must not take it for its own.
TEST(ReadBatonAttack, AnExtraReplyIsNeverTakenForTheNextCallersReply) {
    std::atomic<int> echoes{0};
    dlock::support::ScriptedServer scripted([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return {};
        if (command[0] == "ECHO" && command.size() > 1) {
            // Every third ECHO is answered twice.
            auto one = dlock::support::ScriptedServer::bulk(command[1]);
            return ++echoes % 3 == 0 ? one + dlock::support::ScriptedServer::bulk("extra") : one;
        }
        return "+PONG\r\n";
    });
    dlock::Client client("redis://127.0.0.1:" + std::to_string(scripted.port()), with_timeout(500ms));
    int wrong = 0;
    for (int i = 0; i < 60; ++i) {
        const std::string text = "t" + std::to_string(i);
        const std::string_view echo[] = {"ECHO", text};
        std::error_code ec;
        auto reply = client.command(echo, ec);
        if (!ec && reply.text != text) ++wrong;
        if (i % 5 == 4) std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(wrong, 0);
}

// A lock held while the connection sits parked: a black hole (no reply, no
// close) must still be noticed by the renewals, and the loss told before
// twice the lease has passed.
TEST(ReadBatonAttack, ALossWhileTheConnectionIsParkedIsToldWithinTheLease) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), with_timeout(300ms));
    std::atomic<bool> lost{false};
    std::atomic<long long> lost_at_ms{0};
    const auto start = std::chrono::steady_clock::now();
    dlock::LockOptions lock_options;
    lock_options.lease = 1000ms;
    lock_options.on_lost = [&](std::string_view, std::error_code) {
        lost_at_ms = ms_since(start);
        lost = true;
    };
    auto lock = client.lock("baton-parked", lock_options);
    lock.lock();
    for (int i = 0; i < 3; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");
    std::this_thread::sleep_for(1500ms);  // renewals go on while parked
    EXPECT_FALSE(lost.load());
    const auto hole = std::chrono::steady_clock::now();
    proxy.black_hole(true);
    EXPECT_TRUE(dlock::support::eventually([&] { return lost.load(); }, 3s));
    const auto told = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - hole);
    EXPECT_LT(told, 2000ms) << told.count() << " ms after the black hole";
    proxy.black_hole(false);
}

// A stop requested while the caller reads its lock call's reply (delayed by
// the proxy): the caller returns at once, and the grant that comes later is
// undone, so another client gets the lock long before the lease ends.
TEST(ReadBatonAttack, AStopRequestedWhileTheCallerReadsItsGrantUndoesTheLateGrant) {
    TwoClients setup;
    auto& proxy = setup.proxy;
    const auto& options = setup.options;
    dlock::Client slow(proxy.uri());
    dlock::Client direct(setup.server.uri());
    for (int round = 0; round < 3; ++round) {
        const std::string name = "baton-stop-" + std::to_string(round);
        auto lock = slow.lock(name, options);
        lock.lock();  // scripts loaded, connection parked
        lock.unlock();
        proxy.delay_replies(400ms);
        std::stop_source source;
        std::atomic<bool> got{true};
        std::atomic<long long> took_ms{-1};
        std::thread caller([&] {
            const auto start = std::chrono::steady_clock::now();
            got = lock.lock(source.get_token());
            took_ms = ms_since(start);
        });
        std::this_thread::sleep_for(100ms);
        source.request_stop();
        caller.join();
        EXPECT_FALSE(got.load());
        EXPECT_LT(took_ms.load(), 350) << "the caller waited for its delayed reply";
        proxy.delay_replies(0ms);
        auto other = direct.lock(name, options);
        EXPECT_TRUE(other.try_lock_for(5s)) << "the late grant was not undone";
        if (other.is_held()) other.unlock();
    }
}

// A waiter on one client while another thread of the same client keeps the
// baton busy with its own calls: the release still wakes the waiter soon.
TEST(ReadBatonAttack, AWaiterIsWokenWhileAnotherThreadOfItsClientDrivesTheConnection) {
    TwoClients setup;
    const auto& options = setup.options;
    dlock::Client holder_client(setup.server.uri());
    dlock::Client client(setup.server.uri());
    for (int round = 0; round < 5; ++round) {
        const std::string name = "baton-wake-" + std::to_string(round);
        auto holder = holder_client.lock(name, options);
        holder.lock();
        std::atomic<bool> stop{false};
        std::thread busy([&] {
            while (!stop) (void)client.command({"PING"});
        });
        auto waiter_lock = client.lock(name, options);
        std::atomic<long long> waited_ms{-1};
        std::chrono::steady_clock::time_point released;
        std::thread waiter([&] {
            EXPECT_TRUE(waiter_lock.try_lock_for(10s));
            waited_ms = ms_since(released);
            waiter_lock.unlock();
        });
        std::this_thread::sleep_for(300ms);
        released = std::chrono::steady_clock::now();
        holder.unlock();
        waiter.join();
        stop = true;
        busy.join();
        EXPECT_LT(waited_ms.load(), 2000) << "the waiter took " << waited_ms.load() << " ms after the release";
    }
}

// The Client destroyed while a Lock's caller reads into a black hole: the
// caller's call ends promptly (client_closed), nothing reads a closed
// descriptor (run under ASan/TSan).
TEST(ReadBatonAttack, DestroyingTheClientWhileACallerReadsEndsTheCallPromptly) {
    dlock::support::RedisServer server;
    for (int round = 0; round < 3; ++round) {
        dlock::support::TcpProxy proxy(server.port());
        std::optional<dlock::Client> client(std::in_place, proxy.uri());
        dlock::LockOptions options;
        options.lease = 20s;
        auto lock = client->lock("baton-destroy-" + std::to_string(round), options);
        lock.lock();
        lock.unlock();
        proxy.black_hole(true);
        std::atomic<long long> took_ms{-1};
        std::error_code seen;
        std::thread caller([&] {
            const auto start = std::chrono::steady_clock::now();
            std::error_code ec;
            (void)lock.try_lock_until(std::chrono::steady_clock::now() + 8s, ec);
            seen = ec;
            took_ms = ms_since(start);
        });
        std::this_thread::sleep_for(200ms);
        client.reset();
        caller.join();
        EXPECT_LT(took_ms.load(), 3000) << seen.message();
        EXPECT_TRUE(seen) << "a call through a destroyed client succeeded";
    }
}

// The NOSCRIPT detour read by the caller: the EVAL it resends on its own
// thread is answered to it, whatever the script cache held.
TEST(ReadBatonAttack, TheNoscriptDetourReadByTheCallerAnswersItsOwnCall) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client flusher(server.uri());
    const dlock::Script script("return ARGV[1]");
    for (int i = 0; i < 50; ++i) {
        if (i % 2 == 0) {
            ASSERT_EQ(flusher.command({"SCRIPT", "FLUSH"}).text, "OK");
        }
        const std::string text = "s" + std::to_string(i);
        const std::string_view argv[] = {text};
        auto reply = client.eval(script, {}, argv);
        ASSERT_EQ(reply.text, text);
    }
}

// The server closes idle connections after 1 s while a lock is held and
// its connection sits parked between renewals: the hold is kept (the
// close is seen and the next renewal goes out on the new connection).
TEST(ReadBatonAttack, AHoldSurvivesTheServerClosingItsParkedConnection) {
    dlock::support::RedisServer server;
    server.cli({"CONFIG", "SET", "timeout", "1"});
    dlock::Client client(server.uri());
    std::atomic<bool> lost{false};
    dlock::LockOptions options;
    options.lease = 4500ms;  // renewed every 1.5 s: idle long enough to be closed
    options.on_lost = [&](std::string_view, std::error_code) { lost = true; };
    auto lock = client.lock("baton-idle-close", options);
    lock.lock();
    std::this_thread::sleep_for(8s);
    EXPECT_FALSE(lost.load());
    EXPECT_TRUE(lock.is_held());
    lock.unlock();
}

// The hang-up watch after sessions the client ended itself (a reply over
// its limit resets the connection): one wait serves every session, so the
// server's close of the parked connection of the current one is still seen
// at once, with nothing sent: the client is connected again soon after.
TEST(ReadBatonAttack, TheServersCloseIsSeenAtOnceAfterSessionsTheClientEnded) {
    dlock::support::RedisServer server;
    dlock::ClientOptions options;
    options.max_string_bytes = 16;
    dlock::Client client(server.uri(), options);
    client.command({"SET", "baton-watch:value", std::string(100, 'v')});
    for (int i = 0; i < 20; ++i) {
        std::error_code ec;
        const std::string_view get[] = {"GET", "baton-watch:value"};
        (void)client.command(get, ec);
        ASSERT_EQ(ec, dlock::errc::reply_too_large);
        client.wait_connected();
    }
    ASSERT_EQ(client.command({"PING"}).text, "PONG");  // the connection is parked after it
    // The ids of the server's clients but the cli asking (CLIENT LIST).
    const auto others = [&] {
        std::vector<std::string> ids;
        std::istringstream lines(server.cli({"CLIENT", "LIST"}));
        for (std::string line; std::getline(lines, line);)
            if (line.rfind("id=", 0) == 0 && line.find("cmd=client|list") == std::string::npos)
                ids.push_back(line.substr(3, line.find(' ') - 3));
        return ids;
    };
    const auto before = others();
    ASSERT_EQ(before.size(), 1u);
    server.cli({"CLIENT", "KILL", "ID", before.front()});
    EXPECT_TRUE(dlock::support::eventually(
        [&] {
            const auto now = others();
            return now.size() == 1 && now.front() != before.front();
        },
        2s))
        << "the client did not connect again on its own: the server's close went unseen";
}

// Threads of one client (each its own Lock: blocking callers sharing the
// baton) and threads of a second client contend for one name while the
// proxy cuts the first client's connections: never two holders at once.
TEST(ReadBatonAttack, ContendersOnOneClientUnderCutsNeverHoldTogether) {
    TwoClients setup;
    dlock::Client cut(setup.proxy.uri(), with_timeout(500ms));
    dlock::Client steady(setup.server.uri());
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    std::atomic<long> entries{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&, t] {
            auto lock = (t < 4 ? cut : steady).lock("baton-contended", setup.options);
            while (!stop) {
                std::error_code ec;
                if (!lock.try_lock_until(std::chrono::steady_clock::now() + 300ms, ec)) continue;
                if (inside.fetch_add(1) != 0) ++overlaps;
                ++entries;
                std::this_thread::sleep_for(1ms);
                inside.fetch_sub(1);
                lock.unlock(ec);
            }
        });
    }
    for (int i = 0; i < 15; ++i) {
        std::this_thread::sleep_for(150ms);
        setup.proxy.drop_connections();
    }
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(overlaps.load(), 0) << overlaps << " overlaps in " << entries << " entries";
    EXPECT_GT(entries.load(), 20);
}
