// A number's decimal text, kept inside the object: for numbers sent as
// script arguments on a hot path (a wait's arrival number has 16 digits,
// one past std::string's inline buffer, so std::to_string allocates).
// Thread-safety: immutable once made.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

namespace dlock::detail {

class DecimalText {
public:
    // The text of n; empty for 0 when zero_is_empty (a number that is absent).
    explicit DecimalText(std::uint64_t n, bool zero_is_empty = false) noexcept
        : size_(n == 0 && zero_is_empty ? 0 : static_cast<unsigned char>(std::to_chars(bytes_, bytes_ + sizeof bytes_, n).ptr - bytes_)) {}

    std::string_view view() const noexcept { return {bytes_, size_}; }

private:
    char bytes_[20];  // the most digits a 64-bit number has
    unsigned char size_;
};

}  // namespace dlock::detail
