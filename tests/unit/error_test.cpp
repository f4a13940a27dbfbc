#include "dlock/error.hpp"

#include <gtest/gtest.h>

#include <set>

#include "dlock/reply.hpp"
#include "redis/server_error_text.hpp"

TEST(Error, EveryCodeHasItsOwnMessage) {
    std::set<std::string> messages;
    for (int code = static_cast<int>(dlock::errc::invalid_argument); code <= static_cast<int>(dlock::errc::layout_mismatch);
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
    // A cluster's "did not run" answers are typed, and keep Redis's text.
    EXPECT_EQ(dlock::error_code_of_server_error("TRYAGAIN Multiple keys request during rehashing of slot"),
              dlock::errc::slot_migrating);
    EXPECT_EQ(dlock::error_code_of_server_error("CLUSTERDOWN The cluster is down"), dlock::errc::cluster_down);
    const auto reply = dlock::Reply::make_error("CLUSTERDOWN The cluster is down");
    dlock::detail::note_server_error(reply.error_code(), reply);
    try {
        dlock::throw_if(reply.error_code(), "try_lock");
        FAIL() << "no throw";
    } catch (const dlock::Error& e) {
        EXPECT_NE(std::string(e.what()).find("CLUSTERDOWN The cluster is down"), std::string::npos) << e.what();
    }
}
