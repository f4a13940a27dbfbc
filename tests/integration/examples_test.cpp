// The examples run, not only build: each against a private server.
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>

#include <unistd.h>

#include "redis_server.hpp"

namespace {

// Runs a command and returns its exit status and standard output.
std::pair<int, std::string> run(const std::string& command) {
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A command line from its parts. Appended, not joined with operator+: GCC 12
// warns (-Warray-bounds, an error here) inside operator+ when a part is a
// literal whose length (an example's path) crosses the short-string size.
std::string command_line(std::initializer_list<std::string_view> parts) {
    std::string line;
    for (auto part : parts) line.append(part);
    return line;
}

}  // namespace

TEST(Examples, QuickstartHoldsTheLockWithATokenAndReleasesIt) {
    dlock::support::RedisServer server;
    auto [code, out] = run(command_line({DLOCK_QUICKSTART, " ", server.uri()}));
    EXPECT_EQ(code, 0) << out;
    // Tokens grow: "... fencing token A" then "again, token B" with B > A.
    auto number_after = [&](const std::string& marker) -> unsigned long long {
        auto at = out.find(marker);
        return at == std::string::npos ? 0 : std::stoull(out.substr(at + marker.size()));
    };
    auto first = number_after("holding orders:42 with fencing token ");
    auto again = number_after("again, token ");
    EXPECT_GT(first, 0u) << out;
    EXPECT_GT(again, first) << out;
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{orders:42}", "dlock:{report}"}), "0");
}

TEST(Examples, QuickstartReportsAnUnreachableServer) {
    auto [code, out] = run(command_line(
        {DLOCK_QUICKSTART, " redis://127.0.0.1:", std::to_string(dlock::support::free_port()), " 2>/dev/null"}));
    EXPECT_EQ(code, 1);
}

// Two servers side by side on one directory, each answering 90 adds over 90
// connections at once: every update kept (each read-modify-write waits 2 ms
// between its read and its write, so an unlocked one would lose many).
TEST(Examples, AsyncServersSerialiseWorkPerKeyAcrossProcesses) {
    dlock::support::RedisServer server;
    char dir_template[] = "/tmp/dlock-async-example-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    const std::string dir = dir_template;
    const std::string one = command_line({DLOCK_ASYNC_SERVER, " ", server.uri(), " ", dir, " 90"});
    auto [code, out] = run(command_line({"(", one, " & a=$!; ", one, " & b=$!; wait $a; ra=$?; wait $b; rb=$?; ",
                                         "[ $ra = 0 ] && [ $rb = 0 ]) 2>&1"}));
    EXPECT_EQ(code, 0) << out;
    unsigned long total = 0;
    for (int key = 0; key < 3; ++key) {
        const std::string file = dir + "/key" + std::to_string(key);
        FILE* in = fopen(file.c_str(), "r");
        unsigned long count = 0;
        if (in) {
            if (fscanf(in, "%lu", &count) != 1) count = 0;
            fclose(in);
        }
        EXPECT_EQ(count, 60u) << file;
        total += count;
        std::remove(file.c_str());
    }
    EXPECT_EQ(total, 180u);
    rmdir(dir.c_str());
}

// dlock from a Boost.Asio program (dlock/boost_async.hpp): four coroutines'
// locked increments all kept, a busy lock's one attempt an empty hold, and
// a force-released hold's async_wait_lost completing without an exception,
// with the reason on the hold.
TEST(Examples, BoostAsioCoroutinesLockAndHearOfALoss) {
#ifndef DLOCK_BOOST_ASYNC
    GTEST_SKIP() << "Boost.Asio's headers were not found (libboost-dev)";
#else
    dlock::support::RedisServer server;
    auto [code, out] = run(command_line({DLOCK_BOOST_ASYNC, " ", server.uri(), " 2>&1"}));
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("counter 4 after 4 locked increments"), std::string::npos) << out;
    EXPECT_NE(out.find("the hold was lost (revoked)"), std::string::npos) << out;
#endif
}
