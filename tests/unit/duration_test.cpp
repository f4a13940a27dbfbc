#include "duration.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using dlock::cli::parse_duration;

TEST(Duration, UnitsAndBareSeconds) {
    EXPECT_EQ(parse_duration("250ms"), 250ms);
    EXPECT_EQ(parse_duration("30s"), 30s);
    EXPECT_EQ(parse_duration("2m"), 2min);
    EXPECT_EQ(parse_duration("1h"), 1h);
    EXPECT_EQ(parse_duration("1d"), 24h);
    EXPECT_EQ(parse_duration("45"), 45s);
    EXPECT_EQ(parse_duration("0"), 0ms);
}

TEST(Duration, DecimalsAndCompoundForms) {
    EXPECT_EQ(parse_duration("1.5s"), 1500ms);
    EXPECT_EQ(parse_duration("0.25"), 250ms);
    EXPECT_EQ(parse_duration("1.5h"), 90min);
    EXPECT_EQ(parse_duration("1m30s"), 90s);
    EXPECT_EQ(parse_duration("2h45m"), 165min);
    EXPECT_EQ(parse_duration("1d2h3m4s5ms"), 24h + 2h + 3min + 4s + 5ms);
    EXPECT_EQ(parse_duration("1.0005s"), 1000ms) << "below a millisecond is dropped";
    EXPECT_EQ(parse_duration("366d"), 366 * 24h);
}

TEST(Duration, MalformedIsRejectedNamingTheAcceptedForms) {
    for (const char* bad : {"", "s", "ms", "-1s", "5x", "10 s", "s10", "99999999999999999999", "9000h", "367d",
                            "1e100", "1.s", ".s", "1.5.5s", "30s1m", "1m1m", "1m30", "1h 30m", "1,5s", "+1s"}) {
        try {
            parse_duration(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
            EXPECT_NE(what.find("1m30s"), std::string::npos) << "names the accepted forms: " << what;
        }
    }
}

TEST(Duration, FormattedInTheLargestExactUnitAndReadBack) {
    using dlock::cli::format_duration;
    EXPECT_EQ(format_duration(10ms), "10ms");
    EXPECT_EQ(format_duration(1500ms), "1500ms");
    EXPECT_EQ(format_duration(90s), "90s");
    EXPECT_EQ(format_duration(2min), "2m");
    EXPECT_EQ(format_duration(24h), "24h");
    EXPECT_EQ(format_duration(0ms), "0ms");
    for (std::chrono::milliseconds d : {10ms, 1500ms, 90000ms, 86400000ms})
        EXPECT_EQ(parse_duration(format_duration(d)), d);
}
