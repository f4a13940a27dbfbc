#include "semaphore_replies.hpp"

#include <algorithm>
#include <charconv>
#include <climits>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

bool in_limit_range(const Reply& r) { return r.is_integer() && r.integer >= 1 && r.integer <= max_semaphore_limit; }

// The k a permit id ends in ('#k'); 0 when it carries none.
unsigned weight_of(std::string_view id) {
    const auto hash = id.rfind('#');
    if (hash == std::string_view::npos) return 0;
    unsigned k = 0;
    const auto digits = id.substr(hash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    return ec == std::errc() && end == digits.data() + digits.size() ? k : 0;
}

[[noreturn]] void malformed(const char* what) { throw Error(errc::protocol_error, what); }

}  // namespace

SemaphoreAcquire read_semaphore_acquire(const Reply& reply) {
    if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_integer()) return {};
    const auto& e = reply.elements;
    switch (e[0].integer) {
        case 1:
            if (e.size() != 2 || !in_limit_range(e[1])) return {};
            return {SemaphoreAcquire::Kind::granted, static_cast<unsigned>(e[1].integer)};
        case 0: {
            if (e.size() != 2 || !e[1].is_integer()) return {};
            // Never past the longest lease: a hostile number must not
            // overflow the clock arithmetic of the wait.
            const auto wake = std::clamp<long long>(e[1].integer, 0, max_lease.count());
            return {SemaphoreAcquire::Kind::not_granted, 0, std::chrono::milliseconds(wake)};
        }
        case -2:
            if (e.size() != 1) return {};
            return {SemaphoreAcquire::Kind::stale};
        case -3:
            if (e.size() != 2 || !in_limit_range(e[1])) return {};
            return {SemaphoreAcquire::Kind::over_limit, static_cast<unsigned>(e[1].integer)};
        default: return {};
    }
}

bool is_semaphore_grant(const Reply& reply) {
    return read_semaphore_acquire(reply).kind == SemaphoreAcquire::Kind::granted;
}

SemaphoreRelease read_semaphore_release(const Reply& reply) {
    if (!reply.is_integer()) return SemaphoreRelease::malformed;
    if (reply.integer == 1 || reply.integer == 0) return SemaphoreRelease::released;
    if (reply.integer == -1) return SemaphoreRelease::not_held;
    return SemaphoreRelease::malformed;
}

unsigned read_semaphore_set_limit(const Reply& reply) {
    if (!reply.is_integer() || reply.integer < 0 || reply.integer > max_semaphore_limit)
        malformed("unexpected set-limit reply");
    return static_cast<unsigned>(reply.integer);
}

SemaphoreInfo read_semaphore_inspect(const Reply& reply) {
    if (!reply.is_array() || reply.elements.size() != 4) malformed("unexpected semaphore inspect reply");
    const auto& e = reply.elements;
    for (int i = 0; i < 3; ++i)
        if (!e[i].is_integer() || e[i].integer < 0 || e[i].integer > UINT_MAX) malformed("unexpected semaphore inspect reply");
    if (!e[3].is_array() || e[3].elements.size() % 2 != 0) malformed("unexpected semaphore inspect reply");
    SemaphoreInfo info;
    info.limit = static_cast<unsigned>(e[0].integer);
    info.used = static_cast<unsigned>(e[1].integer);
    info.waiting = static_cast<unsigned>(e[2].integer);
    const auto& pairs = e[3].elements;
    info.holders.reserve(pairs.size() / 2);
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
        if (!pairs[i].is_text() || !pairs[i + 1].is_integer()) malformed("unexpected semaphore inspect reply");
        const auto ttl = std::clamp<long long>(pairs[i + 1].integer, 0, max_lease.count());
        info.holders.push_back({pairs[i].text, weight_of(pairs[i].text), std::chrono::milliseconds(ttl)});
    }
    return info;
}

}  // namespace dlock::detail
