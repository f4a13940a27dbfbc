// dlock/deadline.hpp — how every timed call of dlock's lock kinds reads its
// timeout or deadline: as one point on std::chrono::steady_clock, taken once,
// at the call, and rounded up (a wait is never shorter than asked). A
// deadline on another clock (system_clock, say) is converted by its distance
// from that clock's now, so a later step of that clock does not move it.
#pragma once

#include <chrono>

namespace dlock {

template <typename Rep, typename Period>
std::chrono::steady_clock::time_point steady_deadline_in(const std::chrono::duration<Rep, Period>& timeout) {
    return std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(timeout);
}

template <typename Clock, typename Duration>
std::chrono::steady_clock::time_point steady_deadline_at(const std::chrono::time_point<Clock, Duration>& deadline) {
    return steady_deadline_in(deadline - Clock::now());
}

}  // namespace dlock
