#include "duration.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using dlock::cli::parse_duration;

TEST(Duration, UnitsAndBareSeconds) {
    EXPECT_EQ(parse_duration("250ms"), 250ms);
    EXPECT_EQ(parse_duration("30s"), 30s);
    EXPECT_EQ(parse_duration("2m"), 2min);
    EXPECT_EQ(parse_duration("1h"), 1h);
    EXPECT_EQ(parse_duration("45"), 45s);
    EXPECT_EQ(parse_duration("0"), 0ms);
}

TEST(Duration, MalformedIsRejectedWithAReason) {
    for (const char* bad : {"", "s", "ms", "-1s", "1.5s", "5x", "10 s", "1d", "s10", "99999999999999999999",
                            "9000h"}) {
        try {
            parse_duration(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find('\''), std::string::npos) << bad;
        }
    }
}
