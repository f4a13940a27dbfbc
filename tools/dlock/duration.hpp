// Durations on the command line: a number and a unit, or several of them in
// decreasing units ("250ms", "1.5s", "2m", "1m30s", "2h45m", "1d"); a bare
// number means seconds.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlock::cli {

// What every duration error message ends with.
inline constexpr std::string_view accepted_durations =
    "use e.g. 250ms, 1.5s, 30s, 2m, 1m30s, 2h45m, 1d; a bare number means seconds";

// Throws std::invalid_argument with a one-line reason for anything else,
// including negative values, exponents, units out of order and durations
// over 366 days. Fractions below a millisecond are dropped.
std::chrono::milliseconds parse_duration(std::string_view text);

// The way a person writes it, in the largest of h, m, s and ms that divides
// it exactly ("10ms", "90s", "24h"); parse_duration reads it back.
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace dlock::cli
