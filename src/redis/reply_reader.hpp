// Turns bytes from the server into Reply values. No I/O: feed it bytes in
// any split, take complete replies out. Built on hiredis's reader, which
// limits nesting to 7 levels; the string and array limits are ours, checked
// from the headers (frame_check.hpp) before hiredis sees them.
//
// Memory follows the bytes received: a string is buffered only when its
// announced length is within the limit, and an array grows as its elements
// arrive, whatever count it announced. Each reply is charged what building
// it allocates (every element is a whole Reply, about 72 bytes, for as
// little as 3 bytes on the wire) against the bytes it took on the wire:
// past reply_memory_factor times those bytes plus max_overhead it fails with
// reply_too_large before the allocation is made. Nothing here throws out of
// next(): running out of memory while building a reply is an error like any
// other.
#pragma once

#include <cstddef>
#include <memory>
#include <system_error>

#include "dlock/reply.hpp"
#include "frame_check.hpp"

struct redisReader;

namespace dlock::detail {

// What one reply may cost in memory: this many times its bytes on the
// wire, plus the reader's max_overhead.
inline constexpr std::size_t reply_memory_factor = 8;
inline constexpr std::size_t default_reply_overhead = std::size_t{16} << 20;

class ReplyReader {
public:
    ReplyReader(std::size_t max_string_bytes, std::size_t max_array_elements,
                std::size_t max_overhead = default_reply_overhead);
    ~ReplyReader();
    ReplyReader(const ReplyReader&) = delete;
    ReplyReader& operator=(const ReplyReader&) = delete;

    void feed(const char* data, std::size_t size);

    // True with a reply in out; false when more bytes are needed or on error.
    // After an error (protocol_error, reply_too_large, or
    // std::errc::not_enough_memory) the reader is spent: the connection it
    // reads must be reset.
    bool next(Reply& out, std::error_code& ec);

    // Per-reply limits (FrameCheck::limit_replies): asked as each reply
    // begins. A reply past its own limit fails with reply_too_large, and
    // limit_detail() says which limit and what the reply answered.
    void limit_replies(FrameCheck::LimitOf limit_of) { frames_.limit_replies(std::move(limit_of)); }
    std::string limit_detail() const { return frames_.limit_detail(); }
    // After a reply went past its memory budget: what it would have cost,
    // for how many bytes received ("would take ... bytes"). Empty otherwise.
    std::string memory_detail() const;

    struct Limits {
        std::size_t max_string_bytes;
        std::size_t max_array_elements;
        std::size_t max_overhead;
        std::error_code error;  // why a callback refused to build an object
        Reply* root = nullptr;  // the reply under construction, owned here
        // The reply under construction: bytes allocated for it (Reply
        // objects, array storage, strings past the small-string buffer) and
        // the bytes its items took on the wire, as Redis encodes them.
        std::size_t built = 0;
        std::size_t wire = 0;
        std::size_t grow_to = 0;        // the element storage admitted for the item being attached
        std::size_t refused_built = 0;  // once over budget: what it would have cost
        Reply* spare = nullptr;  // the last reply's root, owned here: the next root reuses it
    };

private:
    redisReader* reader_;
    Limits limits_;
    FrameCheck frames_;
    std::error_code failed_;
};

}  // namespace dlock::detail
