#include "duration.hpp"

#include <cctype>
#include <stdexcept>
#include <string>

namespace dlock::cli {
namespace {

constexpr long long max_ms = 366LL * 24 * 3'600'000;

struct Unit {
    std::string_view name;
    long long ms;
};
// Longest names first, so "ms" is not read as "m" followed by "s".
constexpr Unit units[] = {{"ms", 1}, {"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1000}};

[[noreturn]] void refuse(const std::string& shown, const std::string& why) {
    throw std::invalid_argument("'" + shown + "' " + why + " (" + std::string(accepted_durations) + ")");
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text) {
    const std::string shown(text);
    if (text.empty()) refuse(shown, "is not a duration");
    if (text.front() == '-') refuse(shown, "is negative");
    // Exact arithmetic in integers: whole part and up to three decimals, in ms.
    long long total = 0;
    long long last_unit = max_ms + 1;  // each part's unit must be smaller than the one before
    std::size_t i = 0;
    while (i < text.size()) {
        long long whole = 0, fraction_ms = 0, scale = 100;
        std::size_t digits = 0;
        for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
            whole = whole * 10 + (text[i] - '0');
            if (whole > max_ms) refuse(shown, "is too long (366 days at most)");
        }
        if (i < text.size() && text[i] == '.') {
            ++i;
            std::size_t decimals = 0;
            for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++decimals) {
                fraction_ms += (text[i] - '0') * scale;  // per 1000 of the unit; beyond 3 decimals scale is 0
                scale /= 10;
            }
            if (decimals == 0) refuse(shown, "has a decimal point without decimals");
            digits += decimals;
        }
        if (digits == 0) refuse(shown, "is not a duration");
        const Unit* unit = nullptr;
        std::string_view rest = text.substr(i);
        for (const auto& u : units)
            if (rest.substr(0, u.name.size()) == u.name) {
                unit = &u;
                break;
            }
        if (!unit) {
            if (!rest.empty()) refuse(shown, "has an unknown unit '" + std::string(rest) + "'");
            if (i != text.size() || total != 0 || last_unit <= max_ms) refuse(shown, "needs a unit after each number");
            unit = &units[4];  // a bare number: seconds
        }
        i += unit->name.size();
        if (unit->ms >= last_unit) refuse(shown, "repeats a unit or puts a smaller one first");
        last_unit = unit->ms;
        if (whole > max_ms / unit->ms) refuse(shown, "is too long (366 days at most)");
        total += whole * unit->ms + fraction_ms * unit->ms / 1000;
        if (total > max_ms) refuse(shown, "is too long (366 days at most)");
    }
    return std::chrono::milliseconds(total);
}

std::string format_duration(std::chrono::milliseconds duration) {
    const long long ms = duration.count();
    // Days are left out: "24h" is how a lease limit is said.
    for (const auto& unit : {units[2], units[3], units[4]})
        if (ms != 0 && ms % unit.ms == 0) return std::to_string(ms / unit.ms) + std::string(unit.name);
    return std::to_string(ms) + "ms";
}

}  // namespace dlock::cli
