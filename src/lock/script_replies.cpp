#include "script_replies.hpp"

#include "lock_keys.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// acquire.lua's first element.
constexpr long long granted = 1, busy = 0, not_ours = -1, stale_operation = -2;

// One of the script's answers, with the elements that answer carries: no
// reading may index past what arrived, or take another number for a grant.
bool is_acquire_reply(const Reply& reply) {
    if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_integer()) return false;
    const auto integers = [&](std::size_t n) {
        return reply.elements.size() == n &&
               std::all_of(reply.elements.begin(), reply.elements.end(), [](const Reply& e) { return e.is_integer(); });
    };
    switch (reply.elements[0].integer) {
        case granted: return integers(3);
        case busy: return integers(2) || integers(3);  // with the caller's arrival when it stands in line
        case not_ours:
        case stale_operation: return true;
        default: return false;
    }
}

// A count from the server as the client keeps it: at least 1 (a grant is a
// hold), and never wrapped into a smaller one.
unsigned hold_count(long long count) {
    return static_cast<unsigned>(std::clamp<long long>(count, 1, UINT_MAX));
}

}  // namespace

bool is_grant(const Reply& reply) { return is_acquire_reply(reply) && reply.elements[0].integer == granted; }

FreshAcquire read_fresh_acquire(const Reply& reply) {
    if (!is_acquire_reply(reply)) return {};
    const auto answer = reply.elements[0].integer;
    if (answer == not_ours) return {};  // a fresh attempt has no hold to lose
    if (answer == busy) {
        // Never past the longest lease there can be: a key someone gave a
        // huge TTL must not overflow the clock arithmetic of the wait.
        const auto left = std::clamp<long long>(reply.elements[1].integer, 1, max_lease.count());
        const auto arrival = reply.elements.size() == 3 ? std::max<long long>(reply.elements[2].integer, 0) : 0;
        return {FreshAcquire::Kind::busy, 0, 0, std::chrono::milliseconds(left), static_cast<std::uint64_t>(arrival)};
    }
    if (answer == stale_operation) return {FreshAcquire::Kind::stale_operation};
    return {FreshAcquire::Kind::granted, static_cast<std::uint64_t>(reply.elements[1].integer),
            hold_count(reply.elements[2].integer)};
}

Reentry read_reentry(const Reply& reply) {
    if (!is_acquire_reply(reply)) return {};
    if (reply.elements[0].integer != granted) return {Reentry::Kind::not_ours};
    return {Reentry::Kind::granted, hold_count(reply.elements[2].integer)};
}

MasterVote read_master_vote(const Reply& reply) {
    if (!reply.is_array() || reply.elements.empty()) return {};
    const auto answer = reply.elements[0].integer;
    if (answer == granted && reply.elements.size() == 3)
        return {Vote::granted, static_cast<std::uint64_t>(reply.elements[1].integer)};
    if (answer == busy && reply.elements.size() == 2) return {Vote::held_by_another, 0, reply.elements[1].integer};
    return {};
}

Release read_release(const Reply& reply) {
    if (!reply.is_integer()) return {};
    if (reply.integer < 0) return {Release::Kind::not_ours};
    // More holds than a count can say are still holds: never wrap to 0,
    // which would end a hold the server keeps.
    return {Release::Kind::released, static_cast<unsigned>(std::min<long long>(reply.integer, UINT_MAX))};
}

bool read_renewed(const Reply& reply) { return reply.is_integer() && reply.integer == 1; }

std::optional<std::uint64_t> read_hand_off(const Reply& reply) {
    if (!reply.is_array() || reply.elements.size() != 2 || reply.elements[0].integer != 1) return std::nullopt;
    return static_cast<std::uint64_t>(reply.elements[1].integer);
}

LockInfo read_inspect(const Reply& reply) {
    if (!reply.is_array() || reply.elements.size() != 6) throw Error(errc::protocol_error, "unexpected inspect reply");
    LockInfo info;
    info.held = !reply.elements[0].is_nil();
    if (info.held) {
        info.owner = reply.elements[0].text;
        info.hold_count = static_cast<unsigned>(reply.elements[1].integer);
        info.ttl = std::chrono::milliseconds(std::max<long long>(reply.elements[2].integer, 0));
        info.fencing_token = static_cast<std::uint64_t>(reply.elements[3].integer);
        if (reply.elements[5].is_text()) info.holder = reply.elements[5].text;
    }
    info.last_fencing_token = static_cast<std::uint64_t>(reply.elements[4].integer);
    return info;
}

std::optional<std::string> read_force_release(const Reply& reply) {
    if (reply.is_nil()) return std::nullopt;
    if (!reply.is_array() || reply.elements.empty()) throw Error(errc::protocol_error, "unexpected force-release reply");
    return reply.elements[0].text;
}

namespace {

// An inbox notice: VERB, then `numbers` words (the owner, then decimal
// numbers), then the lock's key "dlock:{<name>}" (any bytes, spaces too).
template <std::size_t Numbers>
struct InboxNotice {
    std::string_view owner;
    std::array<std::uint64_t, Numbers> numbers{};
    std::string name;
};

template <std::size_t Numbers>
std::optional<InboxNotice<Numbers>> read_inbox_notice(std::string_view payload, std::string_view verb) {
    constexpr std::string_view key_prefix = "dlock:{";
    if (payload.substr(0, verb.size()) != verb) return std::nullopt;
    payload.remove_prefix(verb.size());
    auto next_word = [&payload]() -> std::optional<std::string_view> {
        auto space = payload.find(' ');
        if (space == std::string_view::npos) return std::nullopt;
        auto word = payload.substr(0, space);
        payload.remove_prefix(space + 1);
        return word;
    };
    InboxNotice<Numbers> notice;
    const auto owner = next_word();
    if (!owner) return std::nullopt;
    notice.owner = *owner;
    for (auto& number : notice.numbers) {
        const auto text = next_word();
        if (!text || std::from_chars(text->data(), text->data() + text->size(), number).ptr !=
                         text->data() + text->size())
            return std::nullopt;
    }
    const auto key = payload;
    if (key.size() < key_prefix.size() + 1 || key.substr(0, key_prefix.size()) != key_prefix || key.back() != '}')
        return std::nullopt;
    auto name = name_of_tag(key.substr(key_prefix.size(), key.size() - key_prefix.size() - 1));
    if (!name) return std::nullopt;
    notice.name = std::move(*name);
    return notice;
}

}  // namespace

std::optional<Revocation> read_revocation(std::string_view payload) {
    auto notice = read_inbox_notice<1>(payload, "revoked ");
    if (!notice) return std::nullopt;
    return Revocation{notice->owner, notice->numbers[0], std::move(notice->name)};
}

std::optional<GrantNotice> read_grant_notice(std::string_view payload) {
    auto notice = read_inbox_notice<2>(payload, "granted ");
    if (!notice) return std::nullopt;
    return GrantNotice{notice->owner, notice->numbers[0], notice->numbers[1], std::move(notice->name)};
}

}  // namespace dlock::detail
