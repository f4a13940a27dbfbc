// `dlock hold` beside a script: what ends a hold (stdin, signals) and what
// its standard descriptors are. Through the binary, against real servers.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_runner.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;
using dlock::support::RedisServer;

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
