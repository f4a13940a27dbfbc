// Turns bytes from the server into Reply values. No I/O: feed it bytes in
// any split, take complete replies out. Built on hiredis's reader, which
// limits nesting to 7 levels; the string and array limits are ours, checked
// from the headers (frame_check.hpp) before hiredis sees them.
//
// Memory follows the bytes received: a string is buffered only when its
// announced length is within the limit, and an array grows as its elements
// arrive, whatever count it announced. Nothing here throws out of next():
// running out of memory while building a reply is an error like any other.
#pragma once

#include <cstddef>
#include <memory>
#include <system_error>

#include "dlock/reply.hpp"
#include "frame_check.hpp"

struct redisReader;

namespace dlock::detail {

class ReplyReader {
public:
    ReplyReader(std::size_t max_string_bytes, std::size_t max_array_elements);
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

    struct Limits {
        std::size_t max_string_bytes;
        std::size_t max_array_elements;
        std::error_code error;  // why a callback refused to build an object
        Reply* root = nullptr;  // the reply under construction, owned here
    };

private:
    redisReader* reader_;
    Limits limits_;
    FrameCheck frames_;
    std::error_code failed_;
};

}  // namespace dlock::detail
