// The command connection against a real server: pipelining, many threads,
// async submission, fork.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "eventually.hpp"
#include "redis/client_core.hpp"
#include "redis/command_format.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;

namespace {

// The code of the Error a Client constructor threw; empty when it did not.
template <typename... Args>
std::error_code constructor_error(Args&&... args) {
    try {
        dlock::Client client(std::forward<Args>(args)...);
    } catch (const dlock::Error& e) {
        return e.code();
    }
    return {};
}

// This process's socket descriptors, and whether each is close-on-exec.
std::vector<std::pair<int, bool>> sockets_and_cloexec() {
    std::vector<std::pair<int, bool>> out;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(entry.path(), ec).string();
        if (ec || target.rfind("socket:", 0) != 0) continue;
        const int fd = std::stoi(entry.path().filename().string());
        const int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) out.emplace_back(fd, (flags & FD_CLOEXEC) != 0);
    }
    return out;
}

}  // namespace

TEST(Client, CommandsAndReplyKinds) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
    EXPECT_EQ(client.command({"SET", "k", "v"}).text, "OK");
    EXPECT_EQ(client.command({"GET", "k"}).text, "v");
    EXPECT_TRUE(client.command({"GET", "missing"}).is_nil());
    EXPECT_EQ(client.command({"INCRBY", "n", "5"}).integer, 5);
    auto list = client.command({"MGET", "k", "missing"});
    ASSERT_EQ(list.elements.size(), 2u);
    EXPECT_EQ(list.elements[0].text, "v");
    // Checked independently of the client under test.
    EXPECT_EQ(server.cli({"GET", "k"}), "v");
}

TEST(Client, ServerErrorsAreTypedAndCarryRedisText) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.command({"SET", "s", "x"});
    std::error_code ec;
    std::vector<std::string_view> hget{"HGET", "s", "f"};
    auto reply = client.command(hget, ec);
    EXPECT_EQ(ec, dlock::errc::wrong_type);
    EXPECT_NE(reply.text.find("WRONGTYPE"), std::string::npos);
    try {
        client.command({"NOSUCHCOMMAND"});
        FAIL() << "no exception";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::server_error);
        EXPECT_NE(std::string(e.what()).find("unknown command"), std::string::npos);
    }
    // The connection is still in step after errors.
    EXPECT_EQ(client.command({"ECHO", "after"}).text, "after");
}

TEST(Client, EmptyCommandIsInvalid) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::error_code ec;
    client.command(dlock::Client::Args{}, ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    EXPECT_THROW(client.submit(dlock::Client::Args{}, [](std::error_code, dlock::Reply&&) {}), dlock::Error);
}

TEST(Client, InvalidOptionsAreRejected) {
    dlock::ClientOptions options;
    options.command_timeout = 0ms;
    EXPECT_EQ(constructor_error("redis://127.0.0.1:1", options), dlock::errc::invalid_argument);
    EXPECT_EQ(constructor_error("redis://127.0.0.1:99999"), dlock::errc::invalid_uri);
}

TEST(Client, SixtyFourThreadsEachGetTheirOwnReplies) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    // 64,000 commands from 64 threads interleave on the one connection
    // thousands of times over; ten times as many made the same check cost
    // the suite 20 s of CPU (more under the sanitizers).
    constexpr int threads = 64;
    constexpr int per_thread = 1'000;
    std::atomic<int> mismatches{0}, failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            std::string payload;
            for (int i = 0; i < per_thread; ++i) {
                payload = "t" + std::to_string(t) + ":" + std::to_string(i);
                std::error_code ec;
                std::string_view args[] = {"ECHO", payload};
                auto reply = client.command(args, ec);
                if (ec) ++failures;
                else if (reply.text != payload) ++mismatches;
            }
        });
    }
    for (auto& w : workers) w.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(mismatches.load(), 0);
    // One command connection for all 64 threads (plus redis-cli itself).
    auto clients = server.cli({"CLIENT", "LIST"});
    EXPECT_EQ(std::count(clients.begin(), clients.end(), '\n') + 1, 2) << clients;
}

TEST(Client, AsyncSubmitCompletesInOrderOnTheIoThread) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    constexpr int count = 1000;
    std::vector<long long> seen;
    std::promise<void> all_done;
    std::mutex mutex;
    for (int i = 0; i < count; ++i) {
        std::string_view args[] = {"INCR", "counter"};
        client.submit(args, [&, i](std::error_code ec, dlock::Reply&& reply) {
            EXPECT_FALSE(ec);
            std::lock_guard lock(mutex);
            seen.push_back(reply.integer);
            if (i == count - 1) all_done.set_value();
        });
    }
    ASSERT_EQ(all_done.get_future().wait_for(10s), std::future_status::ready);
    std::lock_guard lock(mutex);
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) EXPECT_EQ(seen[i], i + 1);
}

