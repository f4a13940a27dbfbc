#include "lock/quorum.hpp"
#include "hold/validity.hpp"

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

// A 1 ms margin was measured 1.3 ms short on a loaded machine (the fault
// suite's black-hole class): the margin grows with the lease.
TEST(Validity, TheLossIsDeclaredAMarginBeforeTheValiditysEnd) {
    EXPECT_EQ(loss_notice_margin(10ms), 1ms);
    EXPECT_EQ(loss_notice_margin(1000ms), 5ms);
    EXPECT_EQ(loss_notice_margin(30s), 20ms);
    // Never more than the drift already taken off: the hold stays usable.
    EXPECT_LT(loss_notice_margin(30s), clock_drift(30s));
}

TEST(Quorum, MajorityOfOddMasterCounts) {
    EXPECT_EQ(dlock::detail::majority(3), 2u);
    EXPECT_EQ(dlock::detail::majority(5), 3u);
    EXPECT_EQ(dlock::detail::majority(7), 4u);
}

TEST(Quorum, DecidedWhenAMajorityGrantedOrCanNoLongerGrant) {
    using dlock::detail::cannot_win;
    using dlock::detail::won;
    EXPECT_FALSE(won(5, 2));
    EXPECT_TRUE(won(5, 3));
    EXPECT_FALSE(cannot_win(5, 2));  // 3 left could still grant
    EXPECT_TRUE(cannot_win(5, 3));
    EXPECT_FALSE(cannot_win(3, 1));
    EXPECT_TRUE(cannot_win(3, 2));
}

TEST(Quorum, RemainingValidityIsLeaseMinusElapsedMinusDrift) {
    using dlock::detail::remaining_validity;
    const auto sent = std::chrono::steady_clock::time_point{} + 1h;
    // 10 s lease, 40 ms elapsed: 10 000 - 40 - (100 + 2) ms.
    EXPECT_EQ(remaining_validity(sent, sent + 40ms, 10s), 9858ms);
    // 100 ms lease: drift is 1 + 2 ms; 97 ms elapsed leaves nothing.
    EXPECT_EQ(remaining_validity(sent, sent + 97ms, 100ms), 0ms);
    EXPECT_LT(remaining_validity(sent, sent + 98ms, 100ms), 0ms);
}

TEST(Quorum, DefaultNodeTimeoutIsAFiftiethOfTheLeaseWithinBounds) {
    using dlock::detail::default_node_timeout;
    EXPECT_EQ(default_node_timeout(30s), 600ms);
    EXPECT_EQ(default_node_timeout(100ms), 10ms);
    EXPECT_EQ(default_node_timeout(10min), 1000ms);
}
