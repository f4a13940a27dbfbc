// Every lock and semaphore script's reply as the lock kinds read it, on whatever a server
// (or something posing as one) might answer: the input is a RESP stream,
// each reply in it goes to every reader, and every string in it (and the
// raw input) to the inbox notice reader.
//
// Checked: no crash or undefined behaviour (containers are bounds-checked
// in this build); a reading other than "malformed" only from replies in the
// script's vocabulary; counts the client keeps are never 0 for a grant and
// never wrap to 0 when the server counts more; waits stay within a lease.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "fuzz_check.hpp"
#include "hold/lock_keys.hpp"
#include "lock/script_replies.hpp"
#include "lock/semaphore_replies.hpp"
#include "redis/reply_reader.hpp"

using namespace dlock;
using namespace dlock::detail;

namespace {

bool head_is(const Reply& reply, long long value, std::size_t size) {
    return reply.is_array() && reply.elements.size() == size && reply.elements[0].is_integer() &&
           reply.elements[0].integer == value;
}

void check_acquire(const Reply& reply) {
    const auto fresh = read_fresh_acquire(reply);
    switch (fresh.kind) {
        case FreshAcquire::Kind::granted:
            FUZZ_CHECK(head_is(reply, 1, 3));
            FUZZ_CHECK(fresh.count >= 1);
            break;
        case FreshAcquire::Kind::busy:
            // With the caller's arrival in line as a third element, or without.
            FUZZ_CHECK(head_is(reply, 0, 2) || head_is(reply, 0, 3));
            FUZZ_CHECK(fresh.lease_left >= std::chrono::milliseconds(1) && fresh.lease_left <= max_lease);
            FUZZ_CHECK(reply.elements.size() == 3 || fresh.arrival == 0);
            break;
        case FreshAcquire::Kind::stale_operation: FUZZ_CHECK(reply.elements[0].integer == -2); break;
        case FreshAcquire::Kind::malformed: break;
    }
    FUZZ_CHECK(is_grant(reply) == (fresh.kind == FreshAcquire::Kind::granted));

    const auto reentry = read_reentry(reply);
    if (reentry.kind == Reentry::Kind::granted) {
        FUZZ_CHECK(head_is(reply, 1, 3));
        FUZZ_CHECK(reentry.count >= 1);
    }
    if (reentry.kind == Reentry::Kind::malformed) FUZZ_CHECK(fresh.kind == FreshAcquire::Kind::malformed);

    const auto vote = read_master_vote(reply);
    if (vote.vote == Vote::granted) FUZZ_CHECK(reply.elements.size() == 3 && reply.elements[0].integer == 1);
    if (vote.vote == Vote::held_by_another) FUZZ_CHECK(reply.elements.size() == 2 && reply.elements[0].integer == 0);
}

void check_release(const Reply& reply) {
    const auto release = read_release(reply);
    FUZZ_CHECK((release.kind == Release::Kind::malformed) == !reply.is_integer());
    if (release.kind == Release::Kind::malformed) return;
    FUZZ_CHECK((release.kind == Release::Kind::not_ours) == (reply.integer < 0));
    if (release.kind == Release::Kind::not_ours) return;
    // Zero holds left only when the server said so.
    FUZZ_CHECK((release.holds_left == 0) == (reply.integer == 0));
}

void check_others(const Reply& reply) {
    if (read_renewed(reply)) FUZZ_CHECK(reply.is_integer() && reply.integer == 1);
    if (const auto handed = read_hand_off(reply)) {
        // {1, token}, or {1, token, the arrival of the waiter it placed} (a seat).
        FUZZ_CHECK(reply.is_array() && (reply.elements.size() == 2 || reply.elements.size() == 3));
        FUZZ_CHECK(reply.elements[1].is_integer() && handed->token == static_cast<std::uint64_t>(reply.elements[1].integer));
        FUZZ_CHECK((handed->placed_arrival != 0) == (reply.elements.size() == 3));
    }
    try {
        const auto info = read_inspect(reply);
        FUZZ_CHECK(info.ttl >= std::chrono::milliseconds::zero());
        if (!info.held) FUZZ_CHECK(info.owner.empty() && info.holder.empty() && info.fencing_token == 0);
        FUZZ_CHECK(info.held == (info.holds() > 0));
        for (const auto& reader : info.readers) FUZZ_CHECK(reader.ttl >= std::chrono::milliseconds::zero());
    } catch (const Error& e) {
        FUZZ_CHECK(e.code() == errc::protocol_error);
    }
    try {
        (void)read_force_release(reply);
    } catch (const Error& e) {
        FUZZ_CHECK(e.code() == errc::protocol_error);
    }
}

void check_semaphore(const Reply& reply) {
    const auto acquire = read_semaphore_acquire(reply);
    auto limit_ok = [](unsigned limit) { return limit >= 1 && limit <= max_semaphore_limit; };
    switch (acquire.kind) {
        case SemaphoreAcquire::Kind::granted:
            FUZZ_CHECK(head_is(reply, 1, 2) && limit_ok(acquire.limit));
            break;
        case SemaphoreAcquire::Kind::not_granted:
            FUZZ_CHECK(head_is(reply, 0, 2));
            FUZZ_CHECK(acquire.wake >= std::chrono::milliseconds::zero() && acquire.wake <= max_lease);
            break;
        case SemaphoreAcquire::Kind::stale: FUZZ_CHECK(head_is(reply, -2, 1)); break;
        case SemaphoreAcquire::Kind::over_limit: FUZZ_CHECK(head_is(reply, -3, 2) && limit_ok(acquire.limit)); break;
        case SemaphoreAcquire::Kind::malformed: break;
    }
    FUZZ_CHECK(is_semaphore_grant(reply) == (acquire.kind == SemaphoreAcquire::Kind::granted));
    const auto release = read_semaphore_release(reply);
    const bool in_vocabulary = reply.is_integer() && reply.integer >= -1 && reply.integer <= 1;
    FUZZ_CHECK((release == SemaphoreRelease::malformed) == !in_vocabulary);
    if (release == SemaphoreRelease::not_held) FUZZ_CHECK(reply.integer == -1);
    try {
        FUZZ_CHECK(read_semaphore_set_limit(reply) <= max_semaphore_limit);
    } catch (const Error& e) {
        FUZZ_CHECK(e.code() == errc::protocol_error);
    }
    try {
        const auto info = read_semaphore_inspect(reply);
        FUZZ_CHECK(info.holders.size() * 2 == reply.elements[3].elements.size());
        for (const auto& holder : info.holders)
            FUZZ_CHECK(holder.ttl >= std::chrono::milliseconds::zero() && holder.ttl <= max_lease);
    } catch (const Error& e) {
        FUZZ_CHECK(e.code() == errc::protocol_error);
    }
}

void check_revocation(std::string_view payload) {
    const auto notice = read_revocation(payload);
    if (!notice) return;
    // Every part comes from the notice itself, in order.
    const std::string head =
        (notice->reader ? "revoked-read " : "revoked ") + std::string(notice->owner) + " ";
    // The key carries the name's tag (lock_keys.hpp), which encodes back to the same bytes.
    const std::string tail = "dlock:{" + dlock::detail::key_tag(notice->name) + "}";
    FUZZ_CHECK(payload.substr(0, head.size()) == head);
    FUZZ_CHECK(payload.size() >= head.size() + tail.size() && payload.substr(payload.size() - tail.size()) == tail);
}

void check_grant_notice(std::string_view payload) {
    const auto notice = read_grant_notice(payload);
    if (!notice) return;
    // Every part comes from the notice itself, in order.
    const std::string head = "granted " + std::string(notice->owner) + " ";
    const std::string tail = "dlock:{" + dlock::detail::key_tag(notice->name) + "}";
    FUZZ_CHECK(payload.substr(0, head.size()) == head);
    FUZZ_CHECK(payload.size() >= head.size() + tail.size() && payload.substr(payload.size() - tail.size()) == tail);
}

void check_all(const Reply& reply, int depth) {
    check_acquire(reply);
    check_release(reply);
    check_others(reply);
    check_semaphore(reply);
    if (reply.is_text()) {
        check_revocation(reply.text);
        check_grant_notice(reply.text);
    }
    if (depth < 2)
        for (const auto& element : reply.elements) check_all(element, depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    check_revocation(bytes);
    check_grant_notice(bytes);
    ReplyReader reader(1 << 16, 1 << 10);
    reader.feed(bytes.data(), bytes.size());
    Reply reply;
    std::error_code ec;
    for (int n = 0; n < 64 && reader.next(reply, ec); ++n) check_all(reply, 0);
    return 0;
}
