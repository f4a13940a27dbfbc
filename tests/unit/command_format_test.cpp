#include "redis/command_format.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "dlock/script.hpp"

using namespace dlock::detail;

TEST(CommandFormat, RespArray) {
    std::string out;
    append_command(out, std::vector<std::string_view>{"SET", "k", std::string_view("a\0b", 3)});
    using namespace std::string_literals;
    EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n"s);
}

TEST(CommandFormat, ManyArgumentsGoThroughTheHeapPath) {
    std::vector<std::string> storage;
    for (int i = 0; i < 40; ++i) storage.push_back(std::to_string(i));
    std::vector<std::string_view> args{"DEL"};
    for (auto& s : storage) args.push_back(s);
    std::string out;
    append_command(out, args);
    EXPECT_EQ(out.rfind("*41\r\n$3\r\nDEL\r\n$1\r\n0\r\n", 0), 0u);
    EXPECT_NE(out.find("$2\r\n39\r\n"), std::string::npos);
}

TEST(CommandFormat, EvalLayout) {
    std::string out;
    append_eval(out, "EVALSHA", "abc", std::vector<std::string_view>{"k1"}, std::vector<std::string_view>{"a1", "a2"});
    EXPECT_EQ(out, "*6\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$2\r\nk1\r\n$2\r\na1\r\n$2\r\na2\r\n");
}

TEST(CommandFormat, EvalshaRewrittenAsEvalKeepsKeysAndArguments) {
    dlock::Script script("return {KEYS[1], ARGV[1]}");
    std::vector<std::string_view> keys{"key:1", "key:2"};
    std::vector<std::string_view> argv{"x", ""};
    std::string evalsha, expected;
    append_eval(evalsha, "EVALSHA", script.sha1(), keys, argv);
    append_eval(expected, "EVAL", script.text(), keys, argv);
    EXPECT_EQ(rewrite_evalsha_as_eval(evalsha, script.sha1(), script.text()), expected);
}

TEST(Script, Sha1MatchesKnownDigest) {
    EXPECT_EQ(dlock::sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    EXPECT_EQ(dlock::Script("return 1").sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}
