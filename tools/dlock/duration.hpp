// Durations on the command line: "250ms", "30s", "2m", "1h"; a bare integer
// means seconds.
#pragma once

#include <chrono>
#include <string_view>

namespace dlock::cli {

// Throws std::invalid_argument with a one-line reason for anything else,
// including negative values and durations over 366 days.
std::chrono::milliseconds parse_duration(std::string_view text);

}  // namespace dlock::cli
