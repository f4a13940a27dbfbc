// Checks RESP2 framing as bytes arrive, before hiredis's reader sees them.
//
// hiredis 0.14 trusts the numbers in headers: it adds to a bulk length
// without an overflow check, reads digits without one, and passes an array
// count to an int. Every header is checked here first, so hiredis only ever
// sees lengths and counts within the reader's limits, and a string can be
// refused from its header, before its bytes are buffered. Framing is flat
// (an array header only announces that items follow), so no nesting is
// tracked; hiredis keeps enforcing its depth of 7.
#pragma once

#include <cstddef>
#include <system_error>

namespace dlock::detail {

class FrameCheck {
public:
    FrameCheck(std::size_t max_string_bytes, std::size_t max_array_elements) noexcept;

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

    const std::size_t max_string_bytes_;
    const std::size_t max_array_elements_;
    State state_ = State::type;
    char type_ = 0;
    std::size_t line_length_ = 0;  // bytes of the current line before its CR
    bool negative_ = false;
    unsigned long long magnitude_ = 0;
    std::size_t payload_left_ = 0;
    std::error_code error_;
};

}  // namespace dlock::detail
