// Lease arithmetic, in one place: how long a hold may be trusted, and when
// to renew it. All on the monotonic clock.
#pragma once

#include <algorithm>
#include <chrono>

namespace dlock::detail {

// Clocks of client and server may run at slightly different rates, and the
// expiry is enforced by the server: trust a lease 1 % + 2 ms less than asked.
constexpr std::chrono::milliseconds clock_drift(std::chrono::milliseconds lease) {
    return lease / 100 + std::chrono::milliseconds(2);
}

// The latest moment a lease granted by a command sent at `sent` can still be
// valid: counted from the send, not the reply, since the server may have
// started the lease at any point in between.
template <typename TimePoint>
constexpr TimePoint valid_until(TimePoint sent, std::chrono::milliseconds lease) {
    return sent + lease - clock_drift(lease);
}

// Renew a third of the way in, so two renewals can fail before the lease ends.
constexpr std::chrono::milliseconds renew_interval(std::chrono::milliseconds lease) {
    return std::max(lease / 3, std::chrono::milliseconds(1));
}

// The loss is declared this long before valid_until, so that the holder
// hears of it in time even when the timer, or the I/O thread that tells it,
// runs a little late (a loaded machine); the hold is trusted that much less.
constexpr std::chrono::milliseconds loss_notice_margin(std::chrono::milliseconds lease) {
    return std::clamp(lease / 200, std::chrono::milliseconds(1), std::chrono::milliseconds(20));
}

// After a failed renewal, try again this soon (but never past the validity).
constexpr std::chrono::milliseconds renew_retry_interval(std::chrono::milliseconds lease) {
    return std::clamp(lease / 10, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
}

}  // namespace dlock::detail
