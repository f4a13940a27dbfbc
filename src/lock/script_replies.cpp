#include "script_replies.hpp"

#include "hold/lock_keys.hpp"

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

std::optional<HandOffAnswer> read_hand_off(const Reply& reply) {
    const auto size = reply.is_array() ? reply.elements.size() : 0;
    if ((size != 2 && size != 3) || reply.elements[0].integer != 1 || !reply.elements[1].is_integer()) return std::nullopt;
    HandOffAnswer answer{static_cast<std::uint64_t>(reply.elements[1].integer)};
    if (size == 3) {
        if (!reply.elements[2].is_integer() || reply.elements[2].integer <= 0) return std::nullopt;
        answer.placed_arrival = static_cast<std::uint64_t>(reply.elements[2].integer);
    }
    return answer;
}

namespace {

[[noreturn]] void bad_inspect() { throw Error(errc::protocol_error, "unexpected inspect reply"); }

std::uint64_t count_of(const Reply& r) {
    if (!r.is_integer() || r.integer < 0) bad_inspect();
    return static_cast<std::uint64_t>(r.integer);
}

std::chrono::milliseconds ms_of(const Reply& r) {
    if (!r.is_integer()) bad_inspect();
    return std::chrono::milliseconds(std::max<long long>(r.integer, 0));
}

// An array of `width`-element records.
const std::vector<Reply>& records(const Reply& r, std::size_t width) {
    if (!r.is_array() || r.elements.size() % width != 0) bad_inspect();
    return r.elements;
}

unsigned permits_of(std::string_view permit) {
    const auto hash = permit.rfind('#');
    unsigned k = 1;
    if (hash != std::string_view::npos) std::from_chars(permit.data() + hash + 1, permit.data() + permit.size(), k);
    return k;
}

}  // namespace

LockInfo read_inspect(const Reply& reply) {
    if (!reply.is_array() || reply.elements.size() != 12) bad_inspect();
    const auto& e = reply.elements;
    LockInfo info;
    if (!e[0].is_nil()) {
        if (!e[0].is_text()) bad_inspect();
        info.owner = e[0].text;
        info.hold_count = static_cast<unsigned>(count_of(e[1]));
        info.ttl = ms_of(e[2]);
        info.fencing_token = count_of(e[3]);
        if (e[5].is_text()) info.holder = e[5].text;
        info.kind = LockInfo::Kind::exclusive;
    }
    info.last_fencing_token = count_of(e[4]);
    const auto& readers = records(e[6], 4);
    for (std::size_t i = 0; i < readers.size(); i += 4) {
        if (!readers[i].is_text()) bad_inspect();
        info.readers.push_back({readers[i].text, static_cast<unsigned>(count_of(readers[i + 1])),
                                ms_of(readers[i + 2]), count_of(readers[i + 3])});
    }
    info.waiters = static_cast<unsigned>(count_of(e[7]) + count_of(e[8]));
    info.semaphore.limit = static_cast<unsigned>(count_of(e[9]));
    const auto& permits = records(e[10], 2);
    for (std::size_t i = 0; i < permits.size(); i += 2) {
        if (!permits[i].is_text()) bad_inspect();
        const unsigned k = permits_of(permits[i].text);
        info.semaphore.holders.push_back({permits[i].text, k, ms_of(permits[i + 1])});
        info.semaphore.used += k;
    }
    info.semaphore.waiting = static_cast<unsigned>(count_of(e[11]));
    if (info.kind == LockInfo::Kind::free) {
        if (!info.readers.empty()) info.kind = LockInfo::Kind::shared;
        else if (!info.semaphore.holders.empty() || info.semaphore.waiting > 0) info.kind = LockInfo::Kind::semaphore;
    }
    info.held = info.holds() > 0;
    return info;
}

ForceRelease read_force_release(const Reply& reply) {
    auto bad = [] { throw Error(errc::protocol_error, "unexpected force-release reply"); };
    if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_text()) bad();
    const auto& status = reply.elements[0].text;
    ForceRelease answer;
    if (status == "free") return answer;
    if ((status != "released" && status != "refused") || reply.elements.size() != 2) bad();
    const auto& holds = reply.elements[1];
    if (!holds.is_array() || holds.elements.size() % 3 != 0) bad();
    auto& out = status == "refused" ? answer.would_break : answer.broken;
    answer.refused = status == "refused";
    for (std::size_t i = 0; i < holds.elements.size(); i += 3) {
        const auto& h = holds.elements;
        if (!h[i].is_text() || !h[i + 1].is_integer() || h[i + 1].integer < 0 || !h[i + 2].is_text()) bad();
        ForceRelease::Broken b{h[i].text, static_cast<unsigned>(h[i + 1].integer), LockInfo::Kind::exclusive};
        const auto& side = h[i + 2].text;
        if (side == "read") b.kind = LockInfo::Kind::shared;
        else if (side == "permit") b.kind = LockInfo::Kind::semaphore;
        else if (side != "lock") bad();
        out.push_back(std::move(b));
    }
    return answer;
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
    const bool reader = payload.substr(0, 13) == "revoked-read ";
    auto notice = read_inbox_notice<1>(payload, reader ? "revoked-read " : "revoked ");
    if (!notice) return std::nullopt;
    return Revocation{notice->owner, notice->numbers[0], std::move(notice->name), reader};
}

std::optional<GrantNotice> read_grant_notice(std::string_view payload) {
    auto notice = read_inbox_notice<2>(payload, "granted ");
    if (!notice) return std::nullopt;
    return GrantNotice{notice->owner, notice->numbers[0], notice->numbers[1], std::move(notice->name)};
}

std::optional<PermitGrantNotice> read_permit_grant_notice(std::string_view payload) {
    constexpr std::string_view verb = "granted-permit ";
    if (payload.substr(0, verb.size()) != verb) return std::nullopt;
    payload.remove_prefix(verb.size());
    const auto space = payload.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == payload.size()) return std::nullopt;
    return PermitGrantNotice{payload.substr(0, space), payload.substr(space + 1)};
}

}  // namespace dlock::detail
