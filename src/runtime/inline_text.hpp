// Text made of a few pieces, kept inside the object that owns it when it is
// short enough (Capacity bytes), else in one heap string: for the key names
// and owner names made per lock object and owner, so that making one costs
// no allocation of its own in the common case. Not copyable or movable: the
// views it gives point into itself.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace dlock::detail {

template <std::size_t Capacity>
class InlineText {
public:
    // The pieces, one after the other.
    InlineText(std::initializer_list<std::string_view> pieces) {
        std::size_t size = 0;
        for (auto piece : pieces) size += piece.size();
        char* bytes = size <= Capacity ? inline_ : (long_.resize(size), long_.data());
        std::size_t at = 0;
        for (auto piece : pieces) at += piece.copy(bytes + at, piece.size());
        text_ = std::string_view(bytes, size);
    }
    InlineText(const InlineText&) = delete;
    InlineText& operator=(const InlineText&) = delete;

    std::string_view view() const noexcept { return text_; }
    // count bytes from offset (within the text).
    std::string_view view(std::size_t offset, std::size_t count) const noexcept { return text_.substr(offset, count); }

private:
    std::string_view text_;
    char inline_[Capacity];
    std::string long_;
};

}  // namespace dlock::detail