TEST(Client, BlockingCallFromACallbackIsRefusedNotDeadlocked) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::promise<std::error_code> inner;
    std::string_view ping[] = {"PING"};
    client.submit(ping, [&](std::error_code, dlock::Reply&&) {
        std::error_code ec;
        std::string_view args[] = {"PING"};
        client.command(args, ec);
        inner.set_value(ec);
    });
    auto future = inner.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(future.get(), dlock::errc::invalid_argument);
}

TEST(Client, DestroyedClientFailsWhatIsInFlight) {
    dlock::support::RedisServer server;
    std::promise<std::error_code> outcome;
    {
        dlock::Client client(server.uri());
        client.wait_connected();
        std::string_view sleep[] = {"BLPOP", "nothing", "2"};  // blocks on the server
        client.submit(sleep, [&](std::error_code ec, dlock::Reply&&) { outcome.set_value(ec); });
    }
    auto future = outcome.get_future();
    ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(future.get(), dlock::errc::client_closed);
}

TEST(Client, UseInAForkedChildFailsClearlyAndLeavesTheParentIntact) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    ASSERT_EQ(client.command({"PING"}).text, "PONG");
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        std::error_code ec;
        std::string_view args[] = {"SET", "from-child", "1"};
        client.command(args, ec);
        _exit(ec == dlock::errc::forked_child ? 0 : 1);
        // The child's Client is never destroyed; _exit skips it like exec would.
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(client.command({"ECHO", "parent"}).text, "parent");
    EXPECT_EQ(server.cli({"EXISTS", "from-child"}), "0");
}

TEST(Client, UnixSocketPathTooLongIsRejectedByTheConstructor) {
    const std::string path = "/" + std::string(200, 'a');
    EXPECT_EQ(constructor_error("unix://" + path), dlock::errc::invalid_uri);
    // Built field by field, past parse(): refused all the same, not on the I/O thread.
    dlock::ServerAddress address;
    address.transport = dlock::ServerAddress::Transport::unix_socket;
    address.socket_path = path;
    EXPECT_EQ(constructor_error(address), dlock::errc::invalid_uri);
}

TEST(Client, ThrowingCallbackNeitherEndsTheProcessNorStarvesOthers) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    client.wait_connected();
    const auto connection_before = client.command({"CLIENT", "ID"}).integer;
    std::promise<std::string> after;
    std::string_view ping[] = {"PING"};
    std::string_view echo[] = {"ECHO", "still here"};
    std::atomic<bool> threw{false};
    client.submit(ping, [&](std::error_code, dlock::Reply&&) {
        threw = true;
        throw std::runtime_error("caller bug");
    });
    client.submit(echo, [&](std::error_code ec, dlock::Reply&& reply) {
        after.set_value(ec ? ec.message() : reply.text);
    });
    auto future = after.get_future();
    ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
    // Pipelined with the throwing one, in the same read or a later one: its
    // caller gets its reply either way, since the connection is not reset.
    EXPECT_EQ(future.get(), "still here");
    EXPECT_TRUE(threw);
    // The same connection: a reset would have failed other callers' commands
    // in flight on it, with an unknown outcome for a lock command.
    EXPECT_EQ(client.command({"CLIENT", "ID"}).integer, connection_before);
}

TEST(Client, EverySocketIsCloseOnExec) {
    // A command run by `dlock run` must not hold the Redis connections open.
    dlock::support::RedisServer server({.unix_socket = true});
    dlock::Client client(server.uri());
    dlock::Client over_unix(server.unix_uri());
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
    EXPECT_EQ(over_unix.command({"PING"}).text, "PONG");
    auto subscription = client.subscribe("ch", [](auto, auto) {});
    ASSERT_TRUE(subscription.wait_active(std::chrono::steady_clock::now() + 5s));
    // A dedicated connection, as a write followed by WAIT uses; kept for reuse.
    std::string ping;
    dlock::detail::append_command(ping, std::vector<std::string_view>{"PING"});
    std::promise<std::error_code> dedicated;
    client.core()->submit_dedicated(ping, nullptr, [&](std::error_code ec, std::vector<dlock::Reply>&&) { dedicated.set_value(ec); },
                                    std::chrono::steady_clock::now() + 5s);
    ASSERT_FALSE(dedicated.get_future().get());
    auto sockets = sockets_and_cloexec();
    EXPECT_GE(sockets.size(), 4u);  // command, subscriber, dedicated, unix command
    for (auto [fd, cloexec] : sockets) EXPECT_TRUE(cloexec) << "socket descriptor " << fd << " is inherited by exec";
}

