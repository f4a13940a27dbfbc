#include "dlock/error.hpp"

#include <gtest/gtest.h>

#include <set>

#include "dlock/reply.hpp"

TEST(Error, EveryCodeHasItsOwnMessage) {
    std::set<std::string> messages;
    for (int code = static_cast<int>(dlock::errc::invalid_argument); code <= static_cast<int>(dlock::errc::replicas_not_acknowledged);
         ++code) {
        auto message = dlock::error_category().message(code);
        EXPECT_NE(message, "unknown dlock error") << code;
        EXPECT_TRUE(messages.insert(message).second) << "duplicate message for " << code;
    }
    EXPECT_STREQ(dlock::error_category().name(), "dlock");
}

TEST(Error, CodesCompareAndThrow) {
    std::error_code ec = dlock::errc::command_timeout;
    EXPECT_EQ(ec, dlock::errc::command_timeout);
    EXPECT_NE(ec, dlock::errc::connect_timeout);
    try {
        dlock::throw_if(ec, "PING");
        FAIL() << "throw_if did not throw";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), dlock::errc::command_timeout);
        EXPECT_NE(std::string(e.what()).find("PING"), std::string::npos);
    }
    EXPECT_NO_THROW(dlock::throw_if(std::error_code{}));
}

TEST(Error, ServerErrorPrefixes) {
    EXPECT_EQ(dlock::error_code_of_server_error("NOAUTH Authentication required."), dlock::errc::auth_failed);
    EXPECT_EQ(dlock::error_code_of_server_error("ERR invalid password"), dlock::errc::auth_failed);
    EXPECT_EQ(dlock::error_code_of_server_error("ERR unknown command"), dlock::errc::server_error);
    EXPECT_EQ(dlock::error_code_of_server_error("LOADING Redis is loading"), dlock::errc::server_error);
}
