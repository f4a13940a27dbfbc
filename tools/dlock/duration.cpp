#include "duration.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

namespace dlock::cli {

std::chrono::milliseconds parse_duration(std::string_view text) {
    using namespace std::chrono;
    const std::string shown(text);
    long long value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end == text.data())
        throw std::invalid_argument("'" + shown + "' is not a duration (use 250ms, 30s, 2m, 1h)");
    if (value < 0) throw std::invalid_argument("'" + shown + "' is negative");
    std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    long long per_unit_ms;
    if (unit.empty() || unit == "s") per_unit_ms = 1000;
    else if (unit == "ms") per_unit_ms = 1;
    else if (unit == "m") per_unit_ms = 60'000;
    else if (unit == "h") per_unit_ms = 3'600'000;
    else throw std::invalid_argument("'" + shown + "' has an unknown unit (use ms, s, m or h)");
    constexpr long long max_ms = 366LL * 24 * 3'600'000;
    if (value > max_ms / per_unit_ms) throw std::invalid_argument("'" + shown + "' is too long (366 days at most)");
    return milliseconds(value * per_unit_ms);
}

}  // namespace dlock::cli
