// `dlock hold` beside a script: what ends a hold (stdin, signals) and what
// its standard descriptors are. Through the binary, against real servers.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

#include "cli_runner.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;
using dlock::support::eventually;
using dlock::support::RedisServer;

namespace {

// Where a process's descriptor points ("/dev/null", "anon_inode:[eventfd]",
// "socket:[...]"); empty when it is closed.
std::string descriptor_target(pid_t pid, int fd) {
    char target[256];
    const auto path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const auto n = readlink(path.c_str(), target, sizeof target);
    return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

// `dlock hold KEY &` in a script: the shell gives it /dev/null as stdin. That
// end, or a file's, is no "let go": the lock stays until a signal.
TEST(CliHold, InTheBackgroundOrFromAFileItHoldsUntilASignal) {
    RedisServer server;
    const auto file = temp_path("stdin");
    std::ofstream(file) << "not a pipe\n";
    const std::string script =
        "\"$DLOCK\" --url \"$URL\" hold background > \"$OUT\".1 & a=$!\n"
        "\"$DLOCK\" --url \"$URL\" hold from-file < \"$FILE\" > \"$OUT\".2 & b=$!\n"
        "for i in $(seq 100); do [ -s \"$OUT\".1 ] && [ -s \"$OUT\".2 ] && break; sleep 0.05; done\n"
        "sleep 0.5\n"
        "echo \"held=$(redis-cli -u \"$URL\" EXISTS 'dlock:{background}')$(redis-cli -u \"$URL\" EXISTS "
        "'dlock:{from-file}')\"\n"
        "kill $a $b; wait $a; echo \"a=$?\"; wait $b; echo \"b=$?\"\n";
    auto f = dlock_cli_script(script, {{"DLOCK", DLOCK_CLI}, {"URL", server.uri()}, {"FILE", file},
                                       {"OUT", temp_path("token")}});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.out.find("held=11"), std::string::npos) << f.out << f.err;
    EXPECT_NE(f.out.find("a=0"), std::string::npos) << "SIGTERM releases: " << f.out << f.err;
    EXPECT_NE(f.out.find("b=0"), std::string::npos) << f.out << f.err;
    EXPECT_FALSE(held(server, "background"));
    EXPECT_FALSE(held(server, "from-file"));
}

// Started with descriptor 0 closed, dlock's first eventfd took its place and
// hold polled its own wake-up as stdin. /dev/null takes the place first.
TEST(CliHold, StartedWithStdinClosedItsStdinIsDevNull) {
    RedisServer server;
    auto holding = start_with_stdin_closed({"--url", server.uri(), "hold", "k"});
    // The token is out: the hold has begun (a signal before that ends the wait, 128 + N).
    ASSERT_TRUE(eventually([&] { return read_file(holding.out_path).find('\n') != std::string::npos; }));
    EXPECT_EQ(descriptor_target(holding.pid, 0), "/dev/null");
    kill(holding.pid, SIGTERM);
    auto f = finish(holding);
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_FALSE(held(server, "k"));

    // The command run starts gets it too, not a closed descriptor 0 that
    // its first open() would take.
    const auto seen = temp_path("fd0");
    f = finish(start_with_stdin_closed(
        {"--url", server.uri(), "run", "k", "--", "sh", "-c", "readlink /proc/$$/fd/0 > " + seen}));
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(read_file(seen), "/dev/null\n");
}