TEST(Client, UnixSocket) {
    dlock::support::RedisServer server({.unix_socket = true});
    dlock::Client client(server.unix_uri() + "?db=2");
    client.command({"SET", "via-unix", "1"});
    EXPECT_EQ(server.cli({"-n", "2", "GET", "via-unix"}), "1");
}

TEST(Client, SelectsTheDatabaseFromTheUri) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri() + "/5");
    client.command({"SET", "in-db-5", "1"});
    EXPECT_EQ(server.cli({"-n", "5", "GET", "in-db-5"}), "1");
    EXPECT_EQ(server.cli({"GET", "in-db-5"}), "");
    dlock::Client bad(server.uri() + "/100000");
    std::error_code ec;
    bad.wait_connected(ec);
    EXPECT_EQ(ec, dlock::errc::server_error);
}

namespace {

// Voluntary context switches of every thread of this process but the
// calling one (the client's I/O thread, here): /proc/self/task/*/status.
long other_threads_voluntary_switches() {
    long total = 0;
    const auto self = std::to_string(gettid());
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        if (task.path().filename() == self) continue;
        std::ifstream status(task.path() / "status");
        std::string line;
        while (std::getline(status, line))
            if (line.rfind("voluntary_ctxt_switches:", 0) == 0) total += std::stol(line.substr(24));
    }
    return total;
}

}  // namespace

// The read baton (connection.hpp): a blocking caller alone on the command
// connection reads its own replies, so the I/O thread is not woken per round
// trip (before, it slept in epoll_wait and woke for every reply: at least
// one switch per command).
TEST(Client, ABlockingCallerAloneReadsItsOwnRepliesWithoutWakingTheIoThread) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    for (int i = 0; i < 10; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");  // connected, parked
    constexpr int commands = 2000;
    const long before = other_threads_voluntary_switches();
    for (int i = 0; i < commands; ++i) {
        const auto text = std::to_string(i);
        ASSERT_EQ(client.command({"ECHO", text}).text, text);
    }
    const long woken = other_threads_voluntary_switches() - before;
    EXPECT_LT(woken, commands / 4) << woken << " wake-ups of other threads for " << commands << " commands";
}

// A caller that does not read its own reply (here: a callback, as the I/O
// thread's renewals, asynchronous callers and Redlock's masters submit)
// leaves the connection under the I/O thread's reactor: parked, each of its
// commands would first wake the I/O thread to take the connection back
// (about 2 wake-ups per command; Redlock over 5 masters went from 8.2 to
// 17.4 context switches per lock+unlock), where one read per reply is due.
TEST(Client, CommandsOfACallerThatDoesNotReadItsRepliesWakeTheIoThreadOncePerReply) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    for (int i = 0; i < 10; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");  // connected, parked
    const std::string_view ping[] = {"PING"};
    auto submit_and_wait = [&] {
        std::promise<std::string> answered;
        client.submit(ping, [&](std::error_code, dlock::Reply&& reply) { answered.set_value(reply.text); });
        return answered.get_future().get();
    };
    for (int i = 0; i < 10; ++i) ASSERT_EQ(submit_and_wait(), "PONG");
    constexpr int commands = 2000;
    const long before = other_threads_voluntary_switches();
    for (int i = 0; i < commands; ++i) ASSERT_EQ(submit_and_wait(), "PONG");
    const long woken = other_threads_voluntary_switches() - before;
    EXPECT_LT(woken, commands * 3 / 2) << woken << " wake-ups of other threads for " << commands << " commands";
}

// A server that closes an idle connection (nobody reads a parked one) is
// noticed by the next command, which waits for the reconnect and is answered,
// as when the I/O thread saw the close at once.
TEST(Client, ACommandAfterTheServerClosedTheIdleConnectionIsAnswered) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    ASSERT_EQ(client.command({"PING"}).text, "PONG");
    ASSERT_EQ(client.command({"PING"}).text, "PONG");  // parked after the first reply
    server.cli({"CONFIG", "SET", "timeout", "1"});
    std::this_thread::sleep_for(2500ms);  // the server closes idle clients after 1 s
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    auto reply = client.command(ping, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(reply.text, "PONG");
}
