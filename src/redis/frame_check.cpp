#include "frame_check.hpp"

#include <algorithm>
#include <climits>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// Headers and integers are short; leading zeros past this are an attack.
constexpr std::size_t max_number_line = 32;

// hiredis adds 2 (the CRLF) to a bulk length in a long long, and hands an
// array count to an int.
constexpr unsigned long long hiredis_max_bulk = LLONG_MAX - 2;
constexpr unsigned long long hiredis_max_count = INT_MAX;

bool numeric(char type) { return type == ':' || type == '$' || type == '*'; }

}  // namespace

FrameCheck::FrameCheck(std::size_t max_string_bytes, std::size_t max_array_elements) noexcept
    : max_string_bytes_(max_string_bytes), max_array_elements_(max_array_elements) {}

bool FrameCheck::fail(std::error_code ec) noexcept {
    error_ = ec;
    return false;
}

void FrameCheck::begin_reply() {
    limit_ = limit_of_ ? limit_of_(replies_begun_) : ReplyLimit{};
    ++replies_begun_;
    items_left_ = 1;
    reply_bytes_ = 0;
    reply_elements_ = 0;
}

// One item of the reply under way is complete (a string, a number, a nil,
// an empty array).
bool FrameCheck::item_done() noexcept {
    if (items_left_ > 0) --items_left_;
    return true;
}

bool FrameCheck::over_reply_limit(const char* which, unsigned long long amount) noexcept {
    exceeded_ = which;
    exceeded_amount_ = amount;
    return fail(errc::reply_too_large);
}

std::string FrameCheck::limit_detail() const {
    if (!exceeded_) return {};
    const bool elements = std::string_view(exceeded_) == "elements";
    return "the reply to " + std::string(limit_.what) + " holds at least " + std::to_string(exceeded_amount_) + " " +
           exceeded_ + ", more than its limit of " +
           std::to_string(elements ? limit_.max_elements : limit_.max_bytes) +
           ": the server is not a Redis server dlock knows, or is hostile; the connection was reset";
}

std::size_t FrameCheck::scan(const char* data, std::size_t size) noexcept {
    std::size_t i = 0;
    while (i < size && !error_) {
        if (state_ == State::payload) {
            auto take = std::min(payload_left_, size - i);
            payload_left_ -= take;
            reply_bytes_ += take;  // within the limit: checked from the header
            i += take;
            if (payload_left_ == 0) state_ = State::payload_cr;
            continue;
        }
        const char c = data[i];
        if (state_ == State::type && items_left_ == 0) {
            try {
                begin_reply();
            } catch (...) {  // the limit could not be looked up (bad_alloc)
                fail(std::make_error_code(std::errc::not_enough_memory));
                break;
            }
        }
        if (++reply_bytes_ > limit_.max_bytes) {
            over_reply_limit("bytes", reply_bytes_);
            break;
        }
        bool ok = true;
        switch (state_) {
            case State::type: ok = on_type(c); break;
            case State::line: ok = on_line(c); break;
            case State::line_end: ok = on_line_end(c); break;
            case State::payload_cr:
                ok = c == '\r' || fail(errc::protocol_error);
                state_ = State::payload_lf;
                break;
            case State::payload_lf:
                ok = (c == '\n' && item_done()) || fail(errc::protocol_error);
                state_ = State::type;
                break;
            case State::payload: break;
        }
        if (!ok) break;
        ++i;
    }
    return i;
}

bool FrameCheck::on_type(char c) noexcept {
    if (c != '+' && c != '-' && !numeric(c)) return fail(errc::protocol_error);
    type_ = c;
    line_length_ = 0;
    negative_ = false;
    magnitude_ = 0;
    state_ = State::line;
    return true;
}

bool FrameCheck::on_line(char c) noexcept {
    if (c == '\r') {
        state_ = State::line_end;
        return true;
    }
    if (c == '\n') return fail(errc::protocol_error);
    ++line_length_;
    if (!numeric(type_)) return line_length_ <= max_string_bytes_ || fail(errc::reply_too_large);
    if (line_length_ > max_number_line) return fail(errc::protocol_error);
    if (c == '-' && line_length_ == 1) {
        negative_ = true;
        return true;
    }
    if (c < '0' || c > '9') return fail(errc::protocol_error);
    // Up to 2^63, the magnitude of LLONG_MIN; never wraps.
    constexpr unsigned long long most = static_cast<unsigned long long>(LLONG_MAX) + 1;
    const auto digit = static_cast<unsigned long long>(c - '0');
    if (magnitude_ > (most - digit) / 10) return fail(errc::protocol_error);
    magnitude_ = magnitude_ * 10 + digit;
    return true;
}

bool FrameCheck::on_line_end(char c) noexcept {
    if (c != '\n') return fail(errc::protocol_error);
    state_ = State::type;
    const bool has_digits = line_length_ > (negative_ ? 1u : 0u);
    if (!numeric(type_)) return item_done();
    if (!has_digits) return fail(errc::protocol_error);
    if (!negative_ && magnitude_ > static_cast<unsigned long long>(LLONG_MAX)) return fail(errc::protocol_error);
    if (type_ == ':') return item_done();
    // A length or count: -1 is nil, other negatives are malformed.
    if (negative_) return (magnitude_ == 1 && item_done()) || fail(errc::protocol_error);
    if (type_ == '*') {
        if (magnitude_ > max_array_elements_ || magnitude_ > hiredis_max_count) return fail(errc::reply_too_large);
        // Both stay far below 2^64: each header adds at most INT_MAX.
        reply_elements_ += magnitude_;
        if (reply_elements_ > limit_.max_elements) return over_reply_limit("elements", reply_elements_);
        item_done();
        items_left_ += magnitude_;
        return true;
    }
    if (magnitude_ > max_string_bytes_ || magnitude_ > hiredis_max_bulk) return fail(errc::reply_too_large);
    // The payload and its CRLF, before they are buffered.
    if (limit_.max_bytes != SIZE_MAX && magnitude_ + 2 > limit_.max_bytes - std::min<unsigned long long>(reply_bytes_, limit_.max_bytes))
        return over_reply_limit("bytes", reply_bytes_ + magnitude_ + 2);
    payload_left_ = static_cast<std::size_t>(magnitude_);
    state_ = payload_left_ == 0 ? State::payload_cr : State::payload;
    return true;
}

}  // namespace dlock::detail
