// Checks RESP2 framing as bytes arrive, before hiredis's reader sees them.
//
// hiredis 0.14 trusts the numbers in headers: it adds to a bulk length
// without an overflow check, reads digits without one, and passes an array
// count to an int. Every header is checked here first, so hiredis only ever
// sees lengths and counts within the reader's limits, and a string can be
// refused from its header, before its bytes are buffered. Framing is flat
// (an array header only announces that items follow): no nesting is
// tracked, only how many items the reply under way still owes, which tells
// where each reply ends so that it can be held to a ReplyLimit of its own;
// hiredis keeps enforcing its depth of 7.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail {

// What one reply may hold, on top of the reader's limits: the replies to a
// lock script are a few numbers, so a reply to one that announces more is
// refused from its header, before anything is built for it.
struct ReplyLimit {
    std::size_t max_elements = SIZE_MAX;  // array elements in the whole reply, at any depth
    std::size_t max_bytes = SIZE_MAX;     // the whole reply on the wire
    std::string_view what;                // what the reply answers, for the error ("lock script 'acquire'")
    std::array<char, 16> command{};       // the command's name (at most 15 bytes), for errors about its reply
    bool limited() const noexcept { return max_elements != SIZE_MAX || max_bytes != SIZE_MAX; }
};

class FrameCheck {
public:
    FrameCheck(std::size_t max_string_bytes, std::size_t max_array_elements) noexcept;

    // Asked as each reply begins, with its index in the stream (0, 1, ...).
    using LimitOf = std::function<ReplyLimit(std::size_t index)>;
    void limit_replies(LimitOf limit_of) { limit_of_ = std::move(limit_of); }
    // After a reply went past its own ReplyLimit: which limit, and what the
    // reply answered. Empty otherwise.
    std::string limit_detail() const;

    // Scans the next bytes of the stream. Returns how many of them are
    // well-framed and within the limits: all of them, or fewer with error()
    // set (protocol_error or reply_too_large) at the first bad byte. Once an
    // error is set, nothing more is accepted.
    std::size_t scan(const char* data, std::size_t size) noexcept;
    std::error_code error() const noexcept { return error_; }

private:
    enum class State { type, line, line_end, payload, payload_cr, payload_lf };

    bool on_type(char c) noexcept;
    bool on_line(char c) noexcept;
    bool on_line_end(char c) noexcept;
    bool fail(std::error_code ec) noexcept;
    void begin_reply();
    bool item_done() noexcept;
    bool over_reply_limit(const char* which, unsigned long long amount) noexcept;

    const std::size_t max_string_bytes_;
    const std::size_t max_array_elements_;
    State state_ = State::type;
    char type_ = 0;
    std::size_t line_length_ = 0;  // bytes of the current line before its CR
    bool negative_ = false;
    unsigned long long magnitude_ = 0;
    std::size_t payload_left_ = 0;
    std::error_code error_;

    // The reply under way: how many items (strings, numbers, arrays) it
    // still owes, what it may hold and what it has announced so far.
    LimitOf limit_of_;
    std::size_t replies_begun_ = 0;
    unsigned long long items_left_ = 0;
    ReplyLimit limit_;
    unsigned long long reply_bytes_ = 0;
    unsigned long long reply_elements_ = 0;
    const char* exceeded_ = nullptr;  // "elements" or "bytes", once a reply went past its limit
    unsigned long long exceeded_amount_ = 0;
};

}  // namespace dlock::detail
