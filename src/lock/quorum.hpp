// Redlock arithmetic, in one place: majorities, per-master timeouts, and how
// long a majority's grant can be trusted.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "hold/validity.hpp"

namespace dlock::detail {

constexpr std::size_t majority(std::size_t masters) { return masters / 2 + 1; }

// Decided either way: enough granted, or too many refused for a majority.
constexpr bool won(std::size_t masters, std::size_t granted) { return granted >= majority(masters); }
constexpr bool cannot_win(std::size_t masters, std::size_t refused) { return refused > masters - majority(masters); }

// lease / 50, between 10 ms and 1 s: long enough for a loaded master to
// answer, short against the lease so a dead master costs little validity.
constexpr std::chrono::milliseconds default_node_timeout(std::chrono::milliseconds lease) {
    return std::clamp(lease / 50, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

// What is left of a majority's grant at `now` for requests sent at `sent`:
// lease - elapsed - drift. Positive means the lock may be trusted.
template <typename TimePoint>
constexpr auto remaining_validity(TimePoint sent, TimePoint now, std::chrono::milliseconds lease) {
    return valid_until(sent, lease) - now;
}

}  // namespace dlock::detail
