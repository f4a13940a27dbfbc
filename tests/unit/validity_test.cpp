#include "lock/validity.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using namespace dlock::detail;

TEST(Validity, DriftIsOnePercentPlusTwoMilliseconds) {
    EXPECT_EQ(clock_drift(30s), 302ms);
    EXPECT_EQ(clock_drift(1000ms), 12ms);
    EXPECT_EQ(clock_drift(10ms), 2ms);
}

TEST(Validity, CountsFromTheSendTime) {
    std::chrono::steady_clock::time_point sent{100s};
    EXPECT_EQ(valid_until(sent, 30s), sent + 30s - 302ms);
    EXPECT_EQ(valid_until(sent, 1s), sent + 988ms);
}

TEST(Validity, RenewAThirdOfTheWayIn) {
    EXPECT_EQ(renew_interval(30s), 10s);
    EXPECT_EQ(renew_interval(300ms), 100ms);
    EXPECT_EQ(renew_interval(1ms), 1ms);
}

TEST(Validity, RetryIntervalIsBounded) {
    EXPECT_EQ(renew_retry_interval(30s), 1000ms);
    EXPECT_EQ(renew_retry_interval(300ms), 30ms);
    EXPECT_EQ(renew_retry_interval(10ms), 5ms);
}
